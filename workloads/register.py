"""The register workload: keyed read/write/cas operations, checked for linearizability.

As Jepsen's linearizable-register test: values are small integers so that
compare-and-set often succeeds, and each key is retired after a bounded number
of operations so every key's history stays cheap to check. The generator is
seeded and backend-independent: the simulator and the real runners draw the
same operations for the same seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

MODEL = "cas-register"


@dataclass
class RegisterOp:
    f: str
    key: str
    value: Any


class RegisterGenerator:
    """Draws the next operation. `keys` keys are live at once; each lives for `ops_per_key` ops."""

    def __init__(self, rng: random.Random, keys: int = 4, ops_per_key: int = 120, values: int = 5) -> None:
        if keys < 1 or ops_per_key < 1 or values < 1:
            raise ValueError("keys, ops_per_key and values must be positive")
        self.rng = rng
        self.values = values
        self.ops_per_key = ops_per_key
        self._next_key = 0
        self.live: list[list[Any]] = []  # [name, ops issued]
        self.all_keys: list[str] = []
        for _ in range(keys):
            self._new_key()

    def _new_key(self) -> None:
        name = f"r{self._next_key}"
        self._next_key += 1
        self.live.append([name, 0])
        self.all_keys.append(name)

    def next(self) -> RegisterOp:
        rng = self.rng
        slot = rng.randrange(len(self.live))
        entry = self.live[slot]
        key = entry[0]
        entry[1] += 1
        if entry[1] >= self.ops_per_key:
            del self.live[slot]
            self._new_key()
        f = rng.choice(("read", "write", "cas"))
        if f == "read":
            return RegisterOp("read", key, None)
        if f == "write":
            return RegisterOp("write", key, rng.randrange(self.values))
        return RegisterOp("cas", key, [rng.randrange(self.values), rng.randrange(self.values)])

    @staticmethod
    def final_read(key: str) -> RegisterOp:
        return RegisterOp("read", key, None)
