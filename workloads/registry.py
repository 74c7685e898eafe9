"""The workloads by name: `make(name, nodes, seed, **options)` gives a `Workload` every runtime can drive."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from workloads.protocol import Workload
from workloads.queue import QueueWorkload
from workloads.register import Register

WORKLOADS: dict[str, Callable[..., Workload]] = {"register": Register, "queue": QueueWorkload}
# every workload's options (its class's keyword parameters, as a test's options name them: min_isr, …)
OPTIONS = tuple(
    sorted(
        {
            name
            for factory in WORKLOADS.values()
            for name, p in inspect.signature(factory).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "timeout_s"
        }
    )
)


def make(name: str, nodes: Sequence[str], seed: int, **options: Any) -> Workload:
    """The workload `name` for a cluster of `nodes` (names such as "n1").

    `options` may hold every workload's options (a test's keys, acks, partitions, …): each workload
    takes the ones its class names and leaves the others.
    """
    try:
        factory = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r} (one of {', '.join(sorted(WORKLOADS))})") from None
    taken = inspect.signature(factory).parameters
    return factory(nodes, seed, **{k: v for k, v in options.items() if k in taken})
