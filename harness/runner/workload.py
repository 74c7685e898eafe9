"""The workload of a real run: the shared workload `kraftwerk test`'s options name (`workloads.registry`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from workloads import registry
from workloads.protocol import Workload


def make_workload(
    name: str, nodes: Sequence[str], seed: int, timeout_s: float, options: argparse.Namespace | None = None
) -> Workload:
    """The workload called `name` for a cluster of `nodes` ("n1", …); `options` (`kraftwerk test`'s arguments)
    carry its settings (the queue's --acks, --partitions, …)."""
    given = {k: getattr(options, k) for k in registry.OPTIONS if options is not None and hasattr(options, k)}
    return registry.make(name, list(nodes), seed, timeout_s=timeout_s, **given)
