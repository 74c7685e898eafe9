"""The node tests' cluster: RaftNode, KVNode or BrokerNode cores run by the simulator's own parts
(``harness.sim``: scheduler, network, ``SimNode`` with its disks and effect dispatch, invariants),
with the controls unit tests need: cut links one by one, slow one node's disk, call a core's
methods directly, run until a condition holds.

Links are datagram links (a message that meets a cut is lost), with optional random loss. Safety is
checked as the cluster runs, by the code the simulator and ``kraftwerk check --model epochs`` use:
the simulator's invariants (one leader per epoch, epochs never go down on disk, a vote is durable
before it counts, log matching, committed entries never diverge, a committed high watermark is on
a majority's disks) and the epoch checker over every node event (one leader per epoch, no double
vote, no epoch or high-watermark regression, one partition leader per leader epoch). ``violations``
lists what either found.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from checkers.epochs import EpochChecker
from harness.sim.engine import MS, Scheduler
from harness.sim.invariants import Invariants
from harness.sim.network import Network
from harness.sim.node import SimNode
from nodes.raft import RaftConfig, RaftNode, Record, Role


def raft_of(node: Any) -> RaftNode:
    return getattr(node, "raft", node)


class _Invariants(Invariants):
    """The simulator's invariants, and the core's promise that appends are contiguous (the
    simulated disk would take any)."""

    def on_append(self, node: Any, records: Any) -> None:
        end = len(node.disk.view) - len(records)  # the log end before this append
        assert records[0].offset == end, (node.name, records[0].offset, end)
        super().on_append(node, records)


class TestHost:
    """What a SimNode needs from its simulation (``harness.sim.cluster.Simulation`` in a whole
    test): the scheduler, the network, its peers, the invariants, and where replies, events and
    fatal errors go."""

    __test__ = False  # not a pytest test class

    def __init__(self, seed: int, delay_ms: tuple[float, float], loss: float, clock_source: str = "monotonic") -> None:
        self.clock_source = clock_source
        self.spec = SimpleNamespace(bugs=(), clock_source=clock_source)
        self.sched = Scheduler()
        self.net = Network(self.sched, random.Random(f"net-{seed}"), delay_ms, loss=loss, tcp=False)
        self.nodes: dict[int, SimNode] = {}
        self.invariants = _Invariants(self)
        self.checker = EpochChecker(max_examples=20)
        self.events: list[dict[str, Any]] = []
        self.replies: dict[Any, tuple[int, Any]] = {}
        self.closed: dict[Any, str] = {}
        self.fatal: dict[int, str] = {}

    def hold_ns(self, message: Any) -> int:
        return 0  # datagram links: nothing is held

    def client_reply(self, node: SimNode, reply: Any) -> None:
        self.replies[reply.request_id] = (node.id, reply)

    def client_closed(self, node: SimNode, effect: Any) -> None:
        self.closed[effect.request_id] = effect.reason

    def node_event(self, node: SimNode, data: dict[str, Any]) -> None:
        self.checker.feed(data, len(self.events), None)
        self.events.append(data)

    def node_fatal(self, node: SimNode, reason: str) -> None:
        self.fatal[node.id] = reason


class Cluster:
    def __init__(
        self,
        n: int = 3,
        *,
        seed: int = 0,
        bugs: Iterable[str] = (),
        config: RaftConfig | None = None,
        factory: Callable[..., Any] = RaftNode,
        delay_ms: tuple[int, int] = (1, 5),
        flush_ms: tuple[int, int] = (1, 3),
        loss: float = 0.0,
        clock_source: str = "monotonic",
        voters: int | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.ids = list(range(1, n + 1))
        self.voters = self.ids[:voters] if voters is not None else self.ids  # the rest are observers
        self.bugs = frozenset(bugs)
        self.config = config or RaftConfig()
        self.factory = factory
        self.flush_ms = flush_ms
        self.sim = TestHost(seed, delay_ms, loss, clock_source)
        self._cut: set[tuple[int, int]] = set()
        for i in self.ids:
            self.sim.nodes[i] = SimNode(
                self.sim,
                i,
                lambda i=i: self._core(i),
                random.Random(f"disk-{seed}-{i}"),
                disk_latency_ms=flush_ms,
                timers_follow_clock=clock_source == "wall",
            )

    def _core(self, i: int) -> Any:
        return self.factory(i, self.voters, self.config, random.Random(self.rng.random()), self.bugs)

    # -- state

    @property
    def now(self) -> int:
        return self.sim.sched.now

    @property
    def nodes(self) -> dict[int, Any]:
        """node id -> its running core, or None while it is down."""
        return {i: n.core for i, n in self.sim.nodes.items()}

    @property
    def replies(self) -> dict[Any, tuple[int, Any]]:
        """request id -> (node id, the Reply/ClientReply/ClientResponse that answered it)."""
        return self.sim.replies

    @property
    def fatal(self) -> dict[int, str]:
        return self.sim.fatal

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.sim.events

    @property
    def violations(self) -> list[dict[str, Any]]:
        """Every safety violation seen so far (the simulator's invariants, then the epoch checker's)."""
        found = list(self.sim.invariants.violations)
        if self.sim.checker.anomaly_counts():
            anomalies = self.sim.checker.result()["anomalies"]
            found += [{"anomaly": name, "examples": examples} for name, examples in anomalies.items()]
        return found

    @property
    def global_committed(self) -> dict[int, Record]:
        """offset -> the record first committed there (by any node)."""
        return {
            offset: Record(offset, *content) for offset, (_, content) in self.sim.invariants.committed.first.items()
        }

    @property
    def loss(self) -> float:
        return self.sim.net.loss

    @loss.setter
    def loss(self, value: float) -> None:
        self.sim.net.loss = value

    # -- lifecycle

    def start(self, ids: Iterable[int] | None = None) -> Cluster:
        for i in ids or self.ids:
            self.boot(i)
        return self

    def boot(self, i: int) -> None:
        self.sim.nodes[i].start()

    def crash(self, i: int) -> None:
        """Power loss: the process and its unflushed writes are gone."""
        self.sim.nodes[i].crash()

    def restart(self, i: int) -> None:
        self.crash(i)
        self.boot(i)

    def set_flush_ms(self, i: int, flush_ms: tuple[int, int] | None) -> None:
        """Node ``i``'s fsyncs take this long (None: the cluster's default again)."""
        lo, hi = flush_ms or self.flush_ms
        self.sim.nodes[i].disk_latency = (lo * MS, hi * MS)

    # -- network

    def cut(self, src: int, dst: int) -> None:
        """Drop every message from ``src`` to ``dst`` (one way) until ``heal``."""
        self._cut.add((src, dst))
        grudge: dict[str, list[str]] = {}
        for a, b in sorted(self._cut):
            grudge.setdefault(f"n{b}", []).append(f"n{a}")
        self.sim.net.partition(grudge)

    def isolate(self, i: int) -> None:
        for j in self.ids:
            if j != i:
                self.cut(i, j)
                self.cut(j, i)

    def partition(self, *groups: Iterable[int]) -> None:
        sets = [set(g) for g in groups]
        for a in sets:
            for b in sets:
                if a is not b:
                    for x in sorted(a):
                        for y in sorted(b):
                            self.cut(x, y)

    def heal(self) -> None:
        self._cut.clear()
        self.sim.net.heal()

    # -- running

    def run_for(self, ms: int) -> None:
        self.sim.sched.run_until(self.now + ms * MS)

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int = 60_000) -> bool:
        if predicate():
            return True
        self.sim.sched.run_until(self.now + timeout_ms * MS, stop=predicate)
        return predicate()

    def call(self, i: int, method: str, *args: Any) -> list[Any]:
        """Call ``method(now, *args, mono=…)`` on node ``i``'s core and apply what it returns."""
        node = self.sim.nodes[i]
        effects = getattr(node.core, method)(node.core_now(), *args, mono=self.now)
        node.apply(effects)
        return effects

    # -- queries

    def alive(self) -> list[int]:
        return [i for i in self.ids if self.sim.nodes[i].alive]

    def leader(self) -> int | None:
        """The live leader with the highest epoch, if any."""
        best = None
        for i in self.alive():
            raft = self.node(i)
            if raft.role is Role.LEADER and (best is None or raft.epoch > self.node(best).epoch):
                best = i
        return best

    def stable_leader(self) -> int | None:
        """A leader that every live node follows in its epoch and that has committed in it."""
        lid = self.leader()
        if lid is None:
            return None
        lraft = self.node(lid)
        for i in self.alive():
            raft = self.node(i)
            if raft.epoch != lraft.epoch or raft.leader_id != lid:
                return None
        leader_state = lraft._leader
        if leader_state is None or leader_state.high_watermark is None:
            return None
        return lid

    def node(self, i: int) -> RaftNode:
        return raft_of(self.sim.nodes[i].core)
