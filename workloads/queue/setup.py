"""The queue's setup, before the main phase and outside the history: create the topic, then wait until
every node's metadata shows every partition led with enough in-sync replicas (with ``--txn``, each
thread's ``txn-init`` follows: `workloads.queue.transactions.TxnInit`)."""

from __future__ import annotations

from workloads import generator as gen
from workloads.protocol import Completion, Failure, Op, Reply, Request
from workloads.queue.bodies import Metadata
from workloads.queue.client_base import ClientBase
from workloads.queue.state import QueueState
from workloads.queue.topic import TOPIC

TOPIC_ALREADY_EXISTS = 36
SETUP_RETRY_S = 0.3  # the setup's pause after a create or a readiness check that did not succeed


class SetupClient(ClientBase):
    """The client's setup ops: ``create-topic`` and ``topic-ready``, each a request to the op's node."""

    def _create_topic(self) -> Request:
        return self._request("create", self.op.get("node") or self._random_node(), self.workload.create_topic())

    def _topic_ready(self) -> Request:
        return self._request("ready", self.op.get("node") or self._random_node(), Metadata(TOPIC))

    def _setup_answer(self, answer: Reply | Failure) -> Completion:
        if isinstance(answer, Failure):
            return self._done("fail", None, answer.reason)
        body = answer.body
        if self.stage == "create":
            if body.error in (0, TOPIC_ALREADY_EXISTS):
                return self._done("ok", None)
            return self._done("fail", None, f"create-topics: {body.error_name} {body.message or ''}".strip())
        parts = body.partitions
        if parts is None:
            return self._done("fail", None, f"metadata does not list {TOPIC} yet")
        w = self.workload
        need = min(w.replication_factor, max(w.min_isr, 1))
        led = {f"{TOPIC}-{p.partition}": p.leader for p in parts if p.error == 0 and p.leader and p.isr >= need}
        if len(parts) == w.partitions and len(led) == w.partitions:
            return self._done("ok", led)
        return self._done("fail", None, f"partitions not led yet: {[(p.partition, p.leader) for p in parts]}")


class TopicSetup(gen.Generator):
    """Create the topic through the nodes in turn until one accepts it, then ask every node until its
    metadata shows every partition led with enough in-sync replicas (one thread, one op at a time)."""

    def __init__(self, workload: QueueState) -> None:
        self.workload = workload
        self.created = False
        self.ready: list[str] = list(workload.nodes)  # nodes still to confirm
        self.attempt = 0
        self.busy = False
        self.not_before = 0

    def op(self, ctx: gen.Context) -> gen.Result:
        if self.created and not self.ready:
            return None
        if self.busy or not ctx.free:
            return gen.PENDING, self
        nodes = self.workload.nodes
        if self.created:
            op = {"f": "topic-ready", "key": None, "value": None, "node": self.ready[0]}
        else:
            op = {"f": "create-topic", "key": None, "value": None, "node": nodes[self.attempt % len(nodes)]}
            self.attempt += 1
        out = gen.fill({**op, "time": max(ctx.time, self.not_before)}, ctx)
        if out is not gen.PENDING:
            self.busy = True
        return out, self

    def update(self, ctx: gen.Context, event: Op) -> gen.Generator | None:
        if event.get("type") not in ("ok", "fail", "info"):
            return self
        self.busy = False
        if event["type"] != "ok":
            self.workload.setup_error = f"{event.get('node')}: {event.get('error')}"
            self.not_before = event["time"] + int(SETUP_RETRY_S * gen.SECOND)
        elif event["f"] == "create-topic":
            self.created = True
        elif event["f"] == "topic-ready":
            self.workload.partition_leaders = dict(event["value"])
            self.ready.pop(0)
        return self
