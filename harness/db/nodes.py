"""Our nodes as a DB (harness.db.protocol): node.properties, node daemons, readiness, log collection.

The one place outside the simulator where the harness imports `nodes`: the bugs the nodes know,
their configuration check, the admin and Kafka probes of `kraftwerk cluster`, and the offline
log dump all live here.

Each host runs one `python -m nodes --config <workdir>/node.properties` daemon (pidfile and
output in its workdir, data and events.jsonl in <workdir>/data). The harness talks to the
nodes over their client listener: KV operations (the workload) and AdminDescribe (role,
epoch, leader), which is how "leader" fault targets are resolved and how readiness is judged.
At the end `collect` stops the nodes, dumps each committed log (`python -m nodes dump-log`)
and copies events.jsonl, node.log and the daemon output into the run directory.

With `broker=True` (the queue workload, `kraftwerk cluster`) every node also runs the broker role
(process.roles=controller,broker): Kafka clients use the same client listener, readiness also
waits for every broker to be registered and unfenced, "leader" fault targets are the busiest
partition leader, and `collect` first asks every running node for its committed partition
batches (AdminDumpPartitions) and writes them to logs/partitions/<partition>/<node>.jsonl.

With a `shape` laid out in roles (`--controllers N`, harness.core.shape) only the controllers are in
controller.quorum.voters; each node's process.roles is `controller` (a dedicated controller),
`controller,broker` (a combined one) or `broker` (a broker-only observer of the quorum), and readiness
waits for the brokers only to be registered and unfenced.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import shlex
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import nodes
from harness.core.shape import Shape
from harness.db.base import DaemonDB, merge_events
from harness.db.nodes_transport import NodesTransport
from harness.db.protocol import ClusterNotReady, EnvSource
from harness.real.backends.base import Host
from harness.real.control.base import ControlError, DaemonSpec
from harness.real.faults.common import on_hosts
from nodes.kafka import protocol as kp
from nodes.raft.bugs import ALL_BUGS
from nodes.runtime import framing
from nodes.runtime.config import ConfigError, load_config
from nodes.runtime.kvapi import ADMIN_DESCRIBE
from nodes.runtime.kvclient import KvClient

__all__ = [
    "BROKER_DEFAULTS",
    "BROKER_PROPERTIES",
    "BUGS",
    "ClusterNotReady",
    "NODES_ROOT",
    "NodeDB",
    "check_settings",
    "merge_events",
]

CONTROLLER_PORT = 9093
CLIENT_PORT = 9092
FATAL = "stopping: fatal: "  # node.log line of a node whose raft core stopped on an illegal state (exit 3)

BUGS: frozenset[str] = frozenset(ALL_BUGS)
"""The seeded bugs the nodes know (`--bug NAME`)."""

NODES_ROOT = str(Path(nodes.__file__).resolve().parents[1])
"""The directory holding the `nodes` package on this machine (PYTHONPATH of local nodes)."""

BROKER_DEFAULTS: dict[str, str] = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "10000",
}
"""Broker timings of `kraftwerk cluster` (Kafka's defaults are 9000/2000/30000): a killed broker's
partitions move within seconds. ``--override`` replaces any of them."""

# a test's broker timings, shorter than Kafka's (9 s, 2 s, 30 s), as in the simulator: a fault of a few
# seconds fences a broker, moves its partitions and shrinks ISRs
BROKER_PROPERTIES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "5000",
}


def broker_properties(options: Mapping[str, Any]) -> dict[str, str]:
    """The node.properties keys of the broker role for a workload speaking Kafka: its topic defaults
    (`options` as the workload stores them: partitions, replication-factor, min-isr, unclean) and timings."""
    return {
        "min.insync.replicas": str(options["min-isr"]),
        "default.replication.factor": str(options["replication-factor"]),
        "num.partitions": str(options["partitions"]),
        "unclean.leader.election.enable": "true" if options["unclean"] else "false",
        **BROKER_PROPERTIES,
    }


FAST_ELECTIONS: dict[str, str] = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "300",
    "controller.quorum.retry.backoff.ms": "20",
}
"""Quorum timings for small loopback clusters in tests: a leader within a second of a kill."""


def unknown_bugs(bugs: Iterable[str]) -> list[str]:
    """The names in `bugs` that are not seeded bugs of the nodes, sorted."""
    return sorted(set(bugs) - BUGS)


def check_settings(settings: Mapping[str, str]) -> str | None:
    """None if every node.properties setting is one a node accepts, else the node's complaint."""
    sample = {
        "node.id": "1",
        "process.roles": "controller,broker",
        "controller.quorum.voters": "1@10.0.0.1:9093",
        "listeners": "CONTROLLER://0.0.0.0:9093,CLIENT://0.0.0.0:9092",
        "log.dirs": "/nonexistent",
        **settings,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "node.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in sample.items()), encoding="utf-8")
        try:
            load_config(path)
        except ConfigError as exc:
            return str(exc)
    return None


# --- blocking probes (for commands that run without an event loop) -------------------------------


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


def describe_at(address: str, port: int, timeout: float = 1.0) -> dict[str, Any] | None:
    """A node's AdminDescribe status at (address, port), or None if it does not answer."""
    try:
        return json.loads(bytes(_call(address, port, ADMIN_DESCRIBE, 0, b"", timeout)))
    except (OSError, ValueError):
        return None


def metadata_at(
    address: str, port: int, topics: list[str] | None = None, timeout: float = 1.0
) -> kp.MetadataResponse | None:
    """A Kafka Metadata (v9) answer from the node at (address, port), or None."""
    request = kp.MetadataRequest(
        topics=None if topics is None else [kp.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    try:
        body = _call(address, port, kp.ApiKey.METADATA, 9, request.encode(9), timeout)
        return kp.MetadataResponse.decode(body, 9)
    except (OSError, ValueError):
        return None


def not_rejoined(status: Mapping[str, Any] | None, broker: bool = True) -> str | None:
    """Why a restarted node (its AdminDescribe status) has not rejoined yet; None once it has: it
    answers, knows the leader and (if it runs the broker role) its broker is unfenced."""
    if status is None:
        return "no answer"
    if status.get("leader") is None:
        return "no leader known"
    if broker and (status.get("broker") or {}).get("fenced", True):
        return "broker not unfenced yet"
    return None


class PartitionLeaderError(LookupError):
    """No leader can be named for a partition; `bad_input` if the topic or partition does not exist."""

    def __init__(self, message: str, bad_input: bool = False) -> None:
        super().__init__(message)
        self.bad_input = bad_input


class NodeDB(DaemonDB):
    """Our nodes as a DB (harness.db.protocol.DB): configure, start, watch, stop and collect the node
    processes of a set of hosts (named n<id>)."""

    def __init__(
        self,
        hosts: Sequence[Host],
        *,
        bugs: Sequence[str] = (),
        seed: int = 0,
        ports: Mapping[str, tuple[int, ...]] | None = None,
        listen_any: bool = True,
        env: EnvSource | None = None,
        properties: Mapping[str, str] | None = None,
        broker: bool = False,
        shape: Shape | None = None,
    ) -> None:
        super().__init__(hosts, env=env)
        for h in self.hosts:
            if not h.name.startswith("n") or not h.name[1:].isdigit():
                raise ValueError(f"node hosts must be named n<id>, not {h.name!r}")
        self.bugs = sorted(set(bugs))
        self.seed = seed
        self.ports = dict(ports or {})
        self.listen_any = listen_any
        self.extra = dict(properties or {})
        self.broker = broker  # partition_logs: filled by collect (broker)
        self.shape = shape if shape is not None else Shape(len(self.hosts))  # default: every node a combined voter

    # ------------------------------------------------------------------ layout
    @staticmethod
    def node_id(h: Host) -> int:
        return int(h.name[1:])

    def is_voter(self, h: Host) -> bool:
        """Whether the node is in controller.quorum.voters (every node but in a shape laid out in roles)."""
        return self.shape.is_controller(self.node_id(h))

    def roles(self, h: Host) -> str:
        """The node's process.roles."""
        return self.shape.process_roles(self.node_id(h), self.broker)

    def broker_names(self) -> list[str]:
        """The nodes that run the broker role (none without it)."""
        return [h.name for h in self.hosts if "broker" in self.roles(h).split(",")]

    def controller_port(self, h: Host) -> int:
        return self.ports.get(h.name, (CONTROLLER_PORT, CLIENT_PORT))[0]

    def client_port(self, h: Host) -> int:
        return self.ports.get(h.name, (CONTROLLER_PORT, CLIENT_PORT))[1]

    @staticmethod
    def data_dir(h: Host) -> str:
        return f"{h.workdir}/data"

    @staticmethod
    def config_path(h: Host) -> str:
        return f"{h.workdir}/node.properties"

    @staticmethod
    def pidfile(h: Host) -> str:
        return f"{h.workdir}/node.pid"

    @staticmethod
    def logfile(h: Host) -> str:
        return f"{h.workdir}/node.out"

    def endpoints(self) -> dict[str, tuple[str, int]]:
        """Client listener of every node: {name: (address, port)}."""
        return {h.name: (h.address, self.client_port(h)) for h in self.hosts}

    def listeners(self, h: Host, roles: str) -> dict[str, str]:
        """The node's listener settings for its `roles` (nodes/runtime/config.py). A node with the controller role
        listens on CONTROLLER (raft, and other brokers' requests) and CLIENT (the workload's clients and the
        harness's admin probes, which a controller-only node answers too); a broker-only node has no
        CONTROLLER listener but a BROKER one (inter-broker requests) on the same port. A broker advertises its
        CLIENT listener, and a broker-only node its BROKER one too (registered for the other brokers)."""
        bind = "0.0.0.0" if self.listen_any else h.address
        node_port, client_port = self.controller_port(h), self.client_port(h)
        roles_set = set(roles.split(","))
        internal = "CONTROLLER" if "controller" in roles_set else "BROKER"
        out = {"listeners": f"{internal}://{bind}:{node_port},CLIENT://{bind}:{client_port}"}
        if "broker" in roles_set:
            advertised = [f"CLIENT://{h.address}:{client_port}"]
            if internal == "BROKER":
                advertised.insert(0, f"BROKER://{h.address}:{node_port}")
            out["advertised.listeners"] = ",".join(advertised)
        return out

    def properties(self, h: Host) -> str:
        voters = ",".join(
            f"{self.node_id(x)}@{x.address}:{self.controller_port(x)}" for x in self.hosts if self.is_voter(x)
        )
        roles = self.roles(h)
        props = {
            "node.id": str(self.node_id(h)),
            "process.roles": roles,
            "controller.quorum.voters": voters,
            **self.listeners(h, roles),
            "log.dirs": self.data_dir(h),
            "kraftwerk.bugs": ",".join(self.bugs),
            "kraftwerk.seed": str((self.seed * 1009 + self.node_id(h)) % 2**31),
            **self.extra,
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def spec(self, h: Host) -> DaemonSpec:
        """How to (re)start this host's node (the clock nemesis's environment included)."""
        env = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        paths = [p for p in (h.faketime_sitedir, h.pythonpath) if p]
        if paths:
            env["PYTHONPATH"] = ":".join(paths)
        if self.env is not None:
            env.update(self.env(h))
        return DaemonSpec(
            [h.python, "-m", "nodes", "--config", self.config_path(h)],
            pidfile=self.pidfile(h),
            logfile=self.logfile(h),
            cwd=h.workdir,
            env=env,
        )

    def transport(self, seed: int) -> NodesTransport:
        """The workloads' transport to these nodes (harness.real's Interpreter)."""
        return NodesTransport(self.endpoints(), seed)

    def log_files(self, h: Host) -> dict[str, str]:
        """{path on the host: name under nodes/<node>/ in the run directory}."""
        return {
            f"{self.data_dir(h)}/events.jsonl": "events.jsonl",
            f"{self.data_dir(h)}/node.log": "node.log",
            self.logfile(h): "node.out",
            self.config_path(h): "node.properties",
        }

    # ------------------------------------------------------------------ life cycle
    def setup(self) -> None:
        """Write every node's node.properties (and data directory)."""
        self.install()

    def install(self) -> None:
        """Write every node's node.properties (and data directory)."""

        def write(h: Host) -> None:
            cfg = shlex.quote(self.config_path(h))
            h.control.run(
                f"mkdir -p {shlex.quote(self.data_dir(h))} && printf %s {shlex.quote(self.properties(h))} > {cfg}.tmp "
                f"&& mv -f {cfg}.tmp {cfg}",
                check=True,
                timeout=30,
            )

        on_hosts(self.hosts, write)

    def signal(self, name: str, sig: int) -> int | None:
        h = self.by_name[name]
        return h.control.signal_daemon(self.pidfile(h), sig)

    def stop(self, name: str, timeout: float = 10.0) -> int | None:
        """Graceful stop of one node (SIGTERM, SIGKILL after `timeout`)."""
        h = self.by_name[name]
        return h.control.stop_daemon(self.pidfile(h), timeout=timeout)

    def pid(self, name: str) -> int | None:
        """The pid of a running node, else None."""
        h = self.by_name[name]
        return h.control.daemon_status(self.pidfile(h)).pid

    def output(self, name: str) -> str:
        """The daemon output (stdout and stderr) of one node so far ("" if there is none)."""
        h = self.by_name[name]
        try:
            return h.control.get_file(self.logfile(h)).decode(errors="replace")
        except ControlError:
            return ""

    def offline_dump(self, name: str) -> list[dict[str, Any]]:
        """`python -m nodes dump-log` of a stopped node's data directory (ControlError if it fails)."""
        h = self.by_name[name]
        env = {"PYTHONPATH": h.pythonpath} if h.pythonpath else {}
        bugs = [a for b in self.bugs if b == "skip-crc" for a in ("--bug", b)]  # read the log as the node does
        r = h.control.run([h.python, "-m", "nodes", "dump-log", "--dir", self.data_dir(h), *bugs], env=env, timeout=120)
        if not r.ok:
            raise ControlError(f"{name}: dump-log failed: {r.stderr.strip()[-200:]}")
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]

    def events(self, name: str) -> list[dict[str, Any]]:
        """One node's events.jsonl as it is now (a torn last line is skipped)."""
        h = self.by_name[name]
        try:
            text = h.control.get_file(f"{self.data_dir(h)}/events.jsonl").decode(errors="replace")
        except ControlError:
            return []
        return _parse_lines(text)[0]

    # ------------------------------------------------------------------ status
    async def describe(self, name: str, timeout: float = 1.0) -> dict[str, Any] | None:
        """A node's AdminDescribe status, or None if it does not answer within `timeout`."""
        host, port = self.endpoints()[name]
        client = KvClient(host, port, timeout=timeout, connect_timeout=timeout)
        try:
            return await asyncio.wait_for(client.describe(timeout=timeout), timeout + 0.5)
        except Exception:  # noqa: BLE001 - any failure means "not answering"
            return None
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def wait_serving(self, names: Sequence[str], timeout: float = 10.0) -> bool:
        """Wait until each of `names` answers on its client listener (a restarted node is up again); False if
        some did not within `timeout`."""
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending and time.monotonic() < deadline:
            statuses = await self.describe_all(timeout=0.25, names=pending)
            pending = [n for n, s in statuses.items() if s is None]
            if pending:
                await asyncio.sleep(0.02)
        return not pending

    async def describe_all(
        self, timeout: float = 1.0, names: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any] | None]:
        names = list(names) if names is not None else [h.name for h in self.hosts]
        docs = await asyncio.gather(*(self.describe(n, timeout) for n in names))
        return dict(zip(names, docs))

    @staticmethod
    def leader_of(statuses: Mapping[str, dict[str, Any] | None]) -> tuple[str | None, int]:
        """(leader, epoch): the node that says it leads, with the highest epoch (DescribeQuorum's view)."""
        best: tuple[str | None, int] = (None, -1)
        for name, s in statuses.items():
            if s and s.get("role") == "leader" and int(s.get("epoch", -1)) > best[1]:
                best = (name, int(s["epoch"]))
        return best

    async def leader(self, timeout: float = 1.0) -> str | None:
        return self.leader_of(await self.describe_all(timeout))[0]

    @staticmethod
    def healthy(statuses: Mapping[str, dict[str, Any] | None]) -> str | None:
        """The leader if every node answers and follows it in its epoch, else None."""
        leader, epoch = NodeDB.leader_of(statuses)
        if leader is None or any(s is None for s in statuses.values()):
            return None
        lid = int(leader[1:])
        for s in statuses.values():
            if s is None or int(s.get("epoch", -1)) != epoch or s.get("leader") != lid:
                return None
        return leader

    async def wait_ready(self, timeout: float, names: Sequence[str] | None = None) -> tuple[str, float]:
        """Wait until a leader is elected and every node (of `names`) answers and knows it; (leader, seconds)."""
        started = time.monotonic()
        statuses: dict[str, dict[str, Any] | None] = {}
        while time.monotonic() - started < timeout:
            statuses = await self.describe_all(timeout=1.0, names=names)
            leader = self.healthy(statuses)
            if leader is not None and self.broker and not self.brokers_ready(self._of_brokers(statuses)):
                leader = None
            if leader is not None:
                return leader, time.monotonic() - started
            await asyncio.sleep(0.1)
        summary = {
            n: (None if s is None else {k: s.get(k) for k in ("role", "epoch", "leader")}) for n, s in statuses.items()
        }
        raise ClusterNotReady(f"no leader known to every node within {timeout:g}s: {summary}")

    def _of_brokers(self, statuses: Mapping[str, dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
        """The statuses of the nodes that run the broker role."""
        brokers = set(self.broker_names())
        return {n: s for n, s in statuses.items() if n in brokers}

    @staticmethod
    def brokers_ready(statuses: Mapping[str, dict[str, Any] | None]) -> bool:
        """Every node answers as a registered, unfenced broker."""
        return all(s is not None and (s.get("broker") or {}).get("fenced") is False for s in statuses.values())

    @staticmethod
    def partition_leaders(statuses: Mapping[str, dict[str, Any] | None]) -> dict[str, str]:
        """{partition: leader} from the brokers' own views: for each partition, the node that says it
        leads it in the highest leader epoch (a fenced old leader may still think it leads)."""
        best: dict[str, tuple[int, str]] = {}
        for name, s in statuses.items():
            parts = ((s or {}).get("broker") or {}).get("partitions") or {}
            for tp, p in parts.items():
                if p.get("role") == "leader" and int(p.get("leader_epoch", -1)) > best.get(tp, (-2, ""))[0]:
                    best[tp] = (int(p.get("leader_epoch", -1)), name)
        return {tp: name for tp, (_, name) in sorted(best.items())}

    async def partition_leader(self, timeout: float = 1.0) -> str | None:
        """The node leading the most partitions (ties: the leader of the first such partition), else
        the quorum leader: what a "leader" fault target means for the queue workload."""
        statuses = await self.describe_all(timeout)
        leaders = self.partition_leaders(statuses)
        if not leaders:
            return self.leader_of(statuses)[0]
        counts: dict[str, int] = {}
        for name in leaders.values():
            counts[name] = counts.get(name, 0) + 1
        return max(leaders.values(), key=lambda n: counts[n])

    # ------------------------------------------------------------------ blocking probes (no event loop)
    def describe_now(self, name: str, timeout: float = 1.0) -> dict[str, Any] | None:
        """A node's AdminDescribe status, or None (blocking)."""
        return describe_at(*self.endpoints()[name], timeout=timeout)

    def ready_now(self, names: Sequence[str] | None = None) -> tuple[bool, str]:
        """Is there one agreed leader, and is every broker registered, unfenced and listed by every node?"""
        names = list(names) if names is not None else [h.name for h in self.hosts]
        statuses = {n: self.describe_now(n) for n in names}
        silent = [n for n, s in statuses.items() if s is None]
        if silent:
            return False, f"no answer from node(s) {silent}"
        leaders = {s.get("leader") for s in statuses.values() if s is not None}
        if len(leaders) != 1 or None in leaders:
            return False, f"no agreed leader yet ({sorted(map(str, leaders))})"
        if self.broker:
            brokers = self._of_brokers(statuses)
            fenced = [n for n, s in brokers.items() if s and (s.get("broker") or {}).get("fenced", True)]
            if fenced:
                return False, f"broker(s) {fenced} not registered/unfenced yet"
            for n in brokers:
                md = metadata_at(*self.endpoints()[n])
                if md is None or len(md.brokers) < len(self.broker_names()):
                    return False, f"node {n} does not list every broker yet"
        return True, "ready"

    def rejoined_now(self, name: str) -> str | None:
        """Why a restarted node has not rejoined yet (None once it has)."""
        return not_rejoined(self.describe_now(name), broker=name in self.broker_names())

    def partition_leader_now(self, topic: str, partition: int, names: Iterable[str] | None = None) -> str:
        """The leader of (topic, partition) as the Metadata of `names` (default: every node) says, highest
        leader epoch winning; PartitionLeaderError if none can be named."""
        best: tuple[int, int] | None = None
        known = answered = False
        for name in names if names is not None else [h.name for h in self.hosts]:
            md = metadata_at(*self.endpoints()[name], [topic])
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
                    raise PartitionLeaderError(f"topic {topic!r} has no partition {partition}", bad_input=True)
        if not answered:
            raise PartitionLeaderError("no live node answers Metadata")
        if not known:
            raise PartitionLeaderError(f"topic {topic!r} does not exist", bad_input=True)
        if best is None:
            raise PartitionLeaderError(f"{topic}:{partition} has no leader right now")
        return f"n{best[0]}"

    # ------------------------------------------------------------------ collection (DaemonDB.collect)
    # collect stops the nodes, then gathers (merged events, committed-log dumps, notes) into run_dir:
    # nodes/<node>/{events.jsonl,node.log,node.out,node.properties}; with brokers, the partition dumps are kept
    # in `partition_logs` (the store writes them and the log dumps: harness.store.runs.RunDir). `notes["fatal"]`
    # names the nodes that stopped themselves on an illegal state, with the reason.
    def collect_notes(self) -> dict[str, Any]:
        return {"bad-event-lines": {}}

    def before_stop(self, run_dir: Path, notes: dict[str, Any]) -> None:
        if self.broker:  # the store writes them, with the logs (harness.store.runs.RunDir)
            self.partition_logs = self._dump_partitions(notes)

    def fatal(self, h: Host, out: Path) -> list[str]:
        if not (out / "node.log").exists():
            return []
        text = (out / "node.log").read_text(errors="replace")
        return [line.split(FATAL, 1)[1] for line in text.splitlines() if FATAL in line]

    def host_events(self, h: Host, out: Path, notes: dict[str, Any]) -> list[dict[str, Any]]:
        events, bad = _parse_jsonl(out / "events.jsonl")
        if bad:
            notes["bad-event-lines"][h.name] = bad
        return events

    def dump(self, h: Host, notes: dict[str, Any]) -> list[dict[str, Any]] | None:
        try:
            return self.offline_dump(h.name)
        except ControlError as e:
            notes["missing"].append(f"{h.name}:dump-log ({e})")
            return None

    def _dump_partitions(self, notes: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Every answering broker's committed partition batches, {partition: {node: entries}} (a node that does
        not answer is noted as missing)."""

        async def one(name: str) -> dict[str, list[dict[str, Any]]] | None:
            host, port = self.endpoints()[name]
            client = KvClient(host, port, timeout=10.0, connect_timeout=2.0)
            try:
                return await asyncio.wait_for(client.dump_partitions(timeout=10.0), 12.0)
            except Exception as e:  # noqa: BLE001 - a node that cannot answer has no dump
                notes["missing"].append(f"{name}:partition-dump ({type(e).__name__}: {e})")
                return None
            finally:
                with contextlib.suppress(Exception):
                    await client.close()

        async def every() -> list[dict[str, list[dict[str, Any]]] | None]:
            return await asyncio.gather(*(one(h.name) for h in self.hosts))

        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # callable with or without a running loop
            dumps = pool.submit(asyncio.run, every()).result()
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for h, dump in zip(self.hosts, dumps):
            for tp, entries in sorted((dump or {}).items()):
                out.setdefault(tp, {})[h.name] = entries
        return out


def _parse_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Objects of a JSONL file; unparsable lines (a torn last line after a kill) are skipped and counted."""
    if not path.exists():
        return [], 0
    return _parse_lines(path.read_text(encoding="utf-8", errors="replace"))


def _parse_lines(text: str) -> tuple[list[dict[str, Any]], int]:
    rows, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            rows.append(obj)
        else:
            bad += 1
    return rows, bad
