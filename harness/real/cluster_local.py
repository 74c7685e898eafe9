"""Local clusters: our nodes as processes on 127.0.0.x in one directory, and ``kraftwerk cluster``'s local verbs.

`LocalCluster` is the one way tests, benchmarks and ``kraftwerk cluster --backend local`` start a
local cluster; it is the local backend (harness.real.backends.local: distinct addresses, free ports,
one work directory per node) with our nodes as its DB (harness.db.nodes: node.properties, daemons
with pidfiles, readiness, logs), which is also what ``kraftwerk test --backend local`` runs.

``DIR/n<i>/`` holds ``node.properties``, the data directory ``data/`` (quorum state, raft log,
partition logs, ``events.jsonl``, ``node.log``), ``node.out`` (the process's stdout and stderr) and
``node.pid`` ("<pid> <start time>": a recycled pid is never signalled). ``DIR/cluster.json``
records the hosts, bugs and settings, so ``kill``, ``start`` and ``down`` work from other
processes than ``up``. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.core.shape import Shape
from harness.db.nodes import (
    BROKER_DEFAULTS,
    BUGS,
    NodeDB,
    PartitionLeaderError,
    check_settings,
    unknown_bugs,
)
from harness.real.backends.base import BackendError, Host
from harness.real.backends.local import LocalBackend
from harness.real.faults.clock import ClockNemesis

__all__ = [
    "LOCAL_DEFAULTS",
    "ClusterError",
    "LocalCluster",
    "active_controller",
    "check_shape",
    "clear_earlier",
    "contract",
    "down",
    "kill",
    "start",
    "up",
]

STATE_FILE = "cluster.json"
LOCAL_DEFAULTS = BROKER_DEFAULTS
EXIT_BAD_INPUT = 254
EXIT_INTERNAL = 255


class ClusterError(Exception):
    """The command cannot be done; ``code`` is the exit code (254 bad input, 255 failure)."""

    def __init__(self, message: str, code: int = EXIT_INTERNAL) -> None:
        super().__init__(message)
        self.code = code


class LocalCluster:
    """``n`` nodes on 127.0.0.2… (127.0.0.1 with distinct ports if those cannot be bound), in ``directory``.

    Nodes are numbered 1…n (host ``n<i>``). Creating one writes every node.properties; nothing runs
    until `start_all`. `close` kills whatever still runs and keeps the files.
    """

    def __init__(
        self,
        directory: Path,
        n: int = 3,
        *,
        bugs: Iterable[str] = (),
        properties: Mapping[str, str] | None = None,
        base_port: int | None = None,
        python: str = sys.executable,
        seed: int = 0,
        broker: bool = True,
        clock_libs: Mapping[str, str] | None = None,
        shape: Shape | None = None,
        _attach: list[dict[str, Any]] | None = None,
    ) -> None:
        self.directory = Path(directory).resolve()
        self.backend = LocalBackend(directory=self.directory, first=2, base_port=base_port, python=python)
        hosts = self.backend.attach(_attach) if _attach is not None else self.backend.create(n)
        self.clock = ClockNemesis.attached(hosts, clock_libs or {})
        self.db = NodeDB(
            hosts,
            bugs=bugs,
            seed=seed,
            ports=self.backend.ports,
            listen_any=False,
            env=self._env,
            properties=properties,
            broker=broker,
            shape=shape,
        )
        if _attach is None:
            self.db.setup()

    @classmethod
    def attach(cls, directory: Path) -> LocalCluster:
        """The cluster recorded in ``DIR/cluster.json`` (started by another process); ClusterError (254) if none."""
        doc = load(directory)
        return cls(
            directory,
            bugs=doc.get("bugs", ()),
            properties=doc.get("settings"),
            clock_libs=doc.get("faketime") or {},
            shape=Shape.from_record(doc.get("shape"), len(doc["hosts"])),
            _attach=doc["hosts"],
        )

    def prepare_clocks(self) -> dict[str, str]:
        """Start the nodes under libfaketime from now on, so that `kraftwerk cluster clock` can move their wall
        clocks later (harness.real.faults.clock); {} if this machine has no libfaketime."""
        self.clock.prepare_left_running()
        return dict(self.clock.libs)

    def _env(self, host: Host) -> dict[str, str]:
        clock = self.clock.env(host) if host.name in self.clock.libs else {}
        return {**clock, **LocalBackend.node_env(host)}

    # --- nodes
    @property
    def ids(self) -> list[int]:
        return [NodeDB.node_id(h) for h in self.db.hosts]

    @staticmethod
    def name(node_id: int) -> str:
        return f"n{node_id}"

    def start_all(self) -> None:
        self.db.start_all()

    def start(self, node_id: int) -> int | None:
        """Start a stopped or killed node again (same config, ports and data); its pid."""
        return self.db.start(self.name(node_id))

    def kill(self, node_id: int) -> int | None:
        """SIGKILL a node and wait until it is gone; the pid it had (None: it was not running)."""
        return self.db.kill(self.name(node_id))

    def alive(self, node_id: int) -> bool:
        return self.db.pid(self.name(node_id)) is not None

    def pids(self) -> dict[int, int | None]:
        return {i: self.db.pid(self.name(i)) for i in self.ids}

    def terminate_all(self, timeout: float = 10.0) -> dict[str, list[int]]:
        """SIGTERM every live node at once (SIGCONT too: a paused node must run to stop), SIGKILL those still
        running after ``timeout``: {"stopped": ids that stopped by themselves, "killed": ids killed}."""
        live = [i for i in self.ids if self.alive(i)]
        for i in live:
            self.db.signal(self.name(i), signal.SIGCONT)
            self.db.signal(self.name(i), signal.SIGTERM)
        deadline = time.monotonic() + timeout
        pending = list(live)
        while pending and time.monotonic() < deadline:
            pending = [i for i in pending if self.alive(i)]
            if pending:
                time.sleep(0.02)
        for i in pending:
            self.kill(i)
        left = [i for i in pending if self.alive(i)]
        if left:
            raise ClusterError(f"node(s) {left} still running after SIGKILL")
        return {"stopped": [i for i in live if i not in pending], "killed": pending}

    def close(self) -> None:
        """Kill whatever still runs (files stay); safe to call twice."""
        self.backend.teardown()

    def detach(self) -> None:
        """Leave the nodes running after this process exits (`kraftwerk cluster up`)."""
        self.backend.detach()

    # --- clients and files
    def addresses(self) -> dict[int, tuple[str, int]]:
        """{node id: (address, client port)}: Kafka, KV and admin APIs."""
        return {int(name[1:]): ep for name, ep in self.db.endpoints().items()}

    def contract(self) -> dict[str, Any]:
        """The JSON object ``cluster up`` prints (docs/formats.md "cluster up output")."""
        listed = [
            {"id": NodeDB.node_id(h), "host": h.address, "port": self.db.client_port(h), "roles": self.db.roles(h)}
            for h in self.db.hosts
        ]
        return contract(listed)

    def describe(self, node_id: int, timeout: float = 1.0) -> dict[str, Any] | None:
        """A node's AdminDescribe status, or None (blocking)."""
        return self.db.describe_now(self.name(node_id), timeout)

    async def statuses(self, timeout: float = 0.5) -> dict[int, dict[str, Any]]:
        """AdminDescribe of every node that answers within ``timeout``."""
        found = await self.db.describe_all(timeout)
        return {int(name[1:]): s for name, s in found.items() if s is not None}

    async def wait_leader(
        self, timeout: float = 15.0, *, exclude: Iterable[int] = (), min_epoch: int = 0
    ) -> tuple[int, int]:
        """(leader id, epoch) once a node leads with epoch >= ``min_epoch`` and the others that answer agree."""
        banned = set(exclude)
        deadline = time.monotonic() + timeout
        statuses: dict[int, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            statuses = await self.statuses()
            leaders = [s for n, s in statuses.items() if s.get("role") == "leader" and n not in banned]
            if len(leaders) == 1 and leaders[0]["epoch"] >= min_epoch:
                leader = leaders[0]
                if all(s.get("leader") == leader["node"] for s in statuses.values()):
                    return leader["node"], leader["epoch"]
            await asyncio.sleep(0.05)
        raise AssertionError(f"no leader within {timeout}s: {statuses}")

    def wait_ready(self, timeout: float) -> None:
        """Wait until one leader is agreed and every broker is registered, unfenced and known to all;
        ClusterError (255) naming why not, or which node exited, with its output."""
        deadline = time.monotonic() + timeout
        why = "not started"
        while time.monotonic() < deadline:
            dead = [i for i in self.ids if not self.alive(i)]
            if dead:
                raise ClusterError(f"node {dead[0]} exited during start-up:\n{self.tail(dead[0])}")
            ok, why = self.db.ready_now()
            if ok:
                return
            time.sleep(0.1)
        raise ClusterError(
            f"the cluster did not come up within {timeout:g}s: {why}\n"
            + "\n".join(f"--- n{i} ---\n{self.tail(i)}" for i in self.ids)
        )

    def output(self, node_id: int) -> str:
        """The node process's stdout and stderr so far."""
        return self.db.output(self.name(node_id))

    def tail(self, node_id: int, lines: int = 15) -> str:
        return "\n".join(self.output(node_id).splitlines()[-lines:]) or "(no output)"

    def events(self) -> list[dict[str, Any]]:
        """Every node's events.jsonl, concatenated (each node's own order kept)."""
        return [e for i in self.ids for e in self.db.events(self.name(i))]

    def offline_dump(self, node_id: int) -> list[dict[str, Any]]:
        """``python -m nodes dump-log --dir`` of a stopped node."""
        return self.db.offline_dump(self.name(node_id))

    # --- state file
    def save(self, state: str, **extra: Any) -> None:
        """Write DIR/cluster.json: hosts, bugs, settings and every node's pid and state."""
        doc = {
            "backend": "local",
            "dir": str(self.directory),
            "bugs": self.db.bugs,
            "settings": self.db.extra,
            "state": state,
            "hosts": [self.backend.record(h) for h in self.db.hosts],
            "faketime": self.clock.libs,
            "shape": self.db.shape.record(),
            **extra,
        }
        path = self.directory / STATE_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def contract(listed: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON object ``cluster up`` prints (docs/formats.md "cluster up output") for every node's
    {"id", "host", "port", "roles"}: ``bootstrap`` names the nodes with the broker role only."""
    brokers = [n for n in listed if "broker" in str(n["roles"]).split(",")]
    return {"bootstrap": ",".join(f"{n['host']}:{n['port']}" for n in brokers), "nodes": listed}


def check_shape(shape: Shape) -> None:
    """ClusterError (254) naming the option if ``--controllers``/``--controller-roles`` make no cluster."""
    problem = shape.problem()
    if problem:
        raise ClusterError(problem, EXIT_BAD_INPUT)


def active_controller(db: NodeDB, names: Iterable[str] | None = None) -> int:
    """The quorum leader (the active controller) as the nodes `names` (default all) describe it; ClusterError
    (255) if none leads."""
    names = list(names) if names is not None else [h.name for h in db.hosts]
    leader, _ = NodeDB.leader_of({n: db.describe_now(n) for n in names})
    if leader is None:
        raise ClusterError("--controller: no node leads the quorum right now")
    return int(leader[1:])


def load(directory: Path) -> dict[str, Any]:
    """The local cluster recorded in ``DIR/cluster.json``; ClusterError (254) if none."""
    path = Path(directory) / STATE_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("backend") != "local" or not isinstance(doc.get("hosts"), list):
            raise ValueError("not a local cluster")
    except FileNotFoundError:
        raise ClusterError(f"no cluster in {directory} ({path} does not exist)", EXIT_BAD_INPUT) from None
    except (OSError, ValueError, AttributeError) as exc:
        raise ClusterError(f"{path} is unreadable: {exc}", EXIT_BAD_INPUT) from None
    return doc


def _record(cluster: LocalCluster, state: str, states: Mapping[int, str], last: Mapping[int, int | None]) -> None:
    nodes_ = [{"id": i, "pid": last.get(i), "state": states.get(i, "running")} for i in cluster.ids]
    cluster.save(state, nodes=nodes_)


# --- `kraftwerk cluster` verbs ----------------------------------------------------------------


def to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def clear_earlier(directory: Path, fresh: bool, say: Callable[[str], None]) -> None:
    """What ``up`` does with a directory that held a cluster that is no longer running (any backend).

    Without ``fresh`` it refuses (254): the old raft log and broker registrations would come back with
    the new nodes. With ``fresh`` it removes what that cluster left in ``directory`` (its state file and
    the node directories it recorded there; nothing else) and says so through ``say``."""
    state = directory / STATE_FILE
    if not state.exists():
        return
    if not fresh:
        raise ClusterError(
            f"{directory} holds the data of an earlier cluster (its raft log and broker registrations would "
            f"come back); pass --fresh to remove it and start a new cluster, or restart that cluster's nodes "
            f"with 'kraftwerk cluster start --dir {directory} --node ID'",
            EXIT_BAD_INPUT,
        )
    try:
        doc = json.loads(state.read_text(encoding="utf-8"))
        hosts = doc.get("hosts") if isinstance(doc, dict) else None
    except (OSError, ValueError):
        hosts = None
    removed: list[str] = []
    for host in hosts if isinstance(hosts, list) else ():
        workdir = Path(str(host.get("workdir", ""))) if isinstance(host, dict) else None
        if workdir is not None and workdir.is_dir() and workdir.resolve().parent == directory:
            shutil.rmtree(workdir)
            removed.append(workdir.name + "/")
    state.unlink()
    removed.append(STATE_FILE)
    say(f"removed the earlier cluster's data in {directory}: {', '.join(removed)}")


def up(
    directory: Path,
    n: int,
    *,
    bugs: Iterable[str] = (),
    base_port: int | None = None,
    overrides: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    python: str = sys.executable,
    fresh: bool = False,
    say: Callable[[str], None] = to_stderr,
    shape: Shape | None = None,
) -> dict[str, Any]:
    """Start ``n`` nodes (laid out by ``shape``, default every node a combined voter) and wait (at most
    ``timeout`` s) until they form a working cluster.
    Returns the JSON object of docs/formats.md "cluster up output". On failure every started node is killed.
    A directory that held an earlier cluster is refused unless ``fresh`` (`clear_earlier`)."""
    directory = Path(directory).resolve()
    shape = shape if shape is not None else Shape(n)
    check_shape(shape)
    bug_list = sorted(set(bugs))
    unknown = unknown_bugs(bug_list)
    if unknown:
        raise ClusterError(f"--bug: unknown bug(s) {unknown}; known: {sorted(BUGS)}", EXIT_BAD_INPUT)
    if (directory / STATE_FILE).exists():
        try:
            old = LocalCluster.attach(directory)
        except ClusterError:
            old = None
        running = [i for i in old.ids if old.alive(i)] if old is not None else []
        if running:
            raise ClusterError(
                f"a cluster is already running in {directory} (nodes {running}); "
                f"run 'kraftwerk cluster down --dir {directory}' first",
                EXIT_BAD_INPUT,
            )
    clear_earlier(directory, fresh, say)
    settings = {**LOCAL_DEFAULTS, **(overrides or {})}
    problem = check_settings(settings)
    if problem:
        raise ClusterError(f"--override: {problem}", EXIT_BAD_INPUT)
    try:
        cluster = LocalCluster(
            directory, n, bugs=bug_list, properties=settings, base_port=base_port, python=python, shape=shape
        )
    except BackendError as e:
        raise ClusterError(str(e), EXIT_BAD_INPUT if str(e).startswith("--") else EXIT_INTERNAL) from None
    pids: dict[int, int | None] = {}
    try:
        cluster.prepare_clocks()
        cluster.start_all()
        pids = cluster.pids()
        _record(cluster, "starting", {}, pids)
        cluster.wait_ready(timeout)
    except BaseException:
        cluster.close()
        _record(cluster, "failed", dict.fromkeys(cluster.ids, "failed"), pids)
        raise
    cluster.detach()
    _record(cluster, "up", {}, pids)
    return cluster.contract()


def _states(directory: Path) -> tuple[dict[int, str], dict[int, int | None]]:
    doc = load(directory)
    nodes_ = doc.get("nodes") or []
    return {n["id"]: n["state"] for n in nodes_}, {n["id"]: n.get("pid") for n in nodes_}


def _check_id(cluster: LocalCluster, node_id: int) -> None:
    if node_id not in cluster.ids:
        raise ClusterError(f"--node: no node {node_id} (nodes: {cluster.ids})", EXIT_BAD_INPUT)


def kill(
    directory: Path,
    *,
    node_id: int | None = None,
    leader: tuple[str, int] | None = None,
    controller: bool = False,
) -> dict[str, Any]:
    """SIGKILL one node (by id, the current leader of ``(topic, partition)``, or the active controller)."""
    cluster = LocalCluster.attach(directory)
    states, pids = _states(directory)
    if controller:
        node_id = active_controller(cluster.db, [cluster.name(i) for i in cluster.ids if cluster.alive(i)])
    if leader is not None:
        live = [cluster.name(i) for i in cluster.ids if cluster.alive(i)]
        try:
            node_id = int(cluster.db.partition_leader_now(*leader, names=live)[1:])
        except PartitionLeaderError as e:
            raise ClusterError(f"--leader: {e}", EXIT_BAD_INPUT if e.bad_input else EXIT_INTERNAL) from None
    assert node_id is not None
    _check_id(cluster, node_id)
    pid = cluster.kill(node_id)
    if pid is not None:
        states[node_id] = "killed"
        pids[node_id] = pid
    _record(cluster, "up", states, pids)
    return {"node": node_id, "pid": pid, "killed": pid is not None}


def start(directory: Path, node_id: int, *, timeout: float = 30.0) -> dict[str, Any]:
    """Start a stopped or killed node again (same config and data) and wait until it has
    rejoined: it answers, knows the leader and its broker is unfenced."""
    cluster = LocalCluster.attach(directory)
    states, pids = _states(directory)
    _check_id(cluster, node_id)
    if cluster.alive(node_id):
        return {"node": node_id, "pid": cluster.pids()[node_id], "started": False}
    pid = cluster.start(node_id)
    states[node_id], pids[node_id] = "running", pid
    _record(cluster, "up", states, pids)
    deadline = time.monotonic() + timeout
    why: str | None = "not started"
    while time.monotonic() < deadline:
        if not cluster.alive(node_id):
            states[node_id] = "failed"
            _record(cluster, "up", states, pids)
            raise ClusterError(f"node {node_id} exited during start-up:\n{cluster.tail(node_id)}")
        why = cluster.db.rejoined_now(cluster.name(node_id))
        if why is None:
            return {"node": node_id, "pid": pid, "started": True}
        time.sleep(0.1)
    raise ClusterError(f"node {node_id} did not rejoin within {timeout:g}s ({why}):\n{cluster.tail(node_id)}")


def down(directory: Path, *, timeout: float = 10.0) -> dict[str, Any]:
    """SIGTERM every node, SIGKILL what is left after ``timeout`` s. Idempotent: a directory
    without a running cluster is fine."""
    if not (Path(directory) / STATE_FILE).exists():
        return {"stopped": [], "killed": []}
    cluster = LocalCluster.attach(directory)
    states, pids = _states(directory)
    result = cluster.terminate_all(timeout)
    for i in cluster.ids:
        if states.get(i, "running") == "running":
            states[i] = "stopped"
    _record(cluster, "down", states, pids)
    return result
