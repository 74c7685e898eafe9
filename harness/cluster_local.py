"""Local clusters for ``kraftwerk cluster``: ``python -m nodes`` processes on 127.0.0.x, left running.

Node ``i`` (1-based) binds ``127.0.0.(i+1)`` (or ``127.0.0.1`` with distinct ports when those
addresses cannot be bound), with a client listener (KV, admin and Kafka APIs) and a controller
listener. ``DIR/n<i>/`` holds ``node.properties``, the data directory ``data/`` (quorum state,
raft log, partition logs, ``events.jsonl``, ``node.log``) and ``output.log`` (the process's
stdout and stderr). ``DIR/cluster.json`` records every node's addresses, config, pid and state;
``kill``, ``start`` and ``down`` work from it, so they may run in other processes than ``up``.

Processes are detached (a new session each, no terminal, output to files). A pid is only
signalled while it still has the start time recorded when it was spawned, so a recycled pid is
never hit. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import nodes
from nodes.kafka import protocol as kp
from nodes.raft.bugs import ALL_BUGS
from nodes.runtime import framing
from nodes.runtime.config import ConfigError, load_config
from nodes.runtime.kvapi import ADMIN_DESCRIBE

__all__ = [
    "LOCAL_DEFAULTS",
    "ClusterError",
    "LocalNode",
    "describe",
    "down",
    "is_running",
    "kill",
    "load",
    "metadata",
    "start",
    "up",
]

STATE_FILE = "cluster.json"
LOCAL_DEFAULTS: dict[str, str] = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "10000",
}
"""Broker timings of a local cluster (Kafka's defaults are 9000/2000/30000): a killed broker's
partitions move within seconds. ``--override`` replaces any of them."""

EXIT_BAD_INPUT = 254
EXIT_INTERNAL = 255


class ClusterError(Exception):
    """The command cannot be done; ``code`` is the exit code (254 bad input, 255 failure)."""

    def __init__(self, message: str, code: int = EXIT_INTERNAL) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class LocalNode:
    id: int
    host: str
    port: int  # client listener (Kafka, KV, admin)
    controller_port: int
    directory: str
    pid: int | None = None
    state: str = "new"  # running, killed, stopped, failed
    started: int | None = None  # the pid's start time (/proc/<pid>/stat field 22): pid + start = identity

    @property
    def config(self) -> Path:
        return Path(self.directory) / "node.properties"

    @property
    def data(self) -> Path:
        return Path(self.directory) / "data"

    @property
    def output(self) -> Path:
        return Path(self.directory) / "output.log"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


# --- state file -----------------------------------------------------------------------------------


def _state_path(directory: Path) -> Path:
    return Path(directory) / STATE_FILE


def load(directory: Path) -> tuple[dict[str, Any], list[LocalNode]]:
    """The cluster recorded in ``DIR/cluster.json``; :class:`ClusterError` (254) if none."""
    path = _state_path(directory)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        nodes_ = [LocalNode(**n) for n in doc["nodes"]]
    except FileNotFoundError:
        raise ClusterError(f"no cluster in {directory} ({path} does not exist)", EXIT_BAD_INPUT) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"{path} is unreadable: {exc}", EXIT_BAD_INPUT) from None
    return doc, nodes_


def _save(directory: Path, doc: Mapping[str, Any], nodes_: Iterable[LocalNode]) -> None:
    path = _state_path(directory)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({**doc, "nodes": [asdict(n) for n in nodes_]}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def contract(nodes_: Iterable[LocalNode]) -> dict[str, Any]:
    """The JSON object ``cluster up`` prints (DESIGN.md)."""
    listed = list(nodes_)
    return {
        "bootstrap": ",".join(n.address for n in listed),
        "nodes": [{"id": n.id, "host": n.host, "port": n.port} for n in listed],
    }


# --- processes ------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """Fields 3… of ``/proc/<pid>/stat`` (state first), or None if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def is_running(node: LocalNode) -> bool:
    """True if ``node.pid`` is still the live (not zombie) process we started for this node: same
    pid and start time (a recycled pid has another start time)."""
    if node.pid is None:
        return False
    fields = _stat(node.pid)
    if not fields or fields[0] == "Z":
        return False
    if node.started is not None:
        return len(fields) > 19 and fields[19] == str(node.started)
    try:  # recorded before start times were: fall back to the command line
        return str(node.config).encode() in Path(f"/proc/{node.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def _wait_gone(nodes_: Iterable[LocalNode], timeout: float) -> list[LocalNode]:
    """Wait until none of ``nodes_`` runs any more; return those still running at the deadline."""
    pending = list(nodes_)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for node in pending:
            _reap(node.pid)
        pending = [n for n in pending if is_running(n)]
        if pending:
            time.sleep(0.02)
    return pending


def _reap(pid: int | None) -> None:
    """Collect the exit status if the process is our child (no zombie left behind)."""
    if pid is None:
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _signal(node: LocalNode, sig: int) -> bool:
    if not is_running(node):
        return False
    try:
        os.kill(node.pid, sig)  # type: ignore[arg-type]
    except ProcessLookupError:
        return False
    return True


def _spawn(node: LocalNode, python: str) -> None:
    root = str(Path(nodes.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    with open(node.output, "ab") as out:
        proc = subprocess.Popen(
            [python, "-m", "nodes", "--config", str(node.config)],
            cwd=node.directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    proc.returncode = 0  # detached on purpose: no "still running" warning when this object goes
    node.pid = proc.pid
    fields = _stat(proc.pid)
    node.started = int(fields[19]) if fields and len(fields) > 19 else None
    node.state = "running"


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no output)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


# --- wire probes ----------------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _call(host: str, port: int, api_key: int, version: int, body: bytes, timeout: float) -> memoryview:
    request_hv, response_hv = kp.header_versions(api_key, version)
    frame = framing.encode_request(api_key, version, 1, body, client_id="kraftwerk-cluster", header_version=request_hv)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame)
        size = int.from_bytes(_recv_exact(sock, 4), "big", signed=True)
        if not 0 <= size <= 64 * 1024 * 1024:
            raise ConnectionError(f"bad response size {size}")
        _, payload = framing.decode_response(_recv_exact(sock, size), response_hv)
    return payload


def describe(node: LocalNode, timeout: float = 1.0) -> dict[str, Any] | None:
    """The node's AdminDescribe status, or None if it does not answer."""
    try:
        return json.loads(bytes(_call(node.host, node.port, ADMIN_DESCRIBE, 0, b"", timeout)))
    except (OSError, ValueError):
        return None


def metadata(node: LocalNode, topics: list[str] | None = None, timeout: float = 1.0) -> kp.MetadataResponse | None:
    """A Kafka Metadata (v9) answer from the node, or None."""
    request = kp.MetadataRequest(
        topics=None if topics is None else [kp.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    try:
        body = _call(node.host, node.port, kp.ApiKey.METADATA, 9, request.encode(9), timeout)
        return kp.MetadataResponse.decode(body, 9)
    except (OSError, ValueError):
        return None


def _ready(nodes_: list[LocalNode], everyone: bool = True) -> tuple[bool, str]:
    """Is there one agreed leader, and is every broker registered, unfenced and known to all?"""
    statuses = {n.id: describe(n) for n in nodes_}
    silent = [i for i, s in statuses.items() if s is None]
    if silent:
        return False, f"no answer from node(s) {silent}"
    leaders = {s.get("leader") for s in statuses.values() if s is not None}
    if len(leaders) != 1 or None in leaders:
        return False, f"no agreed leader yet ({sorted(map(str, leaders))})"
    fenced = [i for i, s in statuses.items() if s and (s.get("broker") or {}).get("fenced", True)]
    if fenced:
        return False, f"broker(s) {fenced} not registered/unfenced yet"
    if everyone:
        for n in nodes_:
            md = metadata(n)
            if md is None or len(md.brokers) < len(nodes_):
                return False, f"node {n.id} does not list every broker yet"
    return True, "ready"


# --- ports ----------------------------------------------------------------------------------------


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


def _free_port(host: str, taken: set[tuple[str, int]]) -> int:
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if (host, port) not in taken:
            taken.add((host, port))
            return port


def _check_port(host: str, port: int) -> None:
    try:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        raise ClusterError(
            f"--base-port: {host}:{port} cannot be bound ({exc.strerror or exc})", EXIT_BAD_INPUT
        ) from None


# --- commands -------------------------------------------------------------------------------------


def up(
    directory: Path,
    n: int,
    *,
    bugs: Iterable[str] = (),
    base_port: int | None = None,
    overrides: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Start ``n`` nodes and wait (at most ``timeout`` s) until they form a working cluster.
    Returns the DESIGN.md JSON object. On failure every started node is killed."""
    directory = Path(directory).resolve()
    bug_list = sorted(set(bugs))
    unknown = [b for b in bug_list if b not in ALL_BUGS]
    if unknown:
        raise ClusterError(f"--bug: unknown bug(s) {unknown}; known: {sorted(ALL_BUGS)}", EXIT_BAD_INPUT)
    if _state_path(directory).exists():
        _, old = load(directory)
        running = [n.id for n in old if is_running(n)]
        if running:
            raise ClusterError(
                f"a cluster is already running in {directory} (nodes {running}); "
                f"run 'kraftwerk cluster down --dir {directory}' first",
                EXIT_BAD_INPUT,
            )
    if base_port is not None and not 1024 <= base_port <= 65535 - 2 * n:
        raise ClusterError(f"--base-port: {base_port} leaves no room for {n} nodes (2 ports each)", EXIT_BAD_INPUT)
    hosts = loopback_hosts(n)
    taken: set[tuple[str, int]] = set()
    listed: list[LocalNode] = []
    for i, host in enumerate(hosts, 1):
        if base_port is not None:
            port, cport = base_port + 2 * (i - 1), base_port + 2 * (i - 1) + 1
            _check_port(host, port)
            _check_port(host, cport)
        else:
            port, cport = _free_port(host, taken), _free_port(host, taken)
        listed.append(LocalNode(i, host, port, cport, str(directory / f"n{i}")))
    voters = ",".join(f"{node.id}@{node.host}:{node.controller_port}" for node in listed)
    settings = {**LOCAL_DEFAULTS, **(overrides or {})}
    for node in listed:
        Path(node.directory).mkdir(parents=True, exist_ok=True)
        props = {
            "node.id": str(node.id),
            "process.roles": "controller,broker",
            "controller.quorum.voters": voters,
            "listeners": f"CONTROLLER://{node.host}:{node.controller_port},CLIENT://{node.host}:{node.port}",
            "log.dirs": str(node.data),
            "kraftwerk.bugs": ",".join(bug_list),
            **settings,
        }
        node.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    try:
        load_config(listed[0].config)
    except ConfigError as exc:
        raise ClusterError(f"--override: {exc}", EXIT_BAD_INPUT) from None
    doc = {"backend": "local", "dir": str(directory), "python": python, "bugs": bug_list, "settings": settings}
    for node in listed:
        _spawn(node, python)
    _save(directory, doc, listed)
    deadline = time.monotonic() + timeout
    why = "not started"
    try:
        while time.monotonic() < deadline:
            dead = [node for node in listed if not is_running(node)]
            if dead:
                _reap(dead[0].pid)
                raise ClusterError(f"node {dead[0].id} exited during start-up:\n{_tail(dead[0].output)}")
            ok, why = _ready(listed)
            if ok:
                return contract(listed)
            time.sleep(0.1)
        raise ClusterError(
            f"the cluster did not come up within {timeout:g}s: {why}\n"
            + "\n".join(f"--- n{node.id} ({node.output}) ---\n{_tail(node.output)}" for node in listed)
        )
    except BaseException:
        for node in listed:
            _signal(node, signal.SIGKILL)
        _wait_gone(listed, 5.0)
        for node in listed:
            node.state = "failed"
        _save(directory, doc, listed)
        raise


def _node(nodes_: list[LocalNode], node_id: int) -> LocalNode:
    for node in nodes_:
        if node.id == node_id:
            return node
    raise ClusterError(f"--node: no node {node_id} (nodes: {[n.id for n in nodes_]})", EXIT_BAD_INPUT)


def find_leader(
    nodes_: list[LocalNode], topic: str, partition: int, alive: Callable[[LocalNode], bool] | None = None
) -> int:
    """The partition's leader as the live nodes' metadata says (highest leader epoch wins); `alive`
    skips nodes known to be down (default: this machine's process check)."""
    best: tuple[int, int] | None = None
    known = False
    answered = False
    for node in nodes_:
        if not (alive or is_running)(node):
            continue
        md = metadata(node, [topic])
        if md is None:
            continue
        answered = True
        for t in md.topics:
            if t.name != topic or t.error_code:
                continue
            known = True
            for p in t.partitions:
                ok = p.partition_index == partition and p.leader_id >= 0
                if ok and (best is None or p.leader_epoch > best[1]):
                    best = (p.leader_id, p.leader_epoch)
            if not any(p.partition_index == partition for p in t.partitions):
                raise ClusterError(f"--leader: topic {topic!r} has no partition {partition}", EXIT_BAD_INPUT)
    if not answered:
        raise ClusterError("--leader: no live node answers Metadata")
    if not known:
        raise ClusterError(f"--leader: topic {topic!r} does not exist", EXIT_BAD_INPUT)
    if best is None:
        raise ClusterError(f"--leader: {topic}:{partition} has no leader right now")
    return best[0]


def kill(directory: Path, *, node_id: int | None = None, leader: tuple[str, int] | None = None) -> dict[str, Any]:
    """SIGKILL one node (by id, or the current leader of ``(topic, partition)``)."""
    doc, nodes_ = load(directory)
    if leader is not None:
        node_id = find_leader(nodes_, *leader)
    assert node_id is not None
    node = _node(nodes_, node_id)
    killed = _signal(node, signal.SIGKILL)
    if killed and _wait_gone([node], 5.0):
        raise ClusterError(f"node {node.id} (pid {node.pid}) is still running after SIGKILL")
    pid = node.pid
    if node.state == "running":
        node.state = "killed"
    _save(directory, doc, nodes_)
    return {"node": node.id, "pid": pid, "killed": killed}


def not_rejoined(status: Mapping[str, Any] | None) -> str | None:
    """Why a restarted node (its AdminDescribe status) has not rejoined yet; None once it has: it
    answers, knows the leader and its broker is unfenced."""
    if status is None:
        return "no answer"
    if status.get("leader") is None:
        return "no leader known"
    if (status.get("broker") or {}).get("fenced", True):
        return "broker not unfenced yet"
    return None


def start(directory: Path, node_id: int, *, timeout: float = 30.0) -> dict[str, Any]:
    """Start a stopped or killed node again (same config and data) and wait until it has
    rejoined: it answers, knows the leader and its broker is unfenced."""
    doc, nodes_ = load(directory)
    node = _node(nodes_, node_id)
    if is_running(node):
        return {"node": node.id, "pid": node.pid, "started": False}
    _spawn(node, doc.get("python") or sys.executable)
    _save(directory, doc, nodes_)
    deadline = time.monotonic() + timeout
    why = "not started"
    while time.monotonic() < deadline:
        if not is_running(node):
            _reap(node.pid)
            node.state = "failed"
            _save(directory, doc, nodes_)
            raise ClusterError(f"node {node.id} exited during start-up:\n{_tail(node.output)}")
        why = not_rejoined(describe(node))
        if why is None:
            return {"node": node.id, "pid": node.pid, "started": True}
        time.sleep(0.1)
    raise ClusterError(f"node {node.id} did not rejoin within {timeout:g}s ({why}):\n{_tail(node.output)}")


def down(directory: Path, *, timeout: float = 10.0) -> dict[str, Any]:
    """SIGTERM every node, SIGKILL what is left after ``timeout`` s. Idempotent: a directory
    without a running cluster is fine."""
    if not _state_path(directory).exists():
        return {"stopped": [], "killed": []}
    doc, nodes_ = load(directory)
    for node in nodes_:
        _signal(node, signal.SIGCONT)  # a paused node must run to shut down gracefully
    live = [n for n in nodes_ if _signal(n, signal.SIGTERM)]
    stubborn = _wait_gone(live, timeout)
    for node in stubborn:
        _signal(node, signal.SIGKILL)
    left = _wait_gone(stubborn, 5.0)
    for node in nodes_:
        if node not in left:
            node.state = "stopped" if node.state in ("running", "new") else node.state
    _save(directory, doc, nodes_)
    if left:
        raise ClusterError(f"node(s) {[n.id for n in left]} still running after SIGKILL")
    return {"stopped": [n.id for n in live if n not in stubborn], "killed": [n.id for n in stubborn]}
