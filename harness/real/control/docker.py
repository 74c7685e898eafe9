"""Control through `docker exec` (Docker SDK): commands via the exec API, files via tar archives.

One exec costs ~80 ms, so each container keeps a control agent (one long-lived exec, see
harness/real/control/agent.py) that runs commands, daemon operations and file writes for a few
milliseconds each; plain exec and tar archives remain the fallback when the agent cannot run.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
from pathlib import PurePosixPath
from typing import Any

from docker.utils.socket import STDOUT, frames_iter

from harness.real.control.agent import AgentChannel
from harness.real.control.base import CommandTimeout, ControlError, Transport


class DockerTransport(Transport):
    """Control of one container. `container` is a docker-py Container (or its name/id with `client`)."""

    def __init__(
        self, node: str, container: Any, client: Any = None, python: str = "python3", use_agent: bool = True
    ) -> None:
        super().__init__(node, python=python, use_agent=use_agent)
        if isinstance(container, str):
            if client is None:
                import docker

                client = docker.from_env()
            container = client.containers.get(container)
        self.container = container
        self.api = container.client.api

    def _start_agent(self) -> AgentChannel | None:
        try:
            exec_id = self.api.exec_create(
                self.container.id, self.agent_argv(), stdin=True, stdout=True, stderr=True, tty=False
            )["Id"]
            sock = self.api.exec_start(exec_id, socket=True)
        except Exception:  # noqa: BLE001 - no agent: every command goes through plain exec
            return None
        raw = getattr(sock, "_sock", sock)
        chunks = (data for stream, data in frames_iter(sock, tty=False) if stream == STDOUT)
        return AgentChannel(self.node, raw.sendall, chunks, sock.close)

    def _exec(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]:
        try:
            exec_id = self.api.exec_create(self.container.id, ["sh", "-c", command], stdout=True, stderr=True)["Id"]
        except Exception as e:  # docker.errors.APIError and connection errors
            raise ControlError(f"{self.node}: docker exec failed: {e}") from e
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["out"] = self.api.exec_start(exec_id, demux=True)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = e

        # the exec API has no timeout of its own; the node-side `timeout` ends the command, this is a backstop
        worker = threading.Thread(target=work, daemon=True, name=f"docker-exec-{self.node}")
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise CommandTimeout(self.node, command, timeout or 0.0)
        if "error" in box:
            raise ControlError(f"{self.node}: docker exec failed: {box['error']}") from box["error"]
        out, err = box["out"] or (None, None)
        status = None
        for _ in range(100):  # the exit code appears a moment after the stream closes
            status = self.api.exec_inspect(exec_id).get("ExitCode")
            if status is not None:
                break
            time.sleep(0.01)
        return (255 if status is None else int(status)), out or b"", err or b""

    def put_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        agent = self.agent()
        if agent is not None:
            try:
                agent.write_file(path, raw, mode)
                return
            except ControlError:
                pass  # the agent is gone: through a tar archive below
        target = PurePosixPath(path)
        tmp = PurePosixPath(self.temp_name(path))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(tmp.name)
            info.size = len(raw)
            info.mode = mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(raw))
        self.makedirs(str(target.parent))
        try:
            ok = self.container.put_archive(str(target.parent), buf.getvalue())
        except Exception as e:
            raise ControlError(f"{self.node}: cannot write {path}: {e}") from e
        if not ok:
            raise ControlError(f"{self.node}: cannot write {path}")
        self.run(["mv", "-f", str(tmp), str(target)], check=True)

    def get_file(self, path: str, attempts: int = 3) -> bytes:
        for attempt in range(attempts):
            try:
                stream, _ = self.container.get_archive(path)
                blob = b"".join(stream)
            except Exception as e:
                raise ControlError(f"{self.node}: cannot read {path}: {e}") from e
            try:
                with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                    member = tar.next()
                    f = tar.extractfile(member) if member is not None else None
                    if f is None:
                        raise ControlError(f"{self.node}: {path} is not a regular file")
                    return f.read()
            except tarfile.ReadError as e:  # the file shrank while docker archived it: read it again
                if attempt == attempts - 1:
                    raise ControlError(f"{self.node}: {path} kept changing while it was read: {e}") from e
        raise AssertionError("unreachable")
