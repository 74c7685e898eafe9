"""A cluster of real ``python -m nodes`` processes on loopback, for the process test and benchmarks.

Nodes bind 127.0.0.2, 127.0.0.3, … when the kernel allows it (Linux routes all of 127/8 to
loopback), else 127.0.0.1 with distinct ports. Every wait is bounded; :meth:`ProcCluster.cleanup`
SIGKILLs whatever is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from nodes.runtime.kvclient import KvClient

ROOT = Path(__file__).resolve().parents[3]

FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "300",
    "controller.quorum.retry.backoff.ms": "20",
}


def loopback_hosts(n: int) -> list[str]:
    """``127.0.0.2 … 127.0.0.(n+1)`` if they can be bound, else ``127.0.0.1`` n times."""
    hosts = [f"127.0.0.{i + 2}" for i in range(n)]
    try:
        for host in hosts:
            with socket.socket() as s:
                s.bind((host, 0))
    except OSError:
        return ["127.0.0.1"] * n
    return hosts


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class ProcNode:
    node_id: int
    host: str
    controller_port: int
    client_port: int
    directory: Path
    config: Path
    proc: subprocess.Popen[bytes] | None = None
    stderr: IO[bytes] | None = None
    exits: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"n{self.node_id}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class ProcCluster:
    """``n`` node processes sharing one voter set; data under ``base/n<id>``."""

    def __init__(
        self,
        base: Path,
        n: int = 3,
        *,
        props: Mapping[str, str] | None = None,
        bugs: Iterable[str] = (),
        python: str = sys.executable,
    ) -> None:
        self.base = Path(base)
        self.python = python
        hosts = loopback_hosts(n)
        self.nodes: dict[int, ProcNode] = {}
        for i, host in enumerate(hosts, 1):
            directory = self.base / f"n{i}"
            self.nodes[i] = ProcNode(
                i, host, free_port(host), free_port(host), directory, self.base / f"n{i}.properties"
            )
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes.values())
        extra = {**FAST, **(props or {})}
        if bugs:
            extra["kraftwerk.bugs"] = ",".join(bugs)
        for node in self.nodes.values():
            lines = {
                "node.id": str(node.node_id),
                "process.roles": "controller,broker",
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://{node.host}:{node.controller_port},CLIENT://{node.host}:{node.client_port}",
                "log.dirs": str(node.directory),
                "kraftwerk.seed": str(node.node_id),
                **extra,
            }
            node.config.parent.mkdir(parents=True, exist_ok=True)
            node.config.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))

    # ------------------------------------------------------------------ processes

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert not node.alive, f"{node.name} is already running"
        node.directory.mkdir(parents=True, exist_ok=True)
        if node.stderr is not None:
            node.stderr.close()
        node.stderr = open(self.base / f"{node.name}.stderr", "ab")  # noqa: SIM115 - closed in cleanup
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        node.proc = subprocess.Popen(
            [self.python, "-m", "nodes", "--config", str(node.config)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=node.stderr,
            stderr=node.stderr,
        )

    def start_all(self) -> None:
        for node_id in self.nodes:
            self.start(node_id)

    def signal(self, node_id: int, sig: int, timeout: float = 10.0) -> int:
        """Send ``sig`` and wait (bounded) for the process to exit; returns its exit code."""
        node = self.nodes[node_id]
        assert node.proc is not None
        node.proc.send_signal(sig)
        try:
            code = node.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait(5)
            raise AssertionError(f"{node.name} did not exit within {timeout}s after signal {sig}") from None
        node.exits.append(code)
        return code

    def kill(self, node_id: int) -> int:
        return self.signal(node_id, signal.SIGKILL)

    def terminate_all(self, timeout: float = 10.0) -> dict[int, int]:
        """SIGTERM every live node at once; wait for all; return exit codes."""
        live = [n for n in self.nodes.values() if n.alive]
        for node in live:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes: dict[int, int] = {}
        for node in live:
            assert node.proc is not None
            try:
                codes[node.node_id] = node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[node.node_id] = -999
            node.exits.append(codes[node.node_id])
        return codes

    def cleanup(self) -> None:
        """Kill anything still running and close log handles (safe to call twice)."""
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.proc.wait(5)
            if node.stderr is not None:
                node.stderr.close()
                node.stderr = None

    def stderr_text(self, node_id: int) -> str:
        path = self.base / f"n{node_id}.stderr"
        return path.read_text(errors="replace") if path.exists() else ""

    # ------------------------------------------------------------------ clients and files

    def addresses(self) -> dict[int, tuple[str, int]]:
        return {n.node_id: (n.host, n.client_port) for n in self.nodes.values()}

    async def statuses(self, timeout: float = 0.5) -> dict[int, dict[str, Any]]:
        """AdminDescribe of every live node that answers within ``timeout``."""

        async def one(node: ProcNode) -> dict[str, Any] | None:
            client = KvClient(node.host, node.client_port, timeout=timeout)
            try:
                return await client.describe()
            except Exception:
                return None
            finally:
                await client.close()

        live = [n for n in self.nodes.values() if n.alive]
        results = await asyncio.gather(*(one(n) for n in live))
        return {n.node_id: r for n, r in zip(live, results, strict=True) if r is not None}

    async def wait_leader(
        self, timeout: float = 15.0, *, exclude: Iterable[int] = (), min_epoch: int = 0
    ) -> tuple[int, int]:
        """(leader id, epoch) once a live node leads with epoch >= ``min_epoch`` and the others
        that answer agree on it."""
        banned = set(exclude)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            statuses = await self.statuses()
            leaders = [s for n, s in statuses.items() if s.get("role") == "leader" and n not in banned]
            if len(leaders) == 1 and leaders[0]["epoch"] >= min_epoch:
                leader = leaders[0]
                if all(s.get("leader") == leader["node"] for s in statuses.values()):
                    return leader["node"], leader["epoch"]
            await asyncio.sleep(0.05)
        raise AssertionError(f"no leader within {timeout}s: {await self.statuses()}")

    def events(self) -> list[dict[str, Any]]:
        """Every node's events.jsonl, concatenated (each node's own order kept)."""
        out: list[dict[str, Any]] = []
        for node in self.nodes.values():
            path = node.directory / "events.jsonl"
            if path.exists():
                out.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
        return out

    def offline_dump(self, node_id: int) -> list[dict[str, Any]]:
        """``python -m nodes dump-log --dir`` of a stopped node."""
        node = self.nodes[node_id]
        done = subprocess.run(
            [self.python, "-m", "nodes", "dump-log", "--dir", str(node.directory)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            timeout=30,
            check=True,
        )
        return [json.loads(line) for line in done.stdout.decode().splitlines() if line]
