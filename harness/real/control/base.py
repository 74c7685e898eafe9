"""The one control interface every real backend offers: run commands, move files, drive daemons.

A `Transport` is bound to one node. Subclasses supply three primitives (`_exec`,
`put_file`, `get_file`); everything else — timeouts, `cd`/environment, and the
daemon life cycle (start detached with a pidfile, SIGTERM/SIGKILL/SIGSTOP/SIGCONT)
— is written here once on top of them, so docker exec, SSH and `ip netns exec`
behave identically.
"""

from __future__ import annotations

import json
import os
import shlex
import signal as _signal
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
# extra seconds the control side waits past a node-side `timeout` before it gives up on the transport
GRACE = 5.0


@cache
def helper_source() -> str:
    """Source of the node-side daemon helper, sent with `python3 -c` (nodes need only Python 3)."""
    return Path(__file__).with_name("daemon_helper.py").read_text()


class ControlError(Exception):
    """The transport could not do what was asked (connection lost, bad path, …)."""


@dataclass(frozen=True)
class Result:
    """What a command did on a node."""

    node: str
    command: str
    exit_status: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def check(self) -> Result:
        """Return self, or raise CommandError if the command failed."""
        if self.exit_status != 0:
            raise CommandError(self)
        return self


class CommandError(ControlError):
    """A command exited non-zero (raised by `run(..., check=True)` and `Result.check()`)."""

    def __init__(self, result: Result) -> None:
        self.result = result
        detail = (result.stderr.strip() or result.stdout.strip())[-800:]
        super().__init__(f"{result.node}: `{result.command}` exited {result.exit_status}: {detail}")


class CommandTimeout(ControlError):
    """A command did not finish within its timeout (it has been killed on the node)."""

    def __init__(self, node: str, command: str, timeout: float, result: Result | None = None) -> None:
        self.node, self.command, self.timeout, self.result = node, command, timeout, result
        super().__init__(f"{node}: `{command}` did not finish within {timeout:g}s")


@dataclass(frozen=True)
class DaemonSpec:
    """A long-running process to start detached on a node.

    `pidfile` holds "<pid> <start-time>" so a recycled pid is never signalled by
    mistake; the process is a session leader, so signals reach its whole group.
    """

    argv: Sequence[str]
    pidfile: str
    logfile: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DaemonStatus:
    pid: int | None
    state: str | None  # /proc state letter of the daemon: R, S, D, T (stopped), … ; None when not running
    group: str = ""  # state letters of every process in its process group

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def paused(self) -> bool:
        """Stopped: some process of the group is in T and none is runnable or sleeping.

        (A daemon stopped while it vfork()s shows D, waiting for a child that is itself stopped.)
        """
        states = self.group or (self.state or "")
        return "T" in states.upper() and not any(c in "RS" for c in states)


class ControlAgent(Protocol):
    """A node's control agent as a `Transport` (and its subclasses) use it: `harness.real.control.agent.AgentChannel`
    is the one, declared here because agent.py imports this module."""

    @property
    def broken(self) -> str | None: ...  # why it stopped answering (None: it answers)

    def sh(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]: ...
    def daemon(self, args: list[str], timeout: float | None) -> dict[str, Any]: ...
    def write_file(self, path: str, data: bytes, mode: int, timeout: float | None = 30.0) -> None: ...
    def close(self) -> None: ...


class Transport(ABC):
    """Control of one node. Subclasses implement `_exec`, `put_file`, `get_file` (and `close`)."""

    #: enforce timeouts on the node with coreutils `timeout` (remote transports cannot kill otherwise)
    node_side_timeout = True

    #: how many times a transport with an agent starts one before it stays with a process per command
    agent_starts = 3

    def __init__(self, node: str, python: str = "python3", use_agent: bool = False) -> None:
        self.node = node
        self.python = python
        self.use_agent = use_agent and not os.environ.get("KRAFTWERK_NO_AGENT")
        self._agent: ControlAgent | None = None
        self._agent_started = 0
        self._agent_lock = threading.Lock()

    # ------------------------------------------------------------------ primitives
    @abstractmethod
    def _exec(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]:
        """Run `sh -c command` on the node; (exit status, stdout, stderr). Raise CommandTimeout past `timeout`."""

    @abstractmethod
    def put_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file on the node atomically (temporary name, then rename); parents are created."""

    @abstractmethod
    def get_file(self, path: str) -> bytes:
        """Read a file from the node; ControlError if it does not exist."""

    def close(self) -> None:
        """Release connections held for this node (and stop its agent)."""
        with self._agent_lock:
            if self._agent is not None:
                self._agent.close()
                self._agent = None

    def _start_agent(self) -> ControlAgent | None:
        """Start `python3 -u -c <daemon helper> agent <daemon helper>` on the node, talking over a stream of
        this transport's; None if this transport has no way to (the default) or it could not start."""
        return None

    def agent(self) -> ControlAgent | None:
        """The node's running control agent (harness/real/control/agent.py), started on first use and again if it
        died (up to `agent_starts` times): commands, daemon operations and file writes then cost no new
        process on the node. None: a process per command (no agent for this transport, or KRAFTWERK_NO_AGENT)."""
        with self._agent_lock:
            if self._agent is not None and not self._agent.broken:
                return self._agent
            if not self.use_agent or self._agent_started >= self.agent_starts:
                return None
            self._agent_started += 1
            self._agent = self._start_agent()
            return self._agent

    def agent_argv(self) -> list[str]:
        """The node-side command line of the agent."""
        source = helper_source()
        return [self.python, "-u", "-c", source, "agent", source]

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.node!r})"

    # ------------------------------------------------------------------ commands
    def run(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Result:
        """Run a command on the node: an argv list (quoted for you) or a shell snippet (a string).

        Returns the exit status and output; `check=True` raises CommandError on a non-zero
        exit. Past `timeout` seconds the command is killed and CommandTimeout is raised.
        """
        text = command if isinstance(command, str) else shlex.join(command)
        script = text
        if env:
            script = " ".join(f"export {k}={shlex.quote(v)};" for k, v in env.items()) + " " + script
        if cwd:
            script = f"cd {shlex.quote(cwd)} && {script}"
        if timeout is not None and self.node_side_timeout:
            script = f"exec timeout -k 2 {timeout:g} sh -c {shlex.quote(script)}"
        started = time.monotonic()
        backstop = None if timeout is None else timeout + (GRACE if self.node_side_timeout else 0.0)
        status, out, err = self._agent_or(lambda a: a.sh(script, backstop), lambda: self._exec(script, backstop))
        elapsed = time.monotonic() - started
        result = Result(
            self.node, text, status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), elapsed
        )
        if timeout is not None and status in (124, 137) and elapsed >= timeout:
            raise CommandTimeout(self.node, text, timeout, result)
        return result.check() if check else result

    def _agent_or(self, through_agent: Callable[[ControlAgent], T], otherwise: Callable[[], T]) -> T:
        """`through_agent(agent)` if the node's agent runs; otherwise, or if the agent is gone (any ControlError
        but a timeout), `otherwise()`, which does the same with a process of its own."""
        agent = self.agent()
        if agent is not None:
            try:
                return through_agent(agent)
            except CommandTimeout:
                raise
            except ControlError:
                pass
        return otherwise()

    def sh(self, command: str | Sequence[str], **kwargs: object) -> str:
        """Run and return stdout; raise CommandError on failure."""
        return self.run(command, check=True, **kwargs).stdout  # type: ignore[arg-type]

    # ------------------------------------------------------------------ files
    def remove(self, *paths: str) -> None:
        """Delete files or directories (recursively) if they exist."""
        if paths:
            self.run(["rm", "-rf", "--", *paths], check=True)

    def exists(self, path: str) -> bool:
        return self.run(["test", "-e", path]).ok

    def makedirs(self, path: str) -> None:
        self.run(["mkdir", "-p", path], check=True)

    @staticmethod
    def temp_name(path: str) -> str:
        p = PurePosixPath(path)
        return str(p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp"))

    # ------------------------------------------------------------------ daemons
    def _daemon(self, *args: str, timeout: float = DEFAULT_TIMEOUT) -> dict:
        return self._agent_or(lambda a: a.daemon(list(args), timeout), lambda: self._daemon_helper(args, timeout))

    def _daemon_helper(self, args: Sequence[str], timeout: float) -> dict:
        result = self.run([self.python, "-c", helper_source(), *args], timeout=timeout)
        if result.exit_status != 0:
            raise CommandError(result)
        try:
            return json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise ControlError(f"{self.node}: bad reply from daemon helper: {result.stdout!r}") from None

    def start_daemon(self, spec: DaemonSpec) -> int:
        """Start `spec.argv` detached (own session, stdin from /dev/null, output appended to the log).

        Raises ControlError if a live process already owns the pidfile. Returns the pid.
        """
        payload = {
            "argv": list(spec.argv),
            "pidfile": spec.pidfile,
            "logfile": spec.logfile,
            "cwd": spec.cwd,
            "env": dict(spec.env),
        }
        reply = self._daemon("start", json.dumps(payload))
        if reply.get("error"):
            raise ControlError(f"{self.node}: {reply['error']}")
        return int(reply["pid"])

    def daemon_status(self, pidfile: str) -> DaemonStatus:
        """Whether the daemon of this pidfile is alive (zombies count as dead) and its /proc state."""
        reply = self._daemon("status", pidfile)
        return DaemonStatus(reply.get("pid"), reply.get("state"), reply.get("group", ""))

    def signal_daemon(self, pidfile: str, sig: int | _signal.Signals) -> int | None:
        """Send a signal to the daemon's process group; the pid signalled, or None if it was not running."""
        return self._daemon("signal", pidfile, str(int(sig)))["pid"]

    def kill_daemon(self, pidfile: str, timeout: float = 10.0) -> int | None:
        """SIGKILL the daemon (kill -9) and wait until it is gone; the pid killed, or None."""
        return self._daemon("kill", pidfile, str(timeout), timeout=timeout + GRACE)["pid"]

    def stop_daemon(self, pidfile: str, timeout: float = 10.0) -> int | None:
        """Graceful stop: SIGCONT+SIGTERM, wait up to `timeout`, then SIGKILL; the pidfile is removed."""
        return self._daemon("stop", pidfile, str(timeout), timeout=timeout + GRACE)["pid"]

    def pause_daemon(self, pidfile: str) -> int | None:
        """SIGSTOP the daemon's process group."""
        return self.signal_daemon(pidfile, _signal.SIGSTOP)

    def resume_daemon(self, pidfile: str) -> int | None:
        """SIGCONT the daemon's process group."""
        return self.signal_daemon(pidfile, _signal.SIGCONT)
