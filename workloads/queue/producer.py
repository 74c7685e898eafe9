"""The queue's producer: the client's sends (``send``), through a worker thread's idempotent producer
(its state: `workloads.queue.state.Producer`).

Produce carries no leader epoch in Kafka, so sends go where the metadata says. Outcomes: produce errors
that prove nothing was appended are `fail`; the ones after which the records may still commit (a
timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a leader change while waiting, a lost connection after the
request was written, any acks=0 send) are `info`.

With acks=all the producer is idempotent, as Kafka clients are by default (KIP-679; they turn
idempotence off for acks 0 and 1): a process gets a producer id (`InitProducerId`) before its
first send and numbers its batches per partition. A batch whose answer was lost stays in flight
(at most 5, as `max.in.flight.requests.per.connection`) and is retried by the thread's next
send to that partition (the producer is the worker thread's: it outlives a process replaced
after an `info`), *after* the new batch, as a pipelining producer resends the batches a
lost connection left unanswered: the broker must answer a retry of an appended batch with its
original offset, not append it again. An OUT_OF_ORDER_SEQUENCE_NUMBER answer to the new batch
(an older one never arrived) makes the process retry the older ones first, then the new one; an
epoch or sequence it cannot repair makes it start over with a new producer id. A batch that
certainly was not appended gives its sequence back. A retried batch belongs to an earlier
operation that ended `info`; the operation that carries the retries is judged by its own batch.
"""

from __future__ import annotations

import random
from typing import Any

from workloads.protocol import Completion, Failure, Reply, Request, Step
from workloads.queue.bodies import PRODUCE_TIMEOUT_MS, Metadata, Produce, Produced, ProducerId
from workloads.queue.client_base import ClientBase
from workloads.queue.errors import REFRESH, produce_outcome
from workloads.queue.state import QueueState
from workloads.queue.topic import TOPIC, encode_value, partition_of

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
PRODUCER_RESET = frozenset({47, 59, 90})  # INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, PRODUCER_FENCED
MAX_IN_FLIGHT = 5  # unanswered batches a producer keeps per partition (Kafka's dedup window)


class ProducingClient(ClientBase):
    """The client's sends: plain ones (acks 0 and 1, or idempotence off), and an idempotent producer's
    numbered batches with the retries of the ones whose answers were lost."""

    def __init__(self, workload: QueueState, process: int, rng: random.Random, thread: int | None = None) -> None:
        super().__init__(workload, process, rng, thread)
        self.prod = workload.producer(thread if thread is not None else ("process", process))
        self.batch: tuple[int, Any] | None = None  # this send's (sequence, value)
        self.retrying: tuple[int, Any] | None = None
        self.pending: Completion | None = None  # this send's outcome, while older batches are retried
        self.resend = False  # this send was refused out of order: resend it after the retries

    def _send(self, node: str) -> Request:
        key = self.op["key"]
        acks = self.workload.acks
        if self.prod.id is None:
            return self._request("send", node, Produce(TOPIC, partition_of(key), encode_value(self.op["value"]), acks))
        if self.batch is None:
            seq = self.prod.sequences.get(key, 0)
            self.prod.sequences[key] = seq + 1
            self.batch = (seq, self.op["value"])
        return self._request("send", node, self._produce(key, self.batch))

    def _produce(self, key: str, batch: tuple[int, Any]) -> Produce:
        pid, epoch = self.prod.id  # type: ignore[misc]
        value = encode_value(batch[1])
        return Produce(TOPIC, partition_of(key), value, self.workload.acks, PRODUCE_TIMEOUT_MS, pid, epoch, batch[0])

    def _sent(self, key: str, value: Any, produced: Produced | None) -> Step:
        if self.workload.acks == 0 or produced is None:
            return self._done("info", value, "acks=0: no answer")
        outcome = produce_outcome(produced.error)
        if produced.error in REFRESH:
            self.leaders.pop(key, None)
        if self.batch is not None:
            return self._idempotent_sent(key, value, produced, outcome)
        if outcome == "ok":
            self.workload.note_ack(key, produced.base_offset)
            return self._done("ok", [produced.base_offset, value])
        return self._done(outcome, value, produced.error_name)

    # ------------------------------------------------------------------ the idempotent producer

    def _producer_id(self, answer: Reply | Failure) -> Step:
        value = self.op.get("value")
        if isinstance(answer, Failure):
            return self._done("fail", value, f"init-producer-id: {answer.reason}")
        body: ProducerId = answer.body
        if body.error != 0 or body.producer_id < 0:
            return self._done("fail", value, f"init-producer-id: {body.error_name}")
        self.prod.start(body.producer_id, max(0, body.producer_epoch))
        leader = self.leaders.get(self.op["key"])
        if leader is None:
            return self._request("metadata", self._random_node(), Metadata(TOPIC))
        return self._send(leader)

    def _reset_producer(self) -> None:
        """Start over with a new producer id (the unanswered batches stay `info`)."""
        self.prod.start(None)

    def _give_back(self, key: str) -> None:
        """This send's batch certainly was not appended: its sequence is free again (it is the newest)."""
        if self.batch is not None and self.prod.id is not None and self.prod.sequences.get(key) == self.batch[0] + 1:
            self.prod.sequences[key] = self.batch[0]
        self.batch = None

    def _unanswered(self, key: str) -> None:
        """This send's batch may be in the log: keep it in flight for a later retry."""
        if self.batch is None or self.prod.id is None:
            return
        waiting = self.prod.in_flight.setdefault(key, [])
        waiting.append(self.batch)
        self.batch = None
        if len(waiting) > MAX_IN_FLIGHT:
            self._reset_producer()

    def _idempotent_sent(self, key: str, value: Any, produced: Produced, outcome: str) -> Step:
        waiting = self.prod.in_flight.get(key, [])
        if produced.error == OUT_OF_ORDER_SEQUENCE_NUMBER and waiting and not self.resend:
            self.resend = True  # an older batch never arrived: retry those, then this one
            self.pending = None
            return self._retry_next(key)
        if produced.error == OUT_OF_ORDER_SEQUENCE_NUMBER or produced.error in PRODUCER_RESET:
            self._reset_producer()
            self.batch = None
            return self._done("fail", value, produced.error_name)
        if outcome == "ok":
            self.workload.note_ack(key, produced.base_offset)
            self.batch = None
            self.pending = Completion("ok", [produced.base_offset, value], None, self.node)
            return self._retry_next(key) if waiting and not self.resend else self._finish()
        if outcome == "fail":
            self._give_back(key)
        else:
            self._unanswered(key)
        return self._done(outcome, value, produced.error_name)

    def _retry_next(self, key: str) -> Step:
        """Retry the oldest unanswered batch of `key` at its leader, or finish the operation."""
        waiting = self.prod.in_flight.get(key, [])
        leader = self.leaders.get(key)
        if not waiting or leader is None:
            return self._after_retries(key)
        self.retrying = waiting[0]
        self.stage, self.node = "retry", leader
        return Request(leader, self._produce(key, waiting[0]), self.workload.timeout_s)

    def _retried(self, answer: Reply | Failure) -> Step:
        key = self.op["key"]
        waiting = self.prod.in_flight.get(key, [])
        body = answer.body if isinstance(answer, Reply) else None
        if body is not None and body.error == 0:
            if waiting and waiting[0] == self.retrying:
                waiting.pop(0)  # in the log exactly once (appended now, or recognised as a duplicate)
            return self._retry_next(key)
        if isinstance(answer, Failure) or body.error in REFRESH:
            self.leaders.pop(key, None)
        elif body.error == OUT_OF_ORDER_SEQUENCE_NUMBER or body.error in PRODUCER_RESET:
            self._reset_producer()  # a retry the leader cannot place: give up on those batches
        return self._after_retries(key)

    def _after_retries(self, key: str) -> Step:
        if self.resend:
            if self.prod.id is not None and not self.prod.in_flight.get(key) and key in self.leaders:
                return self._request("send", self.leaders[key], self._produce(key, self.batch))  # type: ignore[arg-type]
            self._give_back(key)
            return self._done("fail", self.op.get("value"), "out_of_order_sequence_number")
        return self._finish()

    def _finish(self) -> Completion:
        done = self.pending
        assert done is not None
        self.pending, self.stage = None, ""
        return done
