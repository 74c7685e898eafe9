"""The queue client: one worker process's sans-IO client (an operation in, requests out; answers in, a
completion out), made of one mixin per concern: producing, consuming, the consumer group, transactions
and the setup.

The client finds a partition's leader with a Metadata request to a random node and keeps it until an
answer says leadership moved; it sends single-record batches with the run's acks and fetches from its
process's position. A replayed op's `node` is not used: the client asks who leads the partition, as it
did when the op was recorded.
"""

from __future__ import annotations

from workloads.protocol import Failure, Op, Reply, Step
from workloads.queue.bodies import InitProducerId, Metadata
from workloads.queue.groups import GroupClient
from workloads.queue.producer import ProducingClient
from workloads.queue.setup import SetupClient
from workloads.queue.topic import TOPIC
from workloads.queue.transactions import TxnClient


class QueueClient(ProducingClient, GroupClient, TxnClient, SetupClient):
    """One worker process's client (sans-IO): a leader cache; exactly one request outstanding."""

    # ------------------------------------------------------------------ operations in
    def invoke(self, op: Op) -> Step:
        self.op, self.node, self.gassigned = op, None, None
        f, key, value = op["f"], op.get("key"), op.get("value")
        if f == "assign":
            self.consumer.assign(value)
            return self._done("ok", list(value))
        if f == "subscribe":
            return self._subscribe(value)
        if f == "crash":
            return self._done("info", None, "crash")
        if f == "commit":
            return self._commit()
        if f == "txn":
            return self._txn_start(value)
        if f == "txn-init":
            return self._txn_init()
        if f == "poll" and key is None:
            return self._group_poll()
        if f == "create-topic":
            return self._create_topic()
        if f == "topic-ready":
            return self._topic_ready()
        if f not in ("send", "poll"):
            return self._done("fail", value, f"unknown operation {f!r}")
        if f == "poll" and key not in self.consumer.assigned:
            return self._done("fail", None, "not-assigned")
        if f == "send":
            self.batch, self.pending, self.resend = None, None, False
            if self.workload.idempotent and self.prod.id is None:
                return self._request("pid", self._random_node(), InitProducerId())
        leader = self.leaders.get(key) if f == "send" else self._fetch_leader(key)
        if leader is None:
            return self._request("metadata", self._random_node(), Metadata(TOPIC))
        return self._operate(leader)

    def _operate(self, node: str) -> Step:
        return self._send(node) if self.op["f"] == "send" else self._poll(node)

    # ------------------------------------------------------------------ answers in
    def receive(self, answer: Reply | Failure) -> Step:
        stage, op = self.stage, self.op
        if stage in ("create", "ready"):
            return self._setup_answer(answer)
        if stage == "pid":
            return self._producer_id(answer)
        if stage == "retry":
            return self._retried(answer)
        if stage.startswith("g-"):
            return self._group_answer(answer)
        if stage.startswith("t-"):
            return self._txn_answer(answer)
        key, value = op["key"], op.get("value")
        failed_value = value if op["f"] == "send" else None
        if isinstance(answer, Failure):
            self.leaders.pop(key, None)
            if stage == "send" and answer.sent:  # the record may have reached the leader and commit later
                self._unanswered(key)
                return self._done("info", value, answer.reason)
            self._give_back(key)
            return self._done("fail", failed_value, answer.reason)  # nothing appended, or only a poll
        body = answer.body
        if stage == "metadata":
            self._learn(body)
            leader = self.leaders.get(key) if op["f"] == "send" else self._fetch_leader(key)
            if leader is None:  # nobody leads it yet (or only a stale leader is named): nothing was sent
                self._give_back(key)
                return self._done("fail", failed_value, self._no_leader(key))
            return self._operate(leader)
        if stage == "send":
            return self._sent(key, value, body)
        return self._polled(key, body)
