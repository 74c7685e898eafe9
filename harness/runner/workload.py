"""The workload of a real run by name: the shared workloads (`workloads.registry`), and the queue's async
clients (`harness.runner.queue_workload`) until the queue is a shared workload too.

`LegacyWorkload` is the async shape those queue clients still have: `client(thread, process)` opens an
async client (`invoke(op) -> Completion`, `close()`), `setup(timeout)` runs before the main phase.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from workloads import generator as gen
from workloads import registry
from workloads.protocol import Workload


class LegacyWorkload(ABC):
    """What async clients do on a real cluster."""

    name: str
    model: str  # checker model for harness.test_command.check_run ("cas-register", "queue", …)

    @abstractmethod
    def generator(self) -> gen.Generator:
        """Client operations of the main phase (unbounded: the runner adds the time limit)."""

    @abstractmethod
    def final(self, keys: Sequence[Any], threads: int) -> gen.Generator | None:
        """Operations after healing that read every key back."""

    @abstractmethod
    def client(self, thread: int, process: int) -> Any:
        """A fresh client for one worker process."""

    async def setup(self, timeout: float) -> float:
        """Prepare the cluster for the main phase (the queue workload creates its topic); seconds taken."""
        return 0.0


def make_workload(
    name: str,
    endpoints: Mapping[str, tuple[str, int]],
    seed: int,
    *,
    options: argparse.Namespace | None = None,
    **kwargs: Any,
) -> Workload | LegacyWorkload:
    """The workload called `name` for these client endpoints ({node: (host, port)}); `options`
    (`kraftwerk test`'s arguments) carry the queue workload's --acks, --partitions, …"""
    if name == "queue":
        from harness.runner.queue_workload import QueueWorkload

        if options is None:
            return QueueWorkload(endpoints, seed, **kwargs)
        return QueueWorkload.from_options(endpoints, seed, options, **kwargs)
    return registry.make(name, list(endpoints), seed, timeout_s=kwargs.get("timeout", 2.0))
