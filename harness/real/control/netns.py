"""Control through `ip netns exec` on this machine (or plain local processes when no namespace is given).

Commands run as local subprocesses in their own process group, so a timeout
kills everything they started. Files are local files: nodes of the netns
backend share the host's file system and each has its own directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.real.control.agent import AgentChannel
from harness.real.control.base import CommandTimeout, ControlError, Transport


class NetnsTransport(Transport):
    """Run commands inside network namespace `netns` (needs root); `netns=None` runs them locally."""

    node_side_timeout = False

    def __init__(self, node: str, netns: str | None, python: str = sys.executable, use_agent: bool = True) -> None:
        super().__init__(node, python=python, use_agent=use_agent)
        self.netns = netns

    @property
    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns] if self.netns else []

    def argv(self, command: str) -> list[str]:
        """The local argv that runs a shell snippet in this node's namespace."""
        return [*self.prefix, "sh", "-c", command]

    def _start_agent(self) -> AgentChannel | None:
        try:  # its own session: Ctrl-C in the terminal leaves it to the harness's cleanup, which may need it
            proc = subprocess.Popen(
                [*self.prefix, *self.agent_argv()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            return None
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None and stdout is not None

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        def close() -> None:
            with contextlib.suppress(OSError):
                stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
            stdout.close()

        return AgentChannel(self.node, write, iter(lambda: stdout.read1(65536), b""), close)

    def _exec(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]:
        try:
            proc = subprocess.Popen(
                self.argv(command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            raise ControlError(f"{self.node}: cannot run `ip netns exec`: {e}") from e
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
            raise CommandTimeout(self.node, command, timeout or 0.0) from None
        except BaseException:  # Ctrl-C while waiting: do not leave the command running
            _kill_group(proc.pid)
            proc.wait()
            raise
        return proc.returncode, out, err

    def put_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        target = Path(path)
        raw = data.encode() if isinstance(data, str) else data
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(self.temp_name(path))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as e:
            raise ControlError(f"{self.node}: cannot write {path}: {e}") from e

    def get_file(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise ControlError(f"{self.node}: cannot read {path}: {e}") from e


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
