"""A whole simulated test: N nodes, P clients, a fault schedule, then heal, recover and read
everything back. One seed decides everything; the same seed gives the same history.

The workload (`workloads.registry`: `register`, `queue`, …) is the one real runs use, driven by the
same interpreter core; the nodes are KVNode cores, or BrokerNode cores when the workload speaks the
Kafka API (a replicated topic, clients sending unique values and polling them back).

Phases (virtual time):
0. setup — wait until a leader is known to every node, as a real run does before its main
   phase, then run the workload's setup (queue: create the topic and wait until every node sees
   every partition led);
1. main — clients run the workload while the schedule's faults come and go (the schedule's
   times count from its start);
2. recover — heal the network, restart killed nodes, resume paused ones, reset clocks;
3. final — every key is read back (retrying until a read succeeds or time runs out).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from harness.core.interpreter import SCHEDULE_FORMAT, Core, client_phase
from harness.core.recorder import Recorder
from harness.core.streams import stream
from harness.nemesis.interpreter import NemesisInterpreter
from harness.nemesis.schedule import ALL, generate
from harness.sim.engine import MS, SECOND, Scheduler
from harness.sim.faults import SimFaults
from harness.sim.interpreter import SimInterpreter
from harness.sim.invariants import Invariants
from harness.sim.network import Network
from harness.sim.node import SimNode
from harness.sim.transport import SimTransport
from nodes.broker import BrokerConfig, BrokerNode
from nodes.broker.partition import Role
from nodes.kv.node import KVNode
from nodes.raft import RaftConfig, digest
from nodes.runtime.lanes import connection_timeout_ms
from workloads import generator as gen

if TYPE_CHECKING:
    from harness.core.spec import TestSpec

# how a run is simulated, by schedule.json field (and SimPlan attribute): the current way first
MODES = {"links": ("tcp", "datagram"), "start": ("ready", "boot"), "clocks": ("wall", "timers")}
READY_WITHIN_SECONDS = 120.0  # a fresh cluster that has not elected a leader known to all by then is broken
SETUP_WITHIN_SECONDS = 120.0  # ... nor finished the workload's setup (the queue's topic) by then
RECOVERY_SECONDS = 10.0  # the simulator's pause between healing everything and the final reads


def mode_error(name: str, value: str) -> str | None:
    """Why `value` is no way to simulate `name` (one of MODES), or None if it is one."""
    if value in MODES[name]:
        return None
    return f"unknown {name} {value!r} (one of {', '.join(MODES[name])})"


# the simulator's own settings (not options of a test: the same on every run)
TIMEOUT_MS = 2000  # client request timeout → info
LATENCY_MS = (0.5, 5.0)  # one-way message latency, uniform
FINAL_SECONDS = 20.0  # allowed for the final reads
RAFT_CONFIG = RaftConfig(election_timeout_ms=1000, fetch_timeout_ms=2000, pre_vote=False)
# shorter than Kafka's defaults (9 s, 30 s) so that faults of a few seconds move leadership and shrink ISRs
BROKER_SESSION_TIMEOUT_MS = 3000
BROKER_HEARTBEAT_INTERVAL_MS = 1000
REPLICA_LAG_TIME_MAX_MS = 5000


@dataclass(frozen=True)
class SimPlan:
    """What drives a run besides its TestSpec: a stored run's fault events and client operations
    (None: drawn from the spec's seed), and the way it was simulated (MODES, the current way by default).

    links tcp: a message that meets a partition is retransmitted until the heal (or lost when the
    sender's connection times out), as on real nodes; datagram: lost at once (runs stored before tcp
    links). start ready: the main phase (and the schedule's clock) starts once a leader is known to
    every node, as a real run's does; boot: at once (register runs stored before). clocks wall: a
    clock fault moves the node's wall clock and not the core's timers, as on real nodes (libfaketime
    leaves the monotonic clock alone); timers: the timers follow it too (runs stored before).
    """

    schedule: list[dict[str, Any]] | None = None  # replay these nemesis events instead of generating them
    ops: list[dict[str, Any]] | None = None  # replay these client operations instead of drawing them
    links: str = "tcp"
    start: str = "ready"
    clocks: str = "wall"
    # how a real cluster is slower (`shrink --robust`'s other timings; not stored, 0 in a stored run's own
    # timing): the main phase begins this long after the cluster is ready (a real harness polls for the leader
    # and a replay waits for the lazy-flush phase), and a killed node serves again this long after its start
    ready_delay: int = 0  # ns
    restart_delay: int = 0  # ns

    def __post_init__(self) -> None:
        for name in MODES:
            if error := mode_error(name, getattr(self, name)):
                raise ValueError(error)


@dataclass
class SimResult:
    recorder: Recorder
    events: list[dict[str, Any]]
    logs: dict[str, list[dict[str, Any]]]
    invariants: dict[str, Any]
    schedule: list[dict[str, Any]]
    ops: list[dict[str, Any]]
    stats: dict[str, Any]
    workload_options: dict[str, Any] = field(default_factory=dict)  # the workload's, as schedule.json stores them
    # when the main phase began on the nodes' clocks (ns): a replay on a real cluster starts its main phase in
    # the same phase of the nodes' clock-phased timers (the lazy-flush bug's, nodes.raft.timing.next_lazy_flush)
    main_start: int = 0

    def schedule_document(self, spec: TestSpec, plan: SimPlan | None = None) -> dict[str, Any]:
        """`schedule.json`: everything needed to drive this run of `spec` (and `plan`) again without the
        random source."""
        plan = plan or SimPlan()
        return {
            "format": SCHEDULE_FORMAT,
            "workload": spec.workload,
            "seed": spec.seed,
            "nodes": spec.nodes,
            "concurrency": spec.concurrency,
            "time-limit": spec.time_limit,
            "bugs": list(spec.bugs),
            **({"fsync-delay-ms": spec.fsync_delay} if spec.fsync_delay else {}),
            "links": plan.links,
            "start": plan.start,
            "clocks": plan.clocks,
            "clock-source": spec.clock_source,
            **({"lease-reads": True} if spec.lease_reads else {}),
            **self.workload_options,
            "main-start": self.main_start,
            "nemesis": self.schedule,
            "ops": self.ops,
        }


class Simulation:
    """One run of `spec` in virtual time (driven by `plan`'s stored schedule and operations if given).
    The spec's backend is not read: the same spec runs here and on a real cluster."""

    def __init__(self, spec: TestSpec, plan: SimPlan | None = None, history_path: str | None = None) -> None:
        self.spec = spec
        self.plan = plan = plan or SimPlan()
        seed = spec.seed
        self.sched = Scheduler()
        self.net = Network(self.sched, stream("net", seed), LATENCY_MS, tcp=plan.links == "tcp")
        self.invariants = Invariants(self)
        self.recorder = Recorder(lambda: self.sched.now, history_path)
        self.events: list[dict[str, Any]] = []
        self.op_log: list[dict[str, Any]] = []
        self.fatal: list[dict[str, Any]] = []
        self.phase = "main"
        self.main_start = 0  # the main phase starts once the cluster is ready (and the workload's setup is done)
        self.assignment: dict[str, list[str]] = {}  # each partition's replicas when the main phase began
        self.main_end = int(spec.time_limit * SECOND)
        self.final_end = 0
        self.node_ids = list(range(1, spec.nodes + 1))
        self.names = [f"n{i}" for i in self.node_ids]
        config = replace(RAFT_CONFIG, lease_reads=spec.lease_reads)
        self.workload = spec.make_workload(self.names, TIMEOUT_MS / 1000)
        brokers = self.workload.api == "kafka"
        broker_config = BrokerConfig(
            min_insync_replicas=spec.min_isr,
            unclean_leader_election_enable=spec.unclean,
            default_replication_factor=spec.replication_factor,
            num_partitions=spec.partitions,
            broker_session_timeout_ms=BROKER_SESSION_TIMEOUT_MS,
            broker_heartbeat_interval_ms=BROKER_HEARTBEAT_INTERVAL_MS,
            replica_lag_time_max_ms=REPLICA_LAG_TIME_MAX_MS,
        )
        self._connection_configs = (config, broker_config if brokers else None)
        self._hold_ns: dict[type, int] = {}
        node_rng = stream("nodes", seed)
        self.nodes: dict[int, SimNode] = {}
        for i in self.node_ids:
            core_rng = stream("core", seed, i)

            def make(i: int = i, core_rng: random.Random = core_rng) -> Any:
                if brokers:
                    return BrokerNode(
                        i,
                        self.node_ids,
                        config,
                        core_rng,
                        spec.bugs,
                        broker_config=broker_config,
                        endpoint=(f"n{i}", 9092),
                    )
                return KVNode(i, self.node_ids, config, core_rng, spec.bugs)

            self.nodes[i] = SimNode(
                self,
                i,
                make,
                stream("disk", seed, i, node_rng.random()),
                disk_latency_ms=(1.0 + spec.fsync_delay, 10.0 + spec.fsync_delay),
                timers_follow_clock=plan.clocks == "timers" or spec.clock_source == "wall",
            )
        self.transport = SimTransport(self)
        # no nemesis thread: the simulator's faults come from the scheduler, at the schedule's times
        clock = lambda: self.sched.now  # noqa: E731
        self.core = Core(spec.concurrency, self.recorder, clock, rng=self._rng("interpreter"), nemesis=False)
        self.interpreter = SimInterpreter(self.core, self.sched, self.transport, self.workload.client)
        plans: dict[int, list[dict[str, Any]]] = {slot: [] for slot in range(spec.concurrency)}
        for i, step in enumerate(sorted(plan.ops or [], key=lambda s: s["at"])):
            if step["client"] not in plans:
                raise ValueError(f"schedule op for client {step['client']}, but concurrency is {spec.concurrency}")
            plans[step["client"]].append({"seq": i, **step})
        self.plans = plans if plan.ops is not None else None
        self._requests: dict[int, Any] = {}
        self._next_request = 0
        self.schedule = (
            plan.schedule
            if plan.schedule is not None
            else generate(seed, self.names, list(spec.nemeses), spec.time_limit, spec.interval, spec.partition_kinds)
        )
        self.faults = SimFaults(self.nodes.values(), self.net, self.sched, seed, restart_delay=plan.restart_delay)
        self.nemesis = NemesisInterpreter(self.faults, self.names, stream("nemesis-run", seed))

    # ------------------------------------------------------------------ plumbing used by nodes/clients
    def _rng(self, name: str) -> random.Random:
        return stream(name, self.spec.seed)

    def new_request(self, client: Any) -> int:
        """A request id; the node's reply (or its closing the request) goes to `client`."""
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

    def replica_assignment(self) -> dict[str, list[str]]:
        """Each partition's replica list (preferred leader first), as the quorum leader's metadata image
        holds it: {"t0-0": ["n2", "n3", "n1"], ...}; empty without a broker leader."""
        leader = self.leader()
        image = getattr(leader.core, "image", None) if leader is not None else None
        if image is None:
            return {}
        return {str(tp): [f"n{r}" for r in state.replicas] for tp, state in image.partitions()}

    def fault_leader(self) -> str | None:
        """What a "leader" fault target means, as on real clusters (`NodeDB.leader`, `partition_leader`):
        the quorum leader; for a Kafka-style workload the node leading the most partitions (ties: the
        leader of the first such partition), by the brokers' own views among nodes that would answer."""
        quorum = self.leader()
        if self.workload.api != "kafka":
            return quorum.name if quorum is not None else None
        best: dict[str, tuple[int, str]] = {}
        for n in self.nodes.values():
            if not n.alive or n.paused or n.core is None or not hasattr(n.core, "replicas"):
                continue
            for tp, p in n.core.replicas.partitions.items():
                if p.role is Role.LEADER and p.leader_epoch > best.get(str(tp), (-2, ""))[0]:
                    best[str(tp)] = (p.leader_epoch, n.name)
        if not best:
            return quorum.name if quorum is not None else None
        leaders = [name for _, (_, name) in sorted(best.items())]
        return max(leaders, key=leaders.count)

    # ------------------------------------------------------------------ nemesis
    def _fault(self, event: dict[str, Any]) -> None:
        """Apply a schedule event (harness.nemesis.interpreter) and record it in the history."""
        leader = self.fault_leader() if self.nemesis.needs_leader(event) else None
        applied = self.nemesis.apply(event, leader)
        self.recorder.record("nemesis", "info", event["f"], applied.recorded)

    def _heal_all(self) -> None:
        """Heal every fault package (each recorded, even with nothing to heal) and any other fault in force."""
        packages = {*ALL, *self.spec.nemeses, *(e["package"] for e in self.schedule if "package" in e)}
        for event in self.nemesis.heal_events(packages):
            self._fault(event)

    # ------------------------------------------------------------------ running
    def run(self) -> SimResult:
        spec = self.spec
        started = time.perf_counter()
        for node in self.nodes.values():
            node.start()
        self.main_start = 0
        setup = self.workload.setup()
        if self.plan.start == "ready" or setup is not None:
            self.phase = "setup"
            self._await_leader()
            if setup is not None:
                self._setup(setup)
            if self.plan.ready_delay:
                self.sched.run_until(self.sched.now + self.plan.ready_delay)
            self.phase = "main"
            self.main_start = self.sched.now
            self.assignment = self.replica_assignment()
            self.main_end = self.main_start + int(spec.time_limit * SECOND)
        for event in self.schedule:
            if event["at"] < int(spec.time_limit * SECOND):
                self.sched.at(self.main_start + event["at"], self._fault, event)
        self.core.ops_origin = self.main_start
        self.interpreter.start(self._main_generator())
        self.sched.run_until(self.main_end)

        self.phase = "recover"
        self._heal_all()
        self.sched.run_until(self.main_end + int(RECOVERY_SECONDS * SECOND))

        self.phase = "final"
        start_final = self.sched.now
        self.final_end = start_final + int(FINAL_SECONDS * SECOND)
        limit = int(spec.time_limit * SECOND)
        self.op_log = sorted((o for o in self.core.ops if o["at"] < limit), key=lambda o: o["at"])
        keys = sorted({step["key"] for step in self.op_log if step["key"] is not None}, key=lambda k: (len(k), k))
        final = self.workload.final(keys, spec.concurrency)
        self.core.rng = self._rng("interpreter-final")  # the same whether the main phase followed a plan or not
        self.interpreter.start(gen.clients(gen.time_limit(FINAL_SECONDS, final)) if final is not None else None)
        self.sched.run_until(self.final_end, stop=lambda: self.core.finished)
        # let operations still in flight complete or time out, so the history has no loose ends
        self.phase = "done"
        self.sched.run_until(self.sched.now + (TIMEOUT_MS + 10) * MS)
        read = {op.key for op in self.recorder.ops if op.time >= start_final and op.type == "ok"}
        unread = [k for k in keys if k not in read]

        logs = self._dump_logs()
        self.partition_dumps = self.partition_logs()
        wall = time.perf_counter() - started
        virtual = self.sched.now / SECOND
        invariants = self.invariants.result()
        if self.fatal:
            invariants = {**invariants, "valid": False, "node-fatal": self.fatal}
            invariants.setdefault("anomaly-types", []).append("node-fatal")
        stats = {
            "seed": spec.seed,
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
        return SimResult(
            self.recorder,
            self.events,
            logs,
            invariants,
            self.schedule,
            self.op_log,
            stats,
            {**self.workload.options(), **({"assignment": self.assignment} if self.assignment else {})},
            self.main_start,
        )

    def _main_generator(self) -> gen.Generator:
        """The clients' main phase: the workload's operations at the runner's rate, or a stored plan."""
        spec = self.spec
        if self.plans is None:
            return client_phase(self.workload, spec.time_limit, spec.rate)
        limit = int(spec.time_limit * SECOND)
        lanes = {slot: [step for step in steps if step["at"] < limit] for slot, steps in self.plans.items()}
        return gen.clients(gen.plan(lanes, spec.time_limit))

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

    def _setup(self, setup: gen.Generator) -> None:
        """Run the workload's setup on clients of its own (its operations are not part of the history)."""
        clock = lambda: self.sched.now  # noqa: E731
        core = Core(self.spec.concurrency, Recorder(clock), clock, nemesis=False)
        SimInterpreter(core, self.sched, self.transport, self.workload.client).start(gen.clients(setup))
        self.sched.run_until(self.sched.now + int(SETUP_WITHIN_SECONDS * SECOND), stop=lambda: core.finished)
        if not core.finished:
            why = getattr(self.workload, "setup_error", "")
            raise RuntimeError(
                f"the {self.workload.name} workload's setup did not finish in {SETUP_WITHIN_SECONDS:g} s: {why}"
            )

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
