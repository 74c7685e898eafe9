"""The queue workload: clients send unique values to a Kafka-style log and poll them back.

As Jepsen's Kafka workload (JEPSEN.md §3): one partition is one key (`t0-2`), `send` appends a
unique value, `poll` reads from the process's position, `assign` replaces the process's
partitions and resets its positions to the beginning. Written once for every runtime: the
generator, the sans-IO client (`QueueClient`: an operation in, requests out; answers in, a
completion out), the setup that creates the topic and the final drain. Its history is judged by
model `queue` (`checkers.queue`).

The client finds a partition's leader with a Metadata request to a random node and keeps it
until an answer says leadership moved; it sends single-record batches with the run's acks and
fetches from its process's position. Outcomes: produce errors that prove nothing was appended are
`fail`; the ones after which the records may still commit (a timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
a leader change while waiting, a lost connection after the request was written, any acks=0
send) are `info`. A poll changes nothing, so a poll that failed or timed out is `fail`, and the
position only moves on an `ok` poll, whose value is ``[[offset, value], …]``. A poll of a partition
the process is not assigned (a replayed plan whose assign was shrunk away or went to a process
that crashed since) fails at once with `not-assigned`, as a consumer cannot fetch what it does not
own. A replayed op's `node` is not used: the client asks who leads the partition, as it did when
the op was recorded.

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

The request and reply bodies below are the workload's own; a transport translates them to the
system under test (the simulator's broker messages, or the Kafka wire protocol).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workloads import generator as gen
from workloads.protocol import Completion, Failure, Op, Reply, Request, Step

NAME = "queue"
MODEL = "queue"
TOPIC = "t0"
ACKS = {"all": -1, "1": 1, "0": 0, "-1": -1}

# Kafka error codes (nodes/broker/errors.py) after which nothing was appended for sure
DEFINITE_PRODUCE_ERRORS = frozenset({2, 3, 5, 17, 19, 21, 42, 74, 75})
# ... and the ones after which the records may already be in a log and commit later
INDETERMINATE_PRODUCE_ERRORS = frozenset({6, 7, 8, 20})
REFRESH = frozenset({3, 5, 6, 74, 75})  # answers that mean "ask someone else who leads this partition"
OFFSET_OUT_OF_RANGE = 1
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
PRODUCER_RESET = frozenset({47, 59, 90})  # INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, PRODUCER_FENCED
MAX_IN_FLIGHT = 5  # unanswered batches a producer keeps per partition (Kafka's dedup window)
TOPIC_ALREADY_EXISTS = 36
PRODUCE_TIMEOUT_MS = 1500  # the broker's wait for acks=all
FETCH_MAX_WAIT_MS = 100
CREATE_TIMEOUT_MS = 5000
SETUP_RETRY_S = 0.3  # the setup's pause after a create or a readiness check that did not succeed
END_QUIET_S = 4.0  # the final drain gives up on a partition whose end has not moved for this long
END_POLL_S = 0.05  # ... and polls a partition at its end this much apart


def keys(partitions: int, topic: str = TOPIC) -> list[str]:
    return [f"{topic}-{i}" for i in range(partitions)]


def partition_of(key: str) -> int:
    return int(key.rsplit("-", 1)[1])


def produce_outcome(error: int) -> str:
    """ok, fail or info for a produce answered with Kafka error code `error`."""
    if error == 0:
        return "ok"
    if error in DEFINITE_PRODUCE_ERRORS:
        return "fail"
    return "info"


def encode_value(value: int) -> bytes:
    return str(value).encode()


def decode_value(data: bytes | None) -> Any:
    """A polled record's value: the integer sent, or its text when it is not one."""
    if data is None:
        return None
    try:
        return int(data)
    except ValueError:
        return bytes(data).decode("utf-8", "replace")


# ---------------------------------------------------------------------------- bodies


@dataclass(frozen=True)
class Metadata:
    topic: str


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: str | None  # the leader's node name; None when nobody leads it (or it is not a known node)
    isr: int  # how many replicas are in sync
    error: int = 0


@dataclass(frozen=True)
class MetadataReply:
    """The topic's partitions as the node knows them (None: the node does not know the topic)."""

    partitions: tuple[PartitionInfo, ...] | None


@dataclass(frozen=True)
class Produce:
    """One record appended to `topic`-`partition`; with acks 0 the node sends no answer. An
    idempotent producer's batch carries its producer id, epoch and sequence (-1: none)."""

    topic: str
    partition: int
    value: bytes
    acks: int
    timeout_ms: int = PRODUCE_TIMEOUT_MS
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1


@dataclass(frozen=True)
class InitProducerId:
    """Ask a node for an idempotent producer's id."""


@dataclass(frozen=True)
class ProducerId:
    error: int
    error_name: str
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class Produced:
    error: int
    error_name: str
    base_offset: int = -1


@dataclass(frozen=True)
class Fetch:
    topic: str
    partition: int
    offset: int
    max_wait_ms: int = FETCH_MAX_WAIT_MS


@dataclass(frozen=True)
class Fetched:
    """The records at or after the fetch offset, as (offset, value bytes), and the partition's end."""

    error: int
    error_name: str
    high_watermark: int = -1
    records: tuple[tuple[int, bytes | None], ...] = ()


@dataclass(frozen=True)
class CreateTopic:
    topic: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()
    timeout_ms: int = CREATE_TIMEOUT_MS


@dataclass(frozen=True)
class TopicCreated:
    error: int
    error_name: str
    message: str | None = None


REQUESTS = (Metadata, Produce, Fetch, CreateTopic, InitProducerId)  # the request bodies a transport must carry


# ---------------------------------------------------------------------------- state


@dataclass
class Consumer:
    """One process's consumer state: its assigned partitions and positions (fresh for a new process)."""

    assigned: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    polled: set[str] = field(default_factory=set)  # keys polled ok since the last assign
    at_end: set[str] = field(default_factory=set)  # keys whose last ok poll found nothing past the end

    def assign(self, keys: Sequence[str]) -> None:
        self.assigned = list(keys)
        self.positions = dict.fromkeys(self.assigned, 0)
        self.polled = set()
        self.at_end = set()


@dataclass
class Producer:
    """A worker thread's idempotent producer: its (id, epoch), next sequence and unanswered
    batches ``(sequence, value)`` per key. It belongs to the thread, not the process: a process
    whose send ended `info` is replaced, but the application's producer lives on and retries."""

    id: tuple[int, int] | None = None
    sequences: dict[str, int] = field(default_factory=dict)
    in_flight: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)

    def start(self, producer_id: int | None, epoch: int = 0) -> None:
        self.id = None if producer_id is None else (producer_id, epoch)
        self.sequences, self.in_flight = {}, {}


class QueueClient:
    """One worker process's client (sans-IO): a leader cache; exactly one request outstanding."""

    def __init__(self, workload: QueueWorkload, process: int, rng: random.Random, thread: int | None = None) -> None:
        self.workload = workload
        self.consumer = workload.consumer(process)
        self.rng = rng
        self.leaders: dict[str, str] = {}
        self.op: Op = {}
        self.stage = ""  # what the outstanding request is: metadata, send, poll, create, ready, pid, retry
        self.node: str | None = None  # where the outstanding request went
        self.prod = workload.producer(thread if thread is not None else ("process", process))
        self.batch: tuple[int, Any] | None = None  # this send's (sequence, value)
        self.retrying: tuple[int, Any] | None = None
        self.pending: Completion | None = None  # this send's outcome, while older batches are retried
        self.resend = False  # this send was refused out of order: resend it after the retries

    def _request(self, stage: str, node: str, body: Any) -> Request:
        self.stage, self.node = stage, node
        return Request(node, body, self.workload.timeout_s)

    def _done(self, typ: str, value: Any, error: str | None = None) -> Completion:
        self.stage = ""
        return Completion(typ, value, error, self.node)

    def _random_node(self) -> str:
        nodes = self.workload.nodes
        return nodes[self.rng.randrange(len(nodes))]

    # ------------------------------------------------------------------ operations in
    def invoke(self, op: Op) -> Step:
        self.op, self.node = op, None
        f, key, value = op["f"], op.get("key"), op.get("value")
        if f == "assign":
            self.consumer.assign(value)
            return self._done("ok", list(value))
        if f == "create-topic":
            return self._request("create", op.get("node") or self._random_node(), self.workload.create_topic())
        if f == "topic-ready":
            return self._request("ready", op.get("node") or self._random_node(), Metadata(TOPIC))
        if f not in ("send", "poll"):
            return self._done("fail", value, f"unknown operation {f!r}")
        if f == "poll" and key not in self.consumer.assigned:
            return self._done("fail", None, "not-assigned")
        if f == "send":
            self.batch, self.pending, self.resend = None, None, False
            if self.workload.idempotent and self.prod.id is None:
                return self._request("pid", self._random_node(), InitProducerId())
        leader = self.leaders.get(key)
        if leader is None:
            return self._request("metadata", self._random_node(), Metadata(TOPIC))
        return self._operate(leader)

    def _operate(self, node: str) -> Step:
        key = self.op["key"]
        if self.op["f"] == "send":
            acks = self.workload.acks
            if self.prod.id is None:
                return self._request(
                    "send", node, Produce(TOPIC, partition_of(key), encode_value(self.op["value"]), acks)
                )
            if self.batch is None:
                seq = self.prod.sequences.get(key, 0)
                self.prod.sequences[key] = seq + 1
                self.batch = (seq, self.op["value"])
            return self._request("send", node, self._produce(key, self.batch))
        return self._request("poll", node, Fetch(TOPIC, partition_of(key), self.consumer.positions.get(key, 0)))

    def _produce(self, key: str, batch: tuple[int, Any]) -> Produce:
        pid, epoch = self.prod.id  # type: ignore[misc]
        value = encode_value(batch[1])
        return Produce(TOPIC, partition_of(key), value, self.workload.acks, PRODUCE_TIMEOUT_MS, pid, epoch, batch[0])

    # ------------------------------------------------------------------ answers in
    def receive(self, answer: Reply | Failure) -> Step:
        stage, op = self.stage, self.op
        if stage in ("create", "ready"):
            return self._setup_answer(answer)
        if stage == "pid":
            return self._producer_id(answer)
        if stage == "retry":
            return self._retried(answer)
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
            leader = self.leaders.get(key)
            if leader is None:  # nobody leads it yet: nothing was sent
                self._give_back(key)
                return self._done("fail", failed_value, "leader-not-available")
            return self._operate(leader)
        if stage == "send":
            return self._sent(key, value, body)
        return self._polled(key, body)

    def _learn(self, reply: MetadataReply) -> None:
        for p in reply.partitions or ():
            k = f"{TOPIC}-{p.partition}"
            if p.error == 0 and p.leader is not None and p.leader in self.workload.nodes:
                self.leaders[k] = p.leader
            else:
                self.leaders.pop(k, None)

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
        return self._operate(leader)

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

    def _polled(self, key: str, fetched: Fetched) -> Completion:
        consumer = self.consumer
        if fetched.error != 0:
            if fetched.error in REFRESH:
                self.leaders.pop(key, None)
            if fetched.error == OFFSET_OUT_OF_RANGE:  # the log was truncated below our position
                consumer.positions[key] = 0
            return self._done("fail", None, fetched.error_name)
        start = consumer.positions.get(key, 0)
        pairs = [[offset, decode_value(data)] for offset, data in fetched.records if offset >= start]
        consumer.polled.add(key)
        if pairs:
            consumer.positions[key] = pairs[-1][0] + 1
            consumer.at_end.discard(key)
        elif start >= fetched.high_watermark:
            consumer.at_end.add(key)
        return self._done("ok", pairs)

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


# ---------------------------------------------------------------------------- generators


@dataclass
class QueueOp:
    f: str  # send, poll or assign
    key: str | None
    value: Any

    def as_op(self) -> Op:
        return {"f": self.f, "key": self.key, "value": list(self.value) if self.f == "assign" else self.value}


class QueueGenerator:
    """Draws operations: mostly sends and polls on the process's assigned keys, sometimes a new assignment."""

    def __init__(self, rng: random.Random, partitions: int, assign_p: float = 0.05) -> None:
        if partitions < 1:
            raise ValueError("partitions must be positive")
        self.rng = rng
        self.keys = keys(partitions)
        self.assign_p = assign_p
        self._next_value = 0

    def assignment(self) -> list[str]:
        rng = self.rng
        chosen = [k for k in self.keys if rng.random() < 0.5]
        return chosen or [self.keys[rng.randrange(len(self.keys))]]

    def next(self, assigned: Sequence[str]) -> QueueOp:
        """The next operation for a process assigned `assigned`."""
        rng = self.rng
        if not assigned or rng.random() < self.assign_p:
            return QueueOp("assign", None, self.assignment())
        if rng.random() < 0.5:
            self._next_value += 1
            return QueueOp("send", self.keys[rng.randrange(len(self.keys))], self._next_value)
        return QueueOp("poll", assigned[rng.randrange(len(assigned))], None)


class _Setup(gen.Generator):
    """Create the topic through the nodes in turn until one accepts it, then ask every node until its
    metadata shows every partition led with enough in-sync replicas (one thread, one op at a time)."""

    def __init__(self, workload: QueueWorkload) -> None:
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


class _Drain(gen.Generator):
    """One thread's final phase: assign its partitions (positions back to 0), then poll each to its end.

    A key is done once it has been polled ok since the assign and the process has read past the
    highest acknowledged offset, or its end (an empty poll at the high watermark) has not moved for
    END_QUIET_S, which is what a lost acknowledged tail looks like. Every key is polled ok at least
    once, so a run whose sends all failed is still observed (valid), not unknown.
    """

    def __init__(self, workload: QueueWorkload, thread: int, keys: Sequence[str]) -> None:
        self.workload, self.thread, self.keys = workload, thread, list(keys)
        self.assigned_by: Any = None  # the process that assigned the keys (from offset 0) in this phase
        self.end_since: dict[str, int] = {}

    def op(self, ctx: gen.Context) -> gen.Result:
        if self.thread not in ctx.workers:
            return None
        if self.thread not in ctx.free:
            return gen.PENDING, self
        process = ctx.workers[self.thread]
        consumer = self.workload.consumer(process)
        while self.keys:
            key = self.keys[0]
            if self.assigned_by != process or key not in consumer.assigned:
                self.assigned_by = process
                self.end_since = {}
                return gen.fill({"f": "assign", "key": None, "value": list(self.keys), "process": process}, ctx), self
            if key in consumer.at_end:
                self.end_since.setdefault(key, ctx.time)
            else:
                self.end_since.pop(key, None)
            ended = self.end_since.get(key)
            read_all = consumer.positions.get(key, 0) > self.workload.acked_max.get(key, -1)
            quiet = ended is not None and ctx.time - ended >= int(END_QUIET_S * gen.SECOND)
            if key in consumer.polled and (read_all or quiet):
                self.keys.pop(0)
                continue
            pause = int(END_POLL_S * gen.SECOND) if ended is not None else 0
            poll = {"f": "poll", "key": key, "value": None, "process": process, "time": ctx.time + pause}
            return gen.fill(poll, ctx), self
        return None


# ---------------------------------------------------------------------------- the workload


class QueueWorkload:
    """A topic `t0` of `partitions` partitions on `nodes`: unique sends and polls (checker model `queue`)."""

    name = NAME
    model = MODEL
    api = "kafka"  # the client API it speaks: the nodes must run the broker role

    def __init__(
        self,
        nodes: Sequence[str],
        seed: int,
        *,
        timeout_s: float = 2.0,
        acks: str | int = "all",
        partitions: int = 3,
        replication_factor: int = 3,
        min_isr: int = 2,
        unclean: bool = False,
        idempotent: bool = True,
    ) -> None:
        if not nodes:
            raise ValueError("the queue workload needs at least one node")
        self.nodes = sorted(nodes, key=lambda n: (len(n), n))
        self.seed = seed
        self.timeout_s = timeout_s
        self.acks = acks if isinstance(acks, int) else ACKS[acks]
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.min_isr = min_isr
        self.unclean = unclean
        self.idempotent = idempotent and self.acks == -1  # as Kafka clients: only with acks=all
        self.ops = QueueGenerator(random.Random(f"workload-{seed}"), partitions)
        self.consumers: dict[int, Consumer] = {}
        self.producers: dict[Any, Producer] = {}
        self.acked_max: dict[str, int] = {}
        self.partition_leaders: dict[str, str] = {}  # as the setup's last readiness check listed them
        self.setup_error = "no answer"  # why the setup has not succeeded yet

    def options(self) -> dict[str, Any]:
        """The topic and producer settings, as schedule.json stores them."""
        return {
            "acks": self.acks,
            "partitions": self.partitions,
            "replication-factor": self.replication_factor,
            "min-isr": self.min_isr,
            "unclean": self.unclean,
            "idempotent": self.idempotent,
        }

    def consumer(self, process: int) -> Consumer:
        return self.consumers.setdefault(process, Consumer())

    def producer(self, owner: Any) -> Producer:
        return self.producers.setdefault(owner, Producer())

    def note_ack(self, key: str, offset: int) -> None:
        if offset > self.acked_max.get(key, -1):
            self.acked_max[key] = offset

    def all_keys(self) -> list[str]:
        return keys(self.partitions)

    def create_topic(self) -> CreateTopic:
        configs = (
            ("min.insync.replicas", str(self.min_isr)),
            ("unclean.leader.election.enable", "true" if self.unclean else "false"),
        )
        return CreateTopic(TOPIC, self.partitions, self.replication_factor, configs)

    # ------------------------------------------------------------------ phases
    def _next(self, ctx: gen.Context) -> Op | None:
        # the op is drawn for one process (its assignment decides between poll and assign), so the
        # process is chosen here rather than by `gen.fill`; Fn asks only when some thread is free
        process = ctx.some_free_process()
        return {**self.ops.next(self.consumer(process).assigned).as_op(), "process": process}

    def generator(self) -> gen.Generator:
        return gen.Fn(self._next)

    def setup(self) -> gen.Generator | None:
        """Create the topic, then wait until every node sees every partition led (not in the history)."""
        return gen.on_threads(lambda t: t == 0, _Setup(self))

    def final(self, keys: Sequence[Any], threads: int) -> gen.Generator | None:
        """Every partition (not only the ones the history names) drained by the client threads."""
        every = self.all_keys()
        per_thread = [
            gen.on_threads(lambda x, t=t: x == t, _Drain(self, t, every[t::threads]))
            for t in range(min(threads, len(every)))
        ]
        return gen.any_of(*per_thread) if per_thread else None

    def client(self, thread: int, process: int) -> QueueClient:
        return QueueClient(self, process, random.Random(f"client-{self.seed}-{thread}-{process}"), thread)


def from_options(nodes: Sequence[str], seed: int, options: Mapping[str, Any], timeout_s: float = 2.0) -> QueueWorkload:
    """The workload a test's queue options describe (acks, partitions, replication-factor, min-isr, unclean,
    idempotent)."""
    return QueueWorkload(
        nodes,
        seed,
        timeout_s=timeout_s,
        acks=options.get("acks", "all"),
        partitions=int(options.get("partitions", 3)),
        replication_factor=int(options.get("replication-factor", 3)),
        min_isr=int(options.get("min-isr", 2)),
        unclean=bool(options.get("unclean", False)),
        idempotent=bool(options.get("idempotent", True)),
    )
