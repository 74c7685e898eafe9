"""The simulated cluster: N nodes, the network between them and the clients' links, in virtual time. One
seed decides everything; the same seed gives the same history.

The workload (`workloads.registry`: `register`, `queue`, …) is the one real runs use, driven by the
same interpreter core; the nodes are KVNode cores, or BrokerNode cores when the workload speaks the
Kafka API (a replicated topic, clients sending unique values and polling them back).

The cluster's shape (`--controllers`, harness.core.shape) decides the voter set and each node's core: a
combined voter (BrokerNode, or KVNode), a broker-only observer (BrokerNode outside the voter set), or a
controller-only voter (`BrokerNode(broker=False)`, as a real `process.roles=controller` node of a Kafka workload
runs); the workload's clients talk to the brokers.

`Simulation` is the cluster: nodes, network, fault application, what a "leader" target means and when the
cluster is ready. A test's phases (setup, main, heal, recovery, final reads) are run over it by
`harness.core.run.run_test`, through `harness.sim.runtime.SimRuntime`, as on a real cluster.

How a run is simulated is recorded in schedule.json (MODES, SimPlan), so that runs stored by older
versions replay byte for byte.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from harness.core.phases import PHASES
from harness.core.recorder import Recorder
from harness.core.runtime import PAUSE, SETTLE_READY
from harness.core.streams import stream
from harness.nemesis.interpreter import NemesisInterpreter
from harness.nemesis.schedule import ALL, generate
from harness.sim.engine import MS, SECOND, Scheduler
from harness.sim.faults import SimFaults
from harness.sim.invariants import Invariants
from harness.sim.network import Network
from harness.sim.node import SimNode
from harness.sim.transport import SimTransport
from harness.store.schedule import document
from nodes.broker import BrokerConfig, BrokerNode
from nodes.broker.partition import Role
from nodes.kv.node import KVNode
from nodes.raft import RaftConfig, digest
from nodes.runtime.lanes import connection_timeout_ms

if TYPE_CHECKING:
    from harness.core.spec import TestSpec

# how a run is simulated, by schedule.json field (and SimPlan attribute): the current way first
MODES = {
    "links": ("tcp", "datagram"),
    "start": ("ready", "boot"),
    "clocks": ("wall", "timers"),
    "recover": (SETTLE_READY, PAUSE),
}


def mode_error(name: str, value: str) -> str | None:
    """Why `value` is no way to simulate `name` (one of MODES), or None if it is one."""
    if value in MODES[name]:
        return None
    return f"unknown {name} {value!r} (one of {', '.join(MODES[name])})"


# the simulator's own settings (not options of a test: the same on every run; the phases' limits, the
# client request timeout among them, are every runtime's: harness.core.phases)
LATENCY_MS = (0.5, 5.0)  # one-way message latency, uniform
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
    leaves the monotonic clock alone); timers: the timers follow it too (runs stored before). recover
    settle-ready: after the heal, the final reads wait the test's settle and then until a leader is known to
    every running node (up to the recovery limit), as on real clusters (harness.core.run); pause: the settle
    only (10 s: runs stored before), and the final reads in any case.
    """

    schedule: list[dict[str, Any]] | None = None  # replay these nemesis events instead of generating them
    ops: list[dict[str, Any]] | None = None  # replay these client operations instead of drawing them
    links: str = "tcp"
    start: str = "ready"
    clocks: str = "wall"
    recover: str = SETTLE_READY
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
    # each partition's replicas (preferred leader first) when the main phase began, for a Kafka-style workload
    assignment: dict[str, list[str]] = field(default_factory=dict)
    # when the main phase began on the nodes' clocks (ns): a replay on a real cluster starts its main phase in
    # the same phase of the nodes' clock-phased timers (the lazy-flush bug's, nodes.raft.timing.next_lazy_flush)
    main_start: int = 0

    def schedule_document(self, spec: TestSpec, plan: SimPlan | None = None) -> dict[str, Any]:
        """`schedule.json`: everything needed to drive this run of `spec` (and `plan`) again without the
        random source (harness.store.schedule)."""
        return schedule_document(spec, plan or SimPlan(), self.schedule, self.ops, self.assignment, self.main_start)


def schedule_document(
    spec: TestSpec,
    plan: SimPlan,
    schedule: list[dict[str, Any]],
    ops: list[dict[str, Any]],
    assignment: dict[str, list[str]],
    main_start: int,
) -> dict[str, Any]:
    """`schedule.json` of a simulated run of `spec` and `plan` whose faults were `schedule` and whose client
    operations were `ops` (its main phase began at `main_start`; a Kafka-style topic was placed as
    `assignment`): the test embedded (harness.store.schedule), then how it was simulated."""
    return document(
        spec,
        **{name: getattr(plan, name) for name in MODES},
        **({"assignment": assignment} if assignment else {}),
        **{"main-start": main_start, "nemesis": schedule, "ops": ops},
    )


class Simulation:
    """The simulated cluster of `spec` (driven by `plan`'s stored schedule and operations if given), at
    virtual time 0, its nodes not started yet. The spec's backend is not read: the same spec runs here and on a
    real cluster. `harness.sim.runtime.SimRuntime` runs a test's phases on it."""

    recorder: Recorder  # the history, once the main phase begins

    def __init__(self, spec: TestSpec, plan: SimPlan | None = None) -> None:
        self.spec = spec
        self.plan = plan = plan or SimPlan()
        seed = spec.seed
        self.sched = Scheduler()
        self.net = Network(self.sched, stream("net", seed), LATENCY_MS, tcp=plan.links == "tcp")
        self.invariants = Invariants(self)
        self.events: list[dict[str, Any]] = []
        self.op_log: list[dict[str, Any]] = []
        self.fatal: list[dict[str, Any]] = []
        self.phase = "main"
        self.main_start = 0  # the main phase starts once the cluster is ready (and the workload's setup is done)
        self.assignment: dict[str, list[str]] = {}  # each partition's replicas when the main phase began
        self.main_end = int(spec.time_limit * SECOND)
        self.final_end = 0
        self.partition_dumps: dict[str, dict[str, list[dict[str, Any]]]] = {}  # at the end, as partition_logs()
        self.node_ids = list(range(1, spec.nodes + 1))
        self.names = [f"n{i}" for i in self.node_ids]
        self.shape = shape = spec.shape
        self.voter_ids = shape.voter_ids  # the quorum's voters; any other node is an observer
        nodes_options = spec.db_options  # our nodes' own options (harness.db.kraftwerk.NodesOptions)
        config = replace(RAFT_CONFIG, lease_reads=nodes_options.lease_reads)
        # the clients talk to the nodes that serve them: the brokers (every node but in a dedicated layout)
        self.workload = spec.make_workload(shape.broker_names, PHASES.op_timeout)
        brokers = self.workload.api == "kafka"
        topic = self.workload.options() if brokers else {}  # the topic defaults, as real brokers get them
        broker_config = BrokerConfig(
            min_insync_replicas=topic.get("min-isr", 2),
            unclean_leader_election_enable=topic.get("unclean", False),
            default_replication_factor=topic.get("replication-factor", 3),
            num_partitions=topic.get("partitions", 3),
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
                        self.voter_ids,
                        config,
                        core_rng,
                        spec.bugs,
                        broker_config=broker_config,
                        endpoint=(f"n{i}", 9092),
                        broker=shape.is_broker(i),
                    )
                return KVNode(i, self.voter_ids, config, core_rng, spec.bugs)

            self.nodes[i] = SimNode(
                self,
                i,
                make,
                stream("disk", seed, i, node_rng.random()),
                disk_latency_ms=(1.0 + nodes_options.fsync_delay, 10.0 + nodes_options.fsync_delay),
                timers_follow_clock=plan.clocks == "timers" or nodes_options.clock_source == "wall",
            )
        self.transport = SimTransport(self)
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
            else generate(
                seed,
                self.names,
                list(spec.nemeses),
                spec.time_limit,
                spec.interval,
                spec.partition_kinds,
                roles=shape.separate,
            )
        )
        self.faults = SimFaults(self.nodes.values(), self.net, self.sched, seed, restart_delay=plan.restart_delay)
        self.nemesis = NemesisInterpreter(self.faults, self.names, stream("nemesis-run", seed), shape.groups())

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

    def cluster_ready(self, names: Collection[str] | None = None) -> bool:
        """A leader is known to every node (of `names`) in its epoch: when a real run's main phase starts and
        when it has recovered from the heal (`NodeDB.wait_ready`)."""
        leader = self.leader()
        if leader is None:
            return False
        epoch = leader.core.raft.epoch  # type: ignore[union-attr]
        return all(
            n.core is not None and n.core.raft.epoch == epoch and n.core.raft.leader_id == leader.id
            for n in self.nodes.values()
            if names is None or n.name in names
        )

    # ------------------------------------------------------------------ nemesis
    def _fault(self, event: dict[str, Any]) -> None:
        """Apply a schedule event (harness.nemesis.interpreter) and record it in the history."""
        leader = self.fault_leader() if self.nemesis.needs_leader(event) else None
        controller = self.leader() if self.nemesis.needs_controller(event) else None
        applied = self.nemesis.apply(event, leader, controller.name if controller is not None else None)
        self.recorder.record("nemesis", "info", event["f"], applied.recorded)

    def _heal_all(self) -> None:
        """Heal every fault package (each recorded, even with nothing to heal) and any other fault in force."""
        packages = {*ALL, *self.spec.nemeses, *(e["package"] for e in self.schedule if "package" in e)}
        for event in self.nemesis.heal_events(packages):
            self._fault(event)

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

    def dump_logs(self) -> dict[str, list[dict[str, Any]]]:
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
