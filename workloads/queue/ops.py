"""The queue's main-phase operations: what a process does next (send, poll, assign; with
``--sub-via subscribe`` subscribe, commit and crash; with ``--txn`` transactions of micro-ops)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workloads.protocol import Op
from workloads.queue.topic import keys

# --sub-via subscribe
SUBSCRIBE_P = 0.02  # a subscribed process subscribes again (leaves the group and rejoins: a rebalance)
CRASH_P = 0.01  # a subscribed process crashes (Jepsen's :crash): its member lingers until its session expires
COMMIT_P = 0.1  # of the non-send ops of a subscribed process, commits (the rest are polls)
SLOW_P = 0.2  # a subscribed process processes what it polled slowly before committing it ...
SLOW_S = (0.5, 3.0)  # ... for this long (past the rebalance timeout: the group may move on without it)
# --txn
MAX_MOPS = 4  # micro-ops per transaction


@dataclass
class QueueOp:
    f: str  # send, poll, assign, subscribe, commit or crash
    key: str | None
    value: Any
    delay_s: float = 0.0  # not before this long from now (a slow consumer's processing)

    def as_op(self) -> Op:
        listed = self.f in ("assign", "subscribe")
        value = [list(m) for m in self.value] if self.f == "txn" else self.value
        return {"f": self.f, "key": self.key, "value": list(self.value) if listed else value}


class QueueGenerator:
    """Draws operations: mostly sends and polls on the process's assigned keys, sometimes a new assignment."""

    def __init__(
        self, rng: random.Random, partitions: int, assign_p: float = 0.05, sub_via: str = "assign", txn: bool = False
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be positive")
        self.rng = rng
        self.keys = keys(partitions)
        self.assign_p = assign_p
        self.sub_via = sub_via
        self.txn = txn
        self._next_value = 0

    def assignment(self) -> list[str]:
        rng = self.rng
        chosen = [k for k in self.keys if rng.random() < 0.5]
        return chosen or [self.keys[rng.randrange(len(self.keys))]]

    def next(self, assigned: Sequence[str], subscribed: bool = False, commit_due: bool = False) -> QueueOp:
        """The next operation for a process assigned `assigned` (or, with --sub-via subscribe, that has
        `subscribed`; one whose last poll read something commits next, as commitSync after a poll)."""
        rng = self.rng
        if self.sub_via == "subscribe":
            if subscribed and commit_due:
                slow = rng.random() < SLOW_P
                return QueueOp("commit", None, None, rng.uniform(*SLOW_S) if slow else 0.0)
            return self._next_subscribed(subscribed)
        if not assigned or rng.random() < self.assign_p:
            return QueueOp("assign", None, self.assignment())
        if self.txn:
            return QueueOp("txn", None, self.transaction())
        if rng.random() < 0.5:
            self._next_value += 1
            return QueueOp("send", self.keys[rng.randrange(len(self.keys))], self._next_value)
        return QueueOp("poll", assigned[rng.randrange(len(assigned))], None)

    def transaction(self) -> list[list[Any]]:
        """1 to MAX_MOPS micro-ops, each a send of a fresh value to any key or a poll (Jepsen's txn)."""
        rng = self.rng
        mops: list[list[Any]] = []
        for _ in range(rng.randint(1, MAX_MOPS)):
            if rng.random() < 0.5:
                self._next_value += 1
                mops.append(["send", self.keys[rng.randrange(len(self.keys))], self._next_value])
            else:
                mops.append(["poll"])
        return mops

    def _next_subscribed(self, subscribed: bool) -> QueueOp:
        rng = self.rng
        r = rng.random()
        if not subscribed or r < SUBSCRIBE_P:
            return QueueOp("subscribe", None, list(self.keys))
        if r < SUBSCRIBE_P + CRASH_P:
            return QueueOp("crash", None, None)
        if rng.random() < 0.5:
            self._next_value += 1
            return QueueOp("send", self.keys[rng.randrange(len(self.keys))], self._next_value)
        return QueueOp("commit" if rng.random() < COMMIT_P else "poll", None, None)
