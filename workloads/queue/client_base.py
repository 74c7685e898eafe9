"""What every path of the queue client shares: the workload, the process's consumer, the leader cache
that Metadata answers fill (with the leader epochs they named), the coordinator a FindCoordinator answer
names, and the one request outstanding with the completion that ends it."""

from __future__ import annotations

import random
from typing import Any

from workloads.protocol import Completion, Op, Request
from workloads.queue.bodies import MetadataReply
from workloads.queue.state import QueueState
from workloads.queue.topic import TOPIC


class ClientBase:
    """The state and helpers of one worker process's client (sans-IO) that its producing, consuming,
    group, transaction and setup paths (the mixins `QueueClient` is made of) all use."""

    def __init__(self, workload: QueueState, process: int, rng: random.Random, thread: int | None = None) -> None:
        self.workload = workload
        self.consumer = workload.consumer(process)
        self.rng = rng
        self.leaders: dict[str, str] = {}
        self.leader_epochs: dict[str, int] = {}  # the cached leader's epoch, as the metadata that named it said
        self.seen_epochs: dict[str, int] = {}  # the highest leader epoch any metadata answer named
        self.op: Op = {}
        self.stage = ""  # what the outstanding request is: metadata, send, poll, create, ready, pid, retry
        self.node: str | None = None  # where the outstanding request went
        self.gassigned: dict[str, Any] | None = None  # the assignment a subscribed poll began (its `assigned` field)
        self._last: Request | None = None  # the request outstanding

    def _request(
        self, stage: str, node: str, body: Any, timeout_s: float | None = None, backoff_s: float = 0.0
    ) -> Request:
        self.stage, self.node = stage, node
        self._last = Request(node, body, self.workload.timeout_s if timeout_s is None else timeout_s, backoff_s)
        return self._last

    def _done(self, typ: str, value: Any, error: str | None = None) -> Completion:
        self.stage = ""
        if self.gassigned is not None:
            assigned, self.gassigned = self.gassigned, None
            return Completion(typ, value, error, self.node, {"assigned": assigned})
        return Completion(typ, value, error, self.node)

    def _random_node(self) -> str:
        nodes = self.workload.nodes
        return nodes[self.rng.randrange(len(nodes))]

    def _learn(self, reply: MetadataReply) -> None:
        for p in reply.partitions or ():
            k = f"{TOPIC}-{p.partition}"
            if p.leader_epoch > self.seen_epochs.get(k, -1):
                self.seen_epochs[k] = p.leader_epoch
            if p.error == 0 and p.leader is not None and p.leader in self.workload.nodes:
                self.leaders[k] = p.leader
                self.leader_epochs[k] = p.leader_epoch
            else:
                self.leaders.pop(k, None)

    def _found(self, body: Any, error: int) -> str | None:
        """The coordinator a FindCoordinator answer names, if it is one of the test's nodes."""
        node = body.node if body is not None and error == 0 else None
        return node if node in self.workload.nodes else None
