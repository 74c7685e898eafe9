"""A tiny deterministic driver for tests: dict-of-queues network, fake clock, lossy disk.

It runs RaftNode (or KVNode) cores the way the simulator will: one seeded ``random.Random``, a
heap of timed events, per-link message delay and cuts, and a disk whose unflushed tail is lost on
``crash``. It also checks two safety properties as it goes: at most one leader per epoch (from the
state events), at most one vote per node and epoch, no node's epoch or high watermark going
down (restarts included), and that every node's committed entries agree
with every other node's.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nodes.raft import (
    MS,
    AppendLog,
    Committed,
    Event,
    Fatal,
    Flush,
    PersistQuorumState,
    QuorumState,
    RaftConfig,
    RaftNode,
    Record,
    Reply,
    Role,
    Send,
    TruncateLog,
)


@dataclass
class Disk:
    quorum: QuorumState | None = None
    log: list[Record] = field(default_factory=list)
    flushed: int = 0

    def crash(self) -> None:
        del self.log[self.flushed :]


def raft_of(node: Any) -> RaftNode:
    return getattr(node, "raft", node)


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
    ) -> None:
        self.rng = random.Random(seed)
        self.ids = list(range(1, n + 1))
        self.bugs = frozenset(bugs)
        self.config = config or RaftConfig()
        self.factory = factory
        self.delay_ms = delay_ms
        self.flush_ms = flush_ms
        self.loss = loss  # probability that a message is dropped
        self.flush_ms_for: dict[int, tuple[int, int]] = {}  # per-node override (slow disks)
        self.now = 0
        self.nodes: dict[int, Any] = {i: None for i in self.ids}
        self.disks = {i: Disk() for i in self.ids}
        self.incarnation = dict.fromkeys(self.ids, 0)
        self.cut: set[tuple[int, int]] = set()
        self.queue: list[tuple[int, int, str, int, int, Any]] = []
        self.seq = 0
        self.wake: dict[int, int | None] = dict.fromkeys(self.ids)
        self.events: list[dict] = []
        self.replies: dict[Any, tuple[int, Any]] = {}
        self.committed: dict[int, dict[int, Record]] = {i: {} for i in self.ids}
        self.global_committed: dict[int, Record] = {}
        self.fatal: dict[int, str] = {}
        self.violations: list[str] = []
        self.leaders: dict[int, str] = {}
        self.votes: dict[tuple[str, int], str] = {}
        self.last_epoch: dict[str, int] = {}
        self.last_hw: dict[str, int] = {}
        self.delivered = 0

    # -- lifecycle

    def start(self, ids: Iterable[int] | None = None) -> Cluster:
        for i in ids or self.ids:
            self.boot(i)
        return self

    def boot(self, i: int) -> None:
        node = self.factory(i, self.ids, self.config, random.Random(self.rng.random()), self.bugs)
        self.nodes[i] = node
        self.committed[i] = {}
        disk = self.disks[i]
        self.apply(i, node.start(self.now, disk.quorum, list(disk.log)))

    def crash(self, i: int) -> None:
        self.nodes[i] = None
        self.incarnation[i] += 1
        self.wake[i] = None
        self.disks[i].crash()

    def restart(self, i: int) -> None:
        self.crash(i)
        self.boot(i)

    # -- network

    def isolate(self, i: int) -> None:
        for j in self.ids:
            if j != i:
                self.cut |= {(i, j), (j, i)}

    def partition(self, *groups: Iterable[int]) -> None:
        sets = [set(g) for g in groups]
        for a in sets:
            for b in sets:
                if a is not b:
                    self.cut |= {(x, y) for x in a for y in b}

    def heal(self) -> None:
        self.cut.clear()

    # -- effects

    def _push(self, t: int, kind: str, node: int, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, kind, node, self.incarnation[node], payload))

    def apply(self, i: int, effects: list[Any]) -> None:
        disk = self.disks[i]
        for e in effects:
            if isinstance(e, Send):
                if (i, e.dst) not in self.cut and not (self.loss and self.rng.random() < self.loss):
                    delay = self.rng.randint(*self.delay_ms) * MS
                    self._push(self.now + delay, "msg", e.dst, (i, e.message))
            elif isinstance(e, PersistQuorumState):
                disk.quorum = e.state
            elif isinstance(e, AppendLog):
                assert e.records[0].offset == len(disk.log), (i, e.records[0].offset, len(disk.log))
                disk.log.extend(e.records)
            elif isinstance(e, TruncateLog):
                del disk.log[e.from_offset :]
                disk.flushed = min(disk.flushed, e.from_offset)
            elif isinstance(e, Flush):
                delay = self.rng.randint(*self.flush_ms_for.get(i, self.flush_ms)) * MS
                self._push(self.now + delay, "flush", i, e.up_to_offset)
            elif isinstance(e, Committed):
                self._on_committed(i, e)
            elif isinstance(e, Event):
                self._on_event(e.data)
            elif isinstance(e, Fatal):
                self.fatal[i] = e.reason
                self.crash(i)
                return
            elif isinstance(e, Reply) or hasattr(e, "request_id"):
                self.replies[e.request_id] = (i, e)
        self._schedule_wake(i)

    def _on_committed(self, i: int, e: Committed) -> None:
        for r in e.records:
            mine = self.committed[i].setdefault(r.offset, r)
            if mine != r:
                self.violations.append(f"n{i} committed two entries at {r.offset}")
            other = self.global_committed.setdefault(r.offset, r)
            if other != r:
                self.violations.append(f"committed divergence at offset {r.offset}: {other} vs {r} on n{i}")

    def _on_event(self, data: dict) -> None:
        self.events.append(data)
        node = data["node"]
        if data["epoch"] < self.last_epoch.get(node, 0):
            self.violations.append(f"{node} epoch went from {self.last_epoch[node]} to {data['epoch']}")
        self.last_epoch[node] = data["epoch"]
        if data["type"] == "hw":
            if data["hw"] < self.last_hw.get(node, 0):
                self.violations.append(f"{node} high watermark went from {self.last_hw[node]} to {data['hw']}")
            self.last_hw[node] = data["hw"]
        if data["type"] == "state" and data["voted_for"] is not None:
            prior = self.votes.setdefault((data["node"], data["epoch"]), data["voted_for"])
            if prior != data["voted_for"]:
                self.violations.append(
                    f"{data['node']} voted for {prior} and {data['voted_for']} in epoch {data['epoch']}"
                )
        if data["type"] == "state" and data["role"] == "leader":
            prior = self.leaders.setdefault(data["epoch"], data["node"])
            if prior != data["node"]:
                self.violations.append(f"two leaders in epoch {data['epoch']}: {prior} and {data['node']}")

    def _schedule_wake(self, i: int) -> None:
        node = self.nodes[i]
        if node is None:
            return
        deadline = node.next_deadline()
        if deadline is not None and deadline != self.wake[i]:
            self.wake[i] = deadline
            self._push(max(deadline, self.now), "tick", i, deadline)

    # -- running

    def step(self) -> bool:
        if not self.queue:
            return False
        t, _, kind, i, inc, payload = heapq.heappop(self.queue)
        self.now = max(self.now, t)
        node = self.nodes[i]
        if node is None or inc != self.incarnation[i]:
            return True
        self.deliver(kind, i, node, payload)
        return True

    def deliver(self, kind: str, i: int, node: Any, payload: Any) -> None:
        """Hand one due event to node ``i`` (subclasses add their own kinds)."""
        if kind == "msg":
            src, message = payload
            if (src, i) in self.cut:
                return
            self.delivered += 1
            self.apply(i, node.handle(self.now, src, message))
        elif kind == "flush":
            self.disks[i].flushed = max(self.disks[i].flushed, min(payload, len(self.disks[i].log)))
            self.apply(i, node.flushed(self.now, payload))
        elif kind == "tick":
            if self.wake[i] != payload:
                return
            self.wake[i] = None
            self.apply(i, node.tick(self.now))

    def run_for(self, ms: int) -> None:
        end = self.now + ms * MS
        while self.queue and self.queue[0][0] <= end:
            self.step()
        self.now = max(self.now, end)

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int = 60_000) -> bool:
        end = self.now + timeout_ms * MS
        while not predicate():
            if not self.queue or self.queue[0][0] > end:
                return predicate()
            self.step()
        return True

    def call(self, i: int, method: str, *args: Any) -> list[Any]:
        node = self.nodes[i]
        effects = getattr(node, method)(self.now, *args)
        self.apply(i, effects)
        return effects

    # -- queries

    def alive(self) -> list[int]:
        return [i for i in self.ids if self.nodes[i] is not None]

    def leader(self) -> int | None:
        """The live leader with the highest epoch, if any."""
        best = None
        for i in self.alive():
            raft = raft_of(self.nodes[i])
            if raft.role is Role.LEADER and (best is None or raft.epoch > raft_of(self.nodes[best]).epoch):
                best = i
        return best

    def stable_leader(self) -> int | None:
        """A leader that every live node follows in its epoch and that has committed in it."""
        lid = self.leader()
        if lid is None:
            return None
        lraft = raft_of(self.nodes[lid])
        for i in self.alive():
            raft = raft_of(self.nodes[i])
            if raft.epoch != lraft.epoch or raft.leader_id != lid:
                return None
        leader_state = lraft._leader
        if leader_state is None or leader_state.high_watermark is None:
            return None
        return lid

    def node(self, i: int) -> RaftNode:
        return raft_of(self.nodes[i])
