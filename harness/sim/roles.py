"""The simulator's controller-only node: a `BrokerNode` whose broker never registers.

The nodes have no controller-only core with the metadata controller (`process.roles=controller` on a real node
runs `KVNode`, the register service without the metadata controller). So the simulator runs a dedicated
controller (`--controllers N --controller-roles dedicated`, harness.core.shape) as what the nodes have: a
`BrokerNode`, the combined core, with its broker lifecycle (`nodes.broker.lifecycle.BrokerLifecycle`: the
registration and heartbeats) left out. It votes and, as the active controller, runs the metadata controller;
its broker never registers, so the controller never places a partition on it and it leads none, and the
workload's clients are never sent to it.
"""

from __future__ import annotations

from typing import Any

from nodes.broker import BrokerNode
from nodes.broker.topic_partition import TopicPartition


class _NoBroker:
    """The lifecycle of a broker that does not run: it never registers nor heartbeats."""

    epoch: int | None = None
    fenced = True
    damaged: tuple[TopicPartition, ...] = ()

    def poll(self, now: int) -> None:
        return None

    def next_deadline(self) -> int | None:
        return None

    def on_registration_response(self, response: Any) -> None:
        return None

    def on_heartbeat_response(self, response: Any) -> None:
        return None


class ControllerOnlyNode(BrokerNode):
    """A quorum voter running the metadata controller and no broker (BrokerNode's arguments)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lifecycle = _NoBroker()  # type: ignore[assignment]
