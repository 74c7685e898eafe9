"""The workload of a real run: the shared workload `kraftwerk test`'s options name (`workloads.registry`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from workloads import registry
from workloads.protocol import Workload

if TYPE_CHECKING:
    from harness.core.spec import TestSpec


def make_workload(
    name: str, nodes: Sequence[str], seed: int, timeout_s: float, options: TestSpec | None = None
) -> Workload:
    """The workload called `name` for a cluster of `nodes` ("n1", …); `options` (the test's TestSpec)
    carry its settings (the queue's --acks, --partitions, …)."""
    given = options.workload_options() if options is not None else {}
    return registry.make(name, list(nodes), seed, timeout_s=timeout_s, **given)
