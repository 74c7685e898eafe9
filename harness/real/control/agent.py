"""The control side of the node agent: requests over one long-lived stream instead of a process per command.

A transport whose every command costs a round of process creation on the node (docker exec:
~80 ms, plus ~40 ms to start Python for the daemon helper) keeps one agent running per node
(`daemon_helper.py agent`) and sends it JSON lines; a fault then lands a few milliseconds after
it is due instead of ~150 ms, which matters when a failure needs a kill inside a 200 ms window.
Requests run concurrently on the node and are matched to their answers by id. If the stream
breaks, every waiting request fails with ControlError and the transport goes back to plain exec.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from harness.real.control.base import CommandTimeout, ControlError


class AgentChannel:
    """Requests to one node's agent. `write` sends bytes to its stdin; `chunks` yields its stdout."""

    def __init__(self, node: str, write: Callable[[bytes], None], chunks: Iterable[bytes], close: Callable[[], None]):
        self.node = node
        self._write = write
        self._close = close
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._waiting: dict[int, tuple[threading.Event, dict[str, Any]]] = {}
        self.broken: str | None = None
        self._reader = threading.Thread(target=self._read, args=(chunks,), daemon=True, name=f"agent-{node}")
        self._reader.start()

    def _read(self, chunks: Iterable[bytes]) -> None:
        buffer = b""
        try:
            for chunk in chunks:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._answer(json.loads(line))
            reason = "the agent's stream closed"
        except Exception as e:  # noqa: BLE001 - a broken stream fails the waiting requests below
            reason = f"the agent's stream broke: {e}"
        self._fail_all(reason)

    def _answer(self, reply: dict[str, Any]) -> None:
        with self._lock:
            waiting = self._waiting.pop(reply.get("id"), None)  # type: ignore[arg-type]
        if waiting is not None:
            event, box = waiting
            box.update(reply)
            event.set()

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            self.broken = self.broken or reason
            waiting, self._waiting = self._waiting, {}
        for event, box in waiting.values():
            box["error"] = reason
            event.set()

    def request(self, payload: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send one request and wait for its answer; ControlError if the agent is gone, CommandTimeout past
        `timeout` (the agent ends a timed-out `sh` itself)."""
        event, box = threading.Event(), {}
        with self._lock:
            if self.broken:
                raise ControlError(f"{self.node}: {self.broken}")
            rid = next(self._ids)
            self._waiting[rid] = (event, box)
        try:
            with self._write_lock:
                self._write(json.dumps({"id": rid, **payload}).encode() + b"\n")
        except Exception as e:  # noqa: BLE001 - any failure to write means the stream is gone
            self._fail_all(f"cannot write to the agent: {e}")
        if not event.wait(timeout):
            with self._lock:
                self._waiting.pop(rid, None)
            raise CommandTimeout(self.node, str(payload.get("command") or payload.get("args")), timeout or 0.0)
        if "error" in box:
            raise ControlError(f"{self.node}: agent: {box['error']}")
        return box

    def sh(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]:
        """`sh -c command` on the node: (exit status, stdout, stderr)."""
        backstop = None if timeout is None else timeout + 5  # the agent kills a timed-out command itself
        reply = self.request({"op": "sh", "command": command, "timeout": timeout}, backstop)
        if reply.get("timeout"):
            raise CommandTimeout(self.node, command, timeout or 0.0)
        return int(reply["status"]), base64.b64decode(reply["stdout"]), base64.b64decode(reply["stderr"])

    def daemon(self, args: list[str], timeout: float | None) -> dict[str, Any]:
        """One daemon-helper operation (start, status, signal, kill, stop) on the node; its JSON reply."""
        return dict(self.request({"op": "daemon", "args": args}, timeout)["reply"])

    def write_file(self, path: str, data: bytes, mode: int, timeout: float | None = 30.0) -> None:
        """Replace a file on the node atomically (parents created)."""
        self.request({"op": "write", "path": path, "data": base64.b64encode(data).decode(), "mode": mode}, timeout)

    def close(self) -> None:
        self._fail_all("the agent was closed")
        with contextlib.suppress(Exception):  # closing a stream that is already gone
            self._close()
