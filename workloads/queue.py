"""The queue workload: clients send unique values to a Kafka-style log and poll them back.

As Jepsen's Kafka workload (JEPSEN.md §3): one partition is one key (`t0-2`),
`send` appends a unique value, `poll` reads from the client's position,
`assign` replaces the client's partitions and resets its positions to the
beginning. Produce errors that prove nothing was appended are `fail`; the ones
after which the records may still commit (a timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
a leader change while waiting) are `info`. Checked by `checkers.queue`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

TOPIC = "t0"
ACKS = {"all": -1, "1": 1, "0": 0, "-1": -1}

# Kafka error codes (nodes/broker/errors.py) after which nothing was appended for sure
DEFINITE_PRODUCE_ERRORS = frozenset({2, 3, 5, 17, 19, 21, 42, 74, 75})
# ... and the ones after which the records may already be in a log and commit later
INDETERMINATE_PRODUCE_ERRORS = frozenset({6, 7, 8, 20})


def keys(partitions: int, topic: str = TOPIC) -> list[str]:
    return [f"{topic}-{i}" for i in range(partitions)]


def produce_outcome(error: int) -> str:
    """ok, fail or info for a produce answered with Kafka error code `error`."""
    if error == 0:
        return "ok"
    if error in DEFINITE_PRODUCE_ERRORS:
        return "fail"
    return "info"


@dataclass
class QueueOp:
    f: str  # send, poll or assign
    key: str | None
    value: Any


class QueueGenerator:
    """Draws operations: mostly sends and polls on the client's assigned keys, sometimes a new assignment."""

    def __init__(self, rng: random.Random, partitions: int, assign_p: float = 0.05) -> None:
        if partitions < 1:
            raise ValueError("partitions must be positive")
        self.rng = rng
        self.keys = keys(partitions)
        self.assign_p = assign_p
        self._next_value = 0

    def assignment(self) -> list[str]:
        rng = self.rng
        chosen = [k for k in self.keys if rng.random() < 0.5]
        return chosen or [self.keys[rng.randrange(len(self.keys))]]

    def next(self, assigned: list[str]) -> QueueOp:
        rng = self.rng
        if not assigned or rng.random() < self.assign_p:
            return QueueOp("assign", None, self.assignment())
        if rng.random() < 0.5:
            self._next_value += 1
            return QueueOp("send", self.keys[rng.randrange(len(self.keys))], self._next_value)
        return QueueOp("poll", assigned[rng.randrange(len(assigned))], None)
