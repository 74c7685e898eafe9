"""The workloads by name: `make(name, nodes, seed, **options)` gives a `Workload` every runtime can drive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from workloads.protocol import Workload
from workloads.register import Register

WORKLOADS: dict[str, Callable[..., Workload]] = {"register": Register}


def make(name: str, nodes: Sequence[str], seed: int, **options: Any) -> Workload:
    """The workload `name` for a cluster of `nodes` (names such as "n1"); options as its class takes them."""
    try:
        factory = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r} (one of {', '.join(sorted(WORKLOADS))})") from None
    return factory(nodes, seed, **options)
