"""A whole simulated test: N nodes, P clients, a fault schedule, then heal, recover and read
everything back. One seed decides everything; the same seed gives the same history.

Workloads: `register` (KVNode cores, linearizable registers) and `queue` (BrokerNode cores:
a replicated topic, clients sending unique values and polling them back).

Phases (virtual time):
0. setup — wait until a leader is known to every node, as a real run does before its main
   phase (queue: create the topic and wait until every partition has a leader);
1. main — clients run the workload while the schedule's faults come and go (the schedule's
   times count from its start);
2. recover — heal the network, restart killed nodes, resume paused ones, reset clocks;
3. final — every key is read back (retrying until a read succeeds or time runs out).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from harness.nemesis import partitions
from harness.nemesis.interpreter import NemesisInterpreter
from harness.nemesis.schedule import ALL, generate
from harness.recorder import Recorder
from harness.sim.clients import SimClient
from harness.sim.engine import MS, SECOND, Scheduler
from harness.sim.faults import SimFaults
from harness.sim.invariants import Invariants
from harness.sim.network import Network
from harness.sim.node import SimNode
from harness.sim.queue_client import SimQueueClient
from nodes.broker import (
    BrokerConfig,
    BrokerNode,
    CreateTopicsRequest,
    CreateTopicsResponse,
    MetadataRequest,
    MetadataResponse,
    NewTopic,
)
from nodes.kv.node import KVNode
from nodes.raft import RaftConfig, digest
from nodes.runtime.lanes import connection_timeout_ms
from workloads.queue import TOPIC, QueueGenerator
from workloads.register import RegisterGenerator

# how a run is simulated, by schedule.json field (and SimOptions attribute): the current way first
MODES = {"links": ("tcp", "datagram"), "start": ("ready", "boot"), "clocks": ("wall", "timers")}
READY_WITHIN_SECONDS = 120.0  # a fresh cluster that has not elected a leader known to all by then is broken
RECOVERY_SECONDS = 10.0  # the simulator's pause between healing everything and the final reads


def mode_error(name: str, value: str) -> str | None:
    """Why `value` is no way to simulate `name` (one of MODES), or None if it is one."""
    if value in MODES[name]:
        return None
    return f"unknown {name} {value!r} (one of {', '.join(MODES[name])})"


@dataclass
class SimOptions:
    seed: int = 0
    nodes: int = 5
    concurrency: int = 10
    time_limit: float = 60.0  # seconds of the main phase (virtual)
    nemeses: list[str] = field(default_factory=lambda: ["partition", "kill", "pause", "clock"])
    bugs: list[str] = field(default_factory=list)
    interval: float = 5.0  # mean seconds between fault changes per package
    partition_kinds: tuple[str, ...] = partitions.KINDS
    think_ms: int = 50  # mean pause between a client's operations
    timeout_ms: int = 2000  # client request timeout → info
    latency_ms: tuple[float, float] = (0.5, 5.0)
    # tcp: a message that meets a partition is retransmitted until the heal (or lost when the sender's
    # connection times out), as on real nodes; datagram: lost at once (runs stored before tcp links)
    links: str = "tcp"
    # ready: the main phase (and the schedule's clock) starts once a leader is known to every node, as a real
    # run's does; boot: at once, while the first election is still going on (register runs stored before)
    start: str = "ready"
    # wall: a clock fault moves the node's wall clock (its events' times) and not the core's timers, as on
    # real nodes (libfaketime, monotonic clock left alone); timers: the core's timers follow it too (runs
    # stored before)
    clocks: str = "wall"
    fsync_delay_ms: int = 0  # added to every fsync's 1–10 ms (a slow disk, as `--fsync-delay` on real nodes)
    recovery: float = RECOVERY_SECONDS  # seconds between healing everything and the final reads
    final: float = 20.0  # seconds allowed for the final reads
    keys: int = 4
    ops_per_key: int = 120
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    pre_vote: bool = False
    workload: str = "register"
    # queue workload (Kafka's safe profile by default)
    acks: int = -1
    partitions: int = 3
    replication_factor: int = 3
    min_isr: int = 2
    unclean: bool = False
    produce_timeout_ms: int = 1500
    # shorter than Kafka's defaults (9 s, 30 s) so that faults of a few seconds move leadership and shrink ISRs
    broker_session_timeout_ms: int = 3000
    broker_heartbeat_interval_ms: int = 1000
    replica_lag_time_max_ms: int = 5000
    schedule: list[dict[str, Any]] | None = None  # replay these nemesis events instead of generating them
    ops: list[dict[str, Any]] | None = None  # replay these client operations instead of drawing them


@dataclass
class SimResult:
    recorder: Recorder
    events: list[dict[str, Any]]
    logs: dict[str, list[dict[str, Any]]]
    invariants: dict[str, Any]
    schedule: list[dict[str, Any]]
    ops: list[dict[str, Any]]
    stats: dict[str, Any]

    def schedule_document(self, opts: SimOptions) -> dict[str, Any]:
        """`schedule.json`: everything needed to drive this run again without the random source."""
        return {
            "format": 1,
            "workload": opts.workload,
            "seed": opts.seed,
            "nodes": opts.nodes,
            "concurrency": opts.concurrency,
            "time-limit": opts.time_limit,
            "bugs": list(opts.bugs),
            **({"fsync-delay-ms": opts.fsync_delay_ms} if opts.fsync_delay_ms else {}),
            "links": opts.links,
            "start": opts.start,
            "clocks": opts.clocks,
            **(queue_options(opts) if opts.workload == "queue" else {}),
            "nemesis": self.schedule,
            "ops": self.ops,
        }


def queue_options(opts: SimOptions) -> dict[str, Any]:
    """The queue workload's topic and producer settings, as stored in schedule.json."""
    return {
        "acks": opts.acks,
        "partitions": opts.partitions,
        "replication-factor": opts.replication_factor,
        "min-isr": opts.min_isr,
        "unclean": opts.unclean,
    }


class Simulation:
    def __init__(self, opts: SimOptions, history_path: str | None = None) -> None:
        self.opts = opts
        seed = opts.seed
        self.sched = Scheduler()
        for name in MODES:
            if error := mode_error(name, getattr(opts, name)):
                raise ValueError(error)
        self.net = Network(self.sched, random.Random(f"net-{seed}"), opts.latency_ms, tcp=opts.links == "tcp")
        self.invariants = Invariants(self)
        self.recorder = Recorder(lambda: self.sched.now, history_path)
        self.events: list[dict[str, Any]] = []
        self.op_log: list[dict[str, Any]] = []
        self.fatal: list[dict[str, Any]] = []
        self.phase = "main"
        self.main_start = 0  # the main phase starts once the cluster is ready (queue: once the topic is led)
        self.main_end = int(opts.time_limit * SECOND)
        self.final_end = 0
        self.node_ids = list(range(1, opts.nodes + 1))
        self.names = [f"n{i}" for i in self.node_ids]
        config = RaftConfig(
            election_timeout_ms=opts.election_timeout_ms,
            fetch_timeout_ms=opts.fetch_timeout_ms,
            pre_vote=opts.pre_vote,
        )
        if opts.workload not in ("register", "queue"):
            raise ValueError(f"unknown workload {opts.workload!r}")
        broker_config = BrokerConfig(
            min_insync_replicas=opts.min_isr,
            unclean_leader_election_enable=opts.unclean,
            default_replication_factor=opts.replication_factor,
            num_partitions=opts.partitions,
            broker_session_timeout_ms=opts.broker_session_timeout_ms,
            broker_heartbeat_interval_ms=opts.broker_heartbeat_interval_ms,
            replica_lag_time_max_ms=opts.replica_lag_time_max_ms,
        )
        self._connection_configs = (config, broker_config if opts.workload == "queue" else None)
        self._hold_ns: dict[type, int] = {}
        node_rng = random.Random(f"nodes-{seed}")
        self.nodes: dict[int, SimNode] = {}
        for i in self.node_ids:
            core_rng = random.Random(f"core-{seed}-{i}")

            def make(i: int = i, core_rng: random.Random = core_rng) -> Any:
                if opts.workload == "queue":
                    return BrokerNode(
                        i,
                        self.node_ids,
                        config,
                        core_rng,
                        opts.bugs,
                        broker_config=broker_config,
                        endpoint=(f"n{i}", 9092),
                    )
                return KVNode(i, self.node_ids, config, core_rng, opts.bugs)

            self.nodes[i] = SimNode(
                self,
                i,
                make,
                random.Random(f"disk-{seed}-{i}-{node_rng.random()}"),
                disk_latency_ms=(1.0 + opts.fsync_delay_ms, 10.0 + opts.fsync_delay_ms),
            )
        client_rng = random.Random(f"clients-{seed}")
        self.clients: list[Any]
        self.acked_max: dict[str, int] = {}
        if opts.workload == "queue":
            self.queue_generator = QueueGenerator(random.Random(f"workload-{seed}"), opts.partitions)
            self.clients = [
                SimQueueClient(
                    self, slot, random.Random(f"client-{seed}-{slot}-{client_rng.random()}"), self.queue_generator
                )
                for slot in range(opts.concurrency)
            ]
        else:
            self.generator = RegisterGenerator(random.Random(f"workload-{seed}"), opts.keys, opts.ops_per_key)
            self.clients = [
                SimClient(self, slot, random.Random(f"client-{seed}-{slot}-{client_rng.random()}"), self.generator)
                for slot in range(opts.concurrency)
            ]
        if opts.ops is not None:
            plans: dict[int, list[dict[str, Any]]] = {c.slot: [] for c in self.clients}
            for step in sorted(opts.ops, key=lambda s: s["at"]):
                if step["client"] not in plans:
                    raise ValueError(f"schedule op for client {step['client']}, but concurrency is {opts.concurrency}")
                plans[step["client"]].append(step)
            for c in self.clients:
                c.plan = plans[c.slot]
        self._requests: dict[int, SimClient] = {}
        self._next_request = 0
        self.schedule = (
            opts.schedule
            if opts.schedule is not None
            else generate(seed, self.names, opts.nemeses, opts.time_limit, opts.interval, opts.partition_kinds)
        )
        self.faults = SimFaults(self.nodes.values(), self.net, self.sched, seed)
        self.nemesis = NemesisInterpreter(self.faults, self.names, random.Random(f"nemesis-run-{seed}"))

    # ------------------------------------------------------------------ plumbing used by nodes/clients
    def new_request(self, client: SimClient) -> int:
        self._next_request += 1
        self._requests[self._next_request] = client
        return self._next_request

    def hold_ns(self, message: Any) -> int:
        """How long the connection carrying a node-to-node `message` waits for an answer (TCP-like links)."""
        kind = type(message)
        hold = self._hold_ns.get(kind)
        if hold is None:
            hold = self._hold_ns[kind] = connection_timeout_ms(message, *self._connection_configs) * MS
        return hold

    def client_reply(self, node: SimNode, reply: Any) -> None:
        client = self._requests.pop(reply.request_id, None)
        if client is None:
            return
        self.net.send(node.name, client.name, client.reply, reply.request_id, reply, node.name, partitionable=False)

    def client_closed(self, node: SimNode, effect: Any) -> None:
        client = self._requests.pop(effect.request_id, None)
        if client is not None:
            client.closed(effect.request_id)

    def note_ack(self, key: str | None, offset: int) -> None:
        if key is not None and offset > self.acked_max.get(key, -1):
            self.acked_max[key] = offset

    def node_event(self, node: SimNode, data: dict[str, Any]) -> None:
        self.events.append(data)

    def node_fatal(self, node: SimNode, reason: str) -> None:
        self.fatal.append({"node": node.name, "time": self.sched.now, "reason": reason})

    def leader(self) -> SimNode | None:
        """The live leader with the highest epoch (what DescribeQuorum would tell)."""
        best: SimNode | None = None
        for n in self.nodes.values():
            leading = n.alive and n.core is not None and n.core.raft.is_leader
            if leading and (best is None or n.core.raft.epoch > best.core.raft.epoch):  # type: ignore[union-attr]
                best = n
        return best

    # ------------------------------------------------------------------ nemesis
    def _fault(self, event: dict[str, Any]) -> None:
        """Apply a schedule event (harness.nemesis.interpreter) and record it in the history."""
        leader = self.leader() if self.nemesis.needs_leader(event) else None
        applied = self.nemesis.apply(event, leader.name if leader is not None else None)
        self.recorder.record("nemesis", "info", event["f"], applied.recorded)

    def _heal_all(self) -> None:
        """Heal every fault package (each recorded, even with nothing to heal) and any other fault in force."""
        packages = {*ALL, *self.opts.nemeses, *(e["package"] for e in self.schedule if "package" in e)}
        for event in self.nemesis.heal_events(packages):
            self._fault(event)

    # ------------------------------------------------------------------ running
    def run(self) -> SimResult:
        opts = self.opts
        started = time.perf_counter()
        for node in self.nodes.values():
            node.start()
        self.main_start = 0
        if opts.workload == "queue" or opts.start == "ready":
            self.phase = "setup"
            if opts.workload == "queue":
                self._setup_topic()
            else:
                self._await_leader()
            self.phase = "main"
            self.main_start = self.sched.now
            self.main_end = self.main_start + int(opts.time_limit * SECOND)
        for event in self.schedule:
            if event["at"] < int(opts.time_limit * SECOND):
                self.sched.at(self.main_start + event["at"], self._fault, event)
        for client in self.clients:
            client.start()
        self.sched.run_until(self.main_end)

        self.phase = "recover"
        self._heal_all()
        self.sched.run_until(self.main_end + int(opts.recovery * SECOND))

        self.phase = "final"
        start_final = self.sched.now
        self.final_end = start_final + int(opts.final * SECOND)
        if opts.workload == "queue":
            keys = list(self.queue_generator.keys)
        else:
            keys = sorted({step["key"] for step in self.op_log}, key=lambda k: (len(k), k))
        for i, key in enumerate(keys):
            self.clients[i % len(self.clients)].final_keys.append(key)
        for client in self.clients:
            client.next_op()
        self.sched.run_until(
            self.final_end,
            stop=lambda: all(c.done or (not c.final_keys and c.current is None) for c in self.clients),
        )
        # let operations still in flight complete or time out, so the history has no loose ends
        self.phase = "done"
        self.sched.run_until(self.sched.now + (opts.timeout_ms + 10) * MS)
        unread = [k for c in self.clients for k in c.final_keys]

        logs = self._dump_logs()
        self.partition_dumps = self.partition_logs() if opts.workload == "queue" else {}
        wall = time.perf_counter() - started
        virtual = self.sched.now / SECOND
        invariants = self.invariants.result()
        if self.fatal:
            invariants = {**invariants, "valid": False, "node-fatal": self.fatal}
            invariants.setdefault("anomaly-types", []).append("node-fatal")
        stats = {
            "seed": opts.seed,
            "virtual-seconds": round(virtual, 3),
            "wall-seconds": round(wall, 3),
            "speedup": round(virtual / wall, 1) if wall > 0 else None,
            "events": self.sched.events_run,
            "messages": self.net.sent,
            "dropped": self.net.dropped,
            "retransmitted": self.net.retransmitted,
            "operations": sum(1 for op in self.recorder.ops if op.type == "invoke"),
            "restarts": sum(n.restarts for n in self.nodes.values()),
            "unread-keys": unread,
            "history-sha256": self.recorder.digest(),
        }
        self.recorder.close()
        return SimResult(self.recorder, self.events, logs, invariants, self.schedule, self.op_log, stats)

    def _await_leader(self) -> None:
        """Run until a leader is known to every node in its epoch (when a real run's main phase starts)."""
        self.sched.run_until(self.sched.now + int(READY_WITHIN_SECONDS * SECOND), stop=self._cluster_ready)
        if not self._cluster_ready():
            raise RuntimeError(f"no leader known to every node within {READY_WITHIN_SECONDS:g} s")

    def _cluster_ready(self) -> bool:
        leader = self.leader()
        if leader is None:
            return False
        epoch = leader.core.raft.epoch  # type: ignore[union-attr]
        return all(
            n.core is not None and n.core.raft.epoch == epoch and n.core.raft.leader_id == leader.id
            for n in self.nodes.values()
        )

    def _setup_topic(self) -> None:
        """Create the topic and wait until every partition has a leader (not part of the history)."""
        opts = self.opts
        setup = _TopicSetup(self)
        setup.step()
        self.sched.run_until(self.sched.now + 120 * SECOND, stop=lambda: setup.done)
        if not setup.done:
            raise RuntimeError(f"could not create topic {TOPIC!r} with {opts.partitions} partitions in 120 s")

    def partition_logs(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Each live broker's committed partition batches: {partition: {node: [{offset, epoch, digest}]}}."""
        import hashlib

        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for node in self.nodes.values():
            core = node.core
            if core is None or not hasattr(core, "replicas"):
                continue
            for tp, p in sorted(core.replicas.partitions.items()):
                entries = [
                    {
                        "offset": b.base_offset,
                        "epoch": b.leader_epoch,
                        "digest": hashlib.sha256(b.data).hexdigest()[:16],
                    }
                    for b in p.log.batches
                    if b.base_offset < p.hw
                ]
                out.setdefault(str(tp), {})[node.name] = entries
        return out

    def _dump_logs(self) -> dict[str, list[dict[str, Any]]]:
        """Each live node's committed log (offset, epoch, digest), as `logs/<node>.jsonl`."""
        logs: dict[str, list[dict[str, Any]]] = {}
        for node in self.nodes.values():
            if node.core is None:
                continue
            raft = node.core.raft
            logs[node.name] = [
                {"offset": r.offset, "epoch": r.epoch, "digest": digest(r)}
                for r in raft.log_records(0, raft.high_watermark)
            ]
        return logs


class _TopicSetup:
    """Creates the queue workload's topic through any node, then polls metadata until it is led."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.created = False
        self.done = False
        self.attempt = 0
        self.name = "setup"

    def step(self) -> None:
        if self.done:
            return
        sim = self.sim
        opts = sim.opts
        node = sim.nodes[sim.node_ids[self.attempt % len(sim.node_ids)]]
        self.attempt += 1
        rid = sim.new_request(self)
        if not self.created:
            configs = (
                ("min.insync.replicas", str(opts.min_isr)),
                ("unclean.leader.election.enable", "true" if opts.unclean else "false"),
            )
            topic = NewTopic(TOPIC, opts.partitions, opts.replication_factor, configs=configs)
            request: Any = CreateTopicsRequest((topic,), timeout_ms=5000)
            sim.net.send(
                self.name, node.name, node.client_call, self, rid, "create_topics", request, partitionable=False
            )
        else:
            sim.net.send(
                self.name,
                node.name,
                node.client_call,
                self,
                rid,
                "metadata",
                MetadataRequest((TOPIC,)),
                partitionable=False,
            )
        sim.sched.after(300 * MS, self.step)

    def reply(self, request_id: int, effect: Any, node_name: str) -> None:
        response = effect.response
        if isinstance(response, CreateTopicsResponse):
            if response.topics and int(response.topics[0].error) in (0, 36):  # NONE, TOPIC_ALREADY_EXISTS
                self.created = True
        elif isinstance(response, MetadataResponse):
            for topic in response.topics:
                complete = topic.name == TOPIC and len(topic.partitions) == self.sim.opts.partitions
                if complete and all(p.leader is not None and p.leader >= 0 for p in topic.partitions):
                    self.done = True

    def closed(self, request_id: int) -> None:
        pass
