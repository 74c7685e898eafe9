"""The real runtime's workloads by name (register, queue)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.runner.queue_workload import QueueWorkload
from harness.runner.workload import RegisterWorkload, Workload

if TYPE_CHECKING:
    from harness.spec import TestSpec


def make_workload(
    name: str,
    endpoints: Mapping[str, tuple[str, int]],
    seed: int,
    *,
    options: TestSpec | None = None,
    **kwargs: Any,
) -> Workload:
    """The workload called `name` for these client endpoints ({node: (host, port)}); `options`
    (the TestSpec) carry the queue workload's --acks, --partitions, …"""
    if name == "register":
        return RegisterWorkload(endpoints, seed, **kwargs)
    if name == "queue":
        if options is None:
            return QueueWorkload(endpoints, seed, **kwargs)
        return QueueWorkload.from_options(endpoints, seed, options, **kwargs)
    raise ValueError(f"workload {name!r} is not available on real clusters (available: register, queue)")
