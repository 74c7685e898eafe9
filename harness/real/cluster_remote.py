"""``kraftwerk cluster`` on the docker and netns backends: containers or namespaces left running.

``up`` creates the backend's hosts (harness.real.backends), detaches them from this process's
cleanup (the cluster must outlive the command), writes every node's node.properties with
process.roles for the cluster's shape (harness.core.shape), starts the nodes through the common control interface and
waits until a leader is elected and every broker is registered, unfenced and listed by every
node. ``DIR/cluster.json`` records the backend, the cluster id and every host, so ``kill``,
``start`` and ``down`` rebuild the hosts' control transports in other processes. Clients reach
the nodes from this machine on their cluster addresses (docker's bridge, the netns host link).

``down --dir DIR`` removes the cluster's containers/network or namespaces/links/directories;
``down`` without ``--dir`` removes everything any kraftwerk run left behind (labelled docker
containers and networks, kw-* namespaces, local node processes and chains).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.core.shape import Shape
from harness.db.nodes import BUGS, NodeDB, PartitionLeaderError, check_settings, unknown_bugs
from harness.real.backends import registry
from harness.real.backends.base import Backend, BackendError, Host
from harness.real.cluster_local import (
    EXIT_BAD_INPUT,
    LOCAL_DEFAULTS,
    ClusterError,
    LocalCluster,
    active_controller,
    check_shape,
    clear_earlier,
    contract,
    load,
    to_stderr,
)
from harness.real.control.base import ControlError
from harness.real.faults.clock import ClockNemesis

STATE_FILE = "cluster.json"
REMOTE_BACKENDS = tuple(k for k in registry.CLUSTER if k != "local")


def _state_path(directory: Path) -> Path:
    return Path(directory) / STATE_FILE


def is_remote(directory: Path) -> bool:
    """Does DIR hold a docker or netns cluster (rather than a local one)?"""
    try:
        doc = json.loads(_state_path(directory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("backend") in REMOTE_BACKENDS


def _load(directory: Path) -> dict[str, Any]:
    path = _state_path(directory)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("backend") not in REMOTE_BACKENDS or not isinstance(doc.get("hosts"), list):
            raise ValueError("not a docker or netns cluster")
    except FileNotFoundError:
        raise ClusterError(f"no cluster in {directory} ({path} does not exist)", EXIT_BAD_INPUT) from None
    except (OSError, ValueError, AttributeError) as exc:
        raise ClusterError(f"{path} is unreadable: {exc}", EXIT_BAD_INPUT) from None
    return doc


def _save(directory: Path, doc: Mapping[str, Any]) -> None:
    path = _state_path(directory)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _backend(kind: str) -> Backend:
    return registry.build(kind, log=lambda m: print(m, file=sys.stderr))


def _hosts(doc: Mapping[str, Any]) -> list[Host]:
    """The cluster's hosts with fresh control transports from its backend (registry.control)."""
    kind, cid = doc["backend"], doc["cluster"]
    hosts = []
    for rec in doc["hosts"]:
        name = rec["name"]
        try:
            control = registry.control(kind, cid, name)
        except BackendError as e:
            raise ClusterError(str(e)) from None
        hosts.append(
            Host(
                name=name,
                address=rec["address"],
                control=control,
                workdir=rec["workdir"],
                python=rec.get("python", "python3"),
                pythonpath=rec.get("pythonpath", ""),
                faketime_sitedir=rec.get("faketime_sitedir", ""),
            )
        )
    return hosts


def _db(doc: Mapping[str, Any], hosts: list[Host]) -> NodeDB:
    """The cluster's nodes; restarts run under libfaketime if `up` prepared the clocks (doc["faketime"])."""
    clock = ClockNemesis.attached(hosts, doc.get("faketime") or {})
    return NodeDB(
        hosts,
        bugs=doc.get("bugs", []),
        properties=doc.get("settings", {}),
        broker=True,
        shape=Shape.from_record(doc.get("shape"), len(hosts)),
        env=lambda h: clock.env(h) if h.name in clock.libs else {},
    )


def attach(directory: Path) -> tuple[dict[str, Any], Backend, list[Host], NodeDB]:
    """The cluster recorded in ``DIR/cluster.json``, on any backend, taken over by another process than the one
    that started it (harness.chaos's fault keeper): (its record, its backend, its hosts, its nodes as a DB)."""
    if is_remote(directory):
        doc = _load(directory)
        try:
            backend = _backend(doc["backend"])
        except BackendError as e:
            raise ClusterError(str(e)) from None
        hosts = _hosts(doc)
        return doc, backend, hosts, _db(doc, hosts)
    cluster = LocalCluster.attach(directory)
    return load(directory), cluster.backend, list(cluster.db.hosts), cluster.db


def up(
    directory: Path,
    kind: str,
    n: int,
    *,
    bugs: Iterable[str] = (),
    overrides: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    fresh: bool = False,
    say: Callable[[str], None] = to_stderr,
    shape: Shape | None = None,
) -> dict[str, Any]:
    """Create and start an ``n``-node docker or netns cluster (laid out by ``shape``, default every node a
    combined voter); the JSON object of docs/formats.md "cluster up output".
    On failure everything created is removed. A directory that held an earlier cluster is refused unless
    ``fresh`` (`harness.real.cluster_local.clear_earlier`)."""
    directory = Path(directory).resolve()
    shape = shape if shape is not None else Shape(n)
    check_shape(shape)
    bug_list = sorted(set(bugs))
    unknown = unknown_bugs(bug_list)
    if unknown:
        raise ClusterError(f"--bug: unknown bug(s) {unknown}; known: {sorted(BUGS)}", EXIT_BAD_INPUT)
    if _state_path(directory).exists():
        try:
            old = json.loads(_state_path(directory).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
        if old.get("state") == "up" or (old.get("backend") == "local" and old.get("nodes")):
            raise ClusterError(
                f"{directory} already holds a cluster; run 'kraftwerk cluster down --dir {directory}' first",
                EXIT_BAD_INPUT,
            )
    clear_earlier(directory, fresh, say)
    settings = {**LOCAL_DEFAULTS, **(overrides or {})}
    problem = check_settings(settings)
    if problem:
        raise ClusterError(f"--override: {problem}", EXIT_BAD_INPUT)
    try:
        backend = _backend(kind)
    except BackendError as e:
        raise ClusterError(str(e), EXIT_BAD_INPUT if "root" in str(e) else 255) from None
    directory.mkdir(parents=True, exist_ok=True)
    try:
        hosts = backend.create([f"n{i}" for i in range(1, n + 1)])
        doc: dict[str, Any] = {
            "backend": kind,
            "cluster": backend.cluster_id,
            "bugs": bug_list,
            "settings": settings,
            "shape": shape.record(),
            "state": "starting",
            "hosts": [
                {
                    "name": h.name,
                    "address": h.address,
                    "workdir": h.workdir,
                    "python": h.python,
                    "pythonpath": h.pythonpath,
                    "faketime_sitedir": h.faketime_sitedir,
                }
                for h in hosts
            ],
        }
        doc["faketime"] = ClockNemesis(hosts).prepare_left_running()
        _save(directory, doc)
        db = _db(doc, hosts)
        db.install()
        db.start_all()
        deadline = time.monotonic() + timeout
        why = "not started"
        while time.monotonic() < deadline:
            dead = [name for name, running in db.running().items() if not running]
            if dead:
                raise ClusterError(f"node {dead[0]} exited during start-up:\n{_tail(db, dead[0])}")
            ok, why = db.ready_now()
            if ok:
                break
            time.sleep(0.2)
        else:
            raise ClusterError(f"the cluster did not come up within {timeout:g}s: {why}")
    except BaseException:
        backend.teardown()
        if _state_path(directory).exists():
            _save(directory, {**_load_raw(directory), "state": "removed"})
        raise
    backend.detach()
    doc["state"] = "up"
    _save(directory, doc)
    return {**_contract(db), "backend": kind, "cluster": backend.cluster_id}


def _contract(db: NodeDB) -> dict[str, Any]:
    """The JSON object ``cluster up`` prints (docs/formats.md "cluster up output")."""
    listed = [
        {"id": NodeDB.node_id(h), "host": h.address, "port": db.client_port(h), "roles": db.roles(h)} for h in db.hosts
    ]
    return contract(listed)


def _host_named(hosts: list[Host], name: str) -> Host:
    for h in hosts:
        if h.name == name:
            return h
    raise ClusterError(f"the leader {name} is not a node of this cluster")


def _load_raw(directory: Path) -> dict[str, Any]:
    try:
        return json.loads(_state_path(directory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _tail(db: NodeDB, name: str, lines: int = 20) -> str:
    h = db.by_name[name]
    try:
        text = h.control.get_file(db.logfile(h)).decode(errors="replace")
    except ControlError:
        text = ""
    return "\n".join(text.splitlines()[-lines:])


def _host(hosts: list[Host], node_id: int) -> Host:
    for h in hosts:
        if h.name == f"n{node_id}":
            return h
    raise ClusterError(f"--node: no node {node_id} (nodes: {[int(h.name[1:]) for h in hosts]})", EXIT_BAD_INPUT)


def kill(
    directory: Path,
    *,
    node_id: int | None = None,
    leader: tuple[str, int] | None = None,
    controller: bool = False,
) -> dict[str, Any]:
    """SIGKILL one node's process (by id, the current leader of ``(topic, partition)``, or the active
    controller)."""
    doc = _load(directory)
    hosts = _hosts(doc)
    if controller:
        node_id = active_controller(_db(doc, hosts))  # a dead node does not answer
    if leader is not None:
        try:
            node_id = NodeDB.node_id(_host_named(hosts, _db(doc, hosts).partition_leader_now(*leader)))
        except PartitionLeaderError as e:
            raise ClusterError(f"--leader: {e}", EXIT_BAD_INPUT if e.bad_input else 255) from None
    assert node_id is not None
    h = _host(hosts, node_id)
    try:
        pid = h.control.kill_daemon(NodeDB.pidfile(h))
    except ControlError as e:
        raise ClusterError(f"node {node_id}: {e}") from None
    return {"node": node_id, "pid": pid, "killed": pid is not None}


def start(directory: Path, node_id: int, *, timeout: float = 30.0) -> dict[str, Any]:
    """Start a killed or stopped node again (same config and data) and wait until it has rejoined."""
    doc = _load(directory)
    hosts = _hosts(doc)
    h = _host(hosts, node_id)
    db = _db(doc, hosts)
    try:
        if h.control.daemon_status(db.pidfile(h)).running:
            return {"node": node_id, "pid": h.control.daemon_status(db.pidfile(h)).pid, "started": False}
        pid = h.control.start_daemon(db.spec(h))
    except ControlError as e:
        raise ClusterError(f"node {node_id}: {e}") from None
    deadline = time.monotonic() + timeout
    why = "not started"
    while time.monotonic() < deadline:
        if not h.control.daemon_status(db.pidfile(h)).running:
            raise ClusterError(f"node {node_id} exited during start-up:\n{_tail(db, h.name)}")
        why = db.rejoined_now(h.name)
        if why is None:
            return {"node": node_id, "pid": pid, "started": True}
        time.sleep(0.1)
    raise ClusterError(f"node {node_id} did not rejoin within {timeout:g}s ({why})")


def down(directory: Path) -> dict[str, Any]:
    """Remove the cluster recorded in DIR (idempotent)."""
    doc = _load(directory)
    removed = _remove(doc["backend"], doc["cluster"])
    _save(directory, {**doc, "state": "removed"})
    return {"backend": doc["backend"], "cluster": doc["cluster"], "removed": removed}


def _remove(kind: str, cluster_id: str | None) -> list[str]:
    try:
        return registry.down(kind, cluster_id)
    except BackendError as e:
        raise ClusterError(str(e)) from None


def down_everything(cluster_id: str | None = None) -> dict[str, Any]:
    """Remove whatever kraftwerk runs left on this machine (only cluster `cluster_id` if given), on every
    backend: {"removed": [...], "skipped": {backend: why}}."""
    removed: list[str] = []
    skipped: dict[str, str] = {}
    for kind in registry.CLEANABLE:
        try:
            removed += [f"{kind}: {x}" for x in _remove(kind, cluster_id)]
        except ClusterError as e:
            skipped[kind] = str(e)
    return {"removed": removed, "skipped": skipped}
