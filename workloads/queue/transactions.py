"""The queue's transactions (``txn=True``, ``--txn``, Jepsen's ``:txn?``): the transaction a client runs
with its worker thread's transactional producer (its state: `workloads.queue.state.TxnProducer`), and the
setup's ``txn-init``.

The main phase's ops are ``txn``s of 1 to 4 micro-ops, ``["send", key, value]`` and ``["poll"]``,
completed as ``["send", key, [offset, value]]`` and ``["poll", {key: [[offset, value], ...]}]`` (model
``txn-queue``: ``checkers.txn_queue``). Each worker thread has a transactional producer (transactional id
``kraftwerk-txn-<thread>``); polls are read_committed fetches of the process's assigned partitions, and
the positions they reach are committed in the transaction (AddOffsetsToTxn, TxnOffsetCommit to group
``kraftwerk-txn``). Some transactions abort by choice, some by a crash of their producer, whose last
write is left in flight: the successor's InitProducerId fences the old epoch, and the zombie write is
then sent with it (a broker must refuse it). See `TxnClient` for the outcomes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from workloads import generator as gen
from workloads.protocol import Completion, Failure, Op, Reply, Step
from workloads.queue.bodies import (
    PRODUCE_TIMEOUT_MS,
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    EndTxn,
    Fetch,
    Fetched,
    FindCoordinator,
    InitProducerId,
    Metadata,
    Produce,
    Produced,
    TxnOffsetCommit,
)
from workloads.queue.consumer import ConsumingClient
from workloads.queue.errors import COORDINATOR_ERRORS, REFRESH, produce_outcome
from workloads.queue.setup import SETUP_RETRY_S
from workloads.queue.state import QueueState
from workloads.queue.topic import TOPIC, encode_value, partition_of

TXN_ID_PREFIX = "kraftwerk-txn-"  # + the worker thread: each thread's transactional id
TXN_GROUP = "kraftwerk-txn"  # the consumer group whose offsets the transactions commit
TXN_TIMEOUT_MS = 10_000  # transaction.timeout.ms: the coordinator aborts a transaction open longer
TXN_ABORT_P = 0.1  # a transaction aborts by choice (EndTxn abort)
TXN_CRASH_P = 0.03  # ... or its producer crashes before ending it (its successor re-inits and fences it)
END_TXN_TRIES = 3  # EndTxn commit attempts (following the coordinator) before the outcome is unknown
CONCURRENT_TRANSACTIONS = 51  # the previous transaction's markers are still being written: ask again
BUSY_BACKOFF_S = 0.02  # ... after this long (Kafka's retry.backoff.ms for transactional requests)
BUSY_TRIES = 50  # ... this many times within one op
COORDINATOR_LOAD_IN_PROGRESS = 14  # the coordinator is still loading its state partition: ask it again ...
LOAD_BACKOFF_S = (0.1, 1.0)  # ... after 0.1 s, doubling up to 1 s (Kafka's retry.backoff.ms, retry.backoff.max.ms)
LOAD_TRIES = 10  # ... this many times within one op (about 7.5 s)
TXN_DEFINITE = frozenset({47, 48, 90})  # INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED: not committed
TXN_RETRY = COORDINATOR_ERRORS | {CONCURRENT_TRANSACTIONS, 7}  # EndTxn again (7: REQUEST_TIMED_OUT)
# the requests to a (transaction or group) coordinator that are sent again while it loads
LOAD_RETRY_STAGES = frozenset({"t-init", "t-add", "t-offsets", "t-txoffsets", "t-end"})
# A transaction coordinator that is gone (no answer, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) is looked
# up again and the request sent to the one found, as Kafka's TransactionManager does, after 0.1 s doubling
# to 1 s, REFIND_TRIES times within one op (2.5 s of backoff); then the op fails (or aborts).
REFIND_ERRORS = frozenset({15, 16})
REFIND_BACKOFF_S = (0.1, 1.0)
REFIND_TRIES = 5
REFIND_STAGES = {
    "t-find": "find-coordinator",
    "t-init": "init-producer-id",
    "t-add": "add-partitions",
    "t-offsets": "add-offsets",
}


@dataclass
class _Txn:
    """The transaction a client runs: its micro-ops, what they gave, and how it is to end."""

    mops: list[list[Any]]
    final: bool = False  # a final-drain poll: no transaction
    init: bool = False  # the setup's txn-init: the coordinators and a producer id, no transaction
    out: list[list[Any]] = field(default_factory=list)  # the completed micro-ops so far
    i: int = 0  # the micro-op under way
    abort: bool = False  # aborts by choice
    crash: bool = False  # the producer crashes before ending it
    withhold: int = -1  # the crash leaves this send in flight (the zombie's write)
    added: set[str] = field(default_factory=set)  # partitions added to the transaction
    began: bool = False  # the coordinator may know the transaction
    read: bool = False  # a poll read something: the positions are committed with the transaction
    in_doubt: bool = False  # a write may have been appended though its answer said otherwise or got lost
    seq: int = 0  # the sequence of the write under way
    start_positions: dict[str, int] = field(default_factory=dict)
    poll_keys: list[str] | None = None
    polled: dict[str, list] = field(default_factory=dict)
    ending: str = ""  # commit | abort, once EndTxn is under way
    tries: int = 0  # EndTxn commit attempts
    maybe: bool = False  # an EndTxn commit attempt may have been applied
    reason: str = ""
    reset_after: bool = False  # re-init after the abort (an error, not a choice)
    zombie_asked: bool = False
    busy: int = 0  # requests answered CONCURRENT_TRANSACTIONS and sent again
    loading: int = 0  # requests answered COORDINATOR_LOAD_IN_PROGRESS and sent again
    refinds: int = 0  # coordinator lookups after the coordinator was gone
    resend: tuple[str, Any] | None = None  # the (stage, body) to send to the coordinator found again


class TxnClient(ConsumingClient):
    """The client's transactions. A `txn` op runs its micro-ops in one transaction of the thread's
    transactional producer: first FindCoordinator (key type 1) and InitProducerId when the producer has
    no id (the epoch bump aborts what a predecessor left open and fences it), and the zombie write of a
    crashed predecessor, with its old epoch; then per send a Metadata when the leader is not known,
    AddPartitionsToTxn for a partition new to the transaction and a transactional Produce; per poll a
    read_committed Fetch of every assigned partition (value {key: [[offset, value], ...]}); then, if the
    polls read something, AddOffsetsToTxn and TxnOffsetCommit of the positions (group TXN_GROUP), and
    EndTxn. Outcomes: `ok` once EndTxn commit is answered; `fail` when no EndTxn commit was ever sent, or
    every one was refused (aborted by choice, by a crash of the producer, or after an error: EndTxn abort,
    or a re-init by the next transaction when a write is in doubt); `info` when an EndTxn commit may have
    been applied. An aborted or unknown transaction puts the consumer's positions back where they were (as
    a consumer rewinds to its committed offsets). A coordinator that answers COORDINATOR_LOAD_IN_PROGRESS
    is asked the same again after a backoff (0.1 s doubling to 1 s, LOAD_TRIES times), and one busy
    ending the previous transaction (CONCURRENT_TRANSACTIONS) after BUSY_BACKOFF_S, as Kafka's producer
    does. The final drain's txn ops only poll, without a transaction; the setup's ``txn-init`` only finds
    the coordinators and gets a producer id."""

    def __init__(self, workload: QueueState, process: int, rng: random.Random, thread: int | None = None) -> None:
        super().__init__(workload, process, rng, thread)
        # the thread's transactional producer, this process's abort/crash draws, the running transaction
        self.txp = workload.txn_producer(thread if thread is not None else process)
        self.txn_rng = random.Random(f"txn-{workload.seed}-{thread}-{process}")
        self.t: _Txn | None = None

    def _txn_init(self) -> Step:
        self.t = _Txn([], init=True, start_positions=dict(self.consumer.positions))
        return self._txn_ready()

    def _txn_start(self, value: Any) -> Step:
        t = self.t = _Txn([list(m) for m in value or ()], final=self.workload.draining)
        t.start_positions = dict(self.consumer.positions)
        if not t.final:
            r = self.txn_rng.random()
            t.abort = r < TXN_ABORT_P
            t.crash = not t.abort and r < TXN_ABORT_P + TXN_CRASH_P
            sends = [i for i, m in enumerate(t.mops) if m[0] == "send"]
            if t.crash and sends:
                t.withhold = sends[-1]
        return self._txn_ready()

    def _txn_done(self, typ: str, value: Any, error: str | None = None) -> Completion:
        t = self.t
        if t is not None and typ != "ok":
            self.consumer.positions = dict(t.start_positions)
        self.t = None
        return self._done(typ, value, error)

    def _txn_ready(self) -> Step:
        t, p = self.t, self.txp
        assert t is not None
        if t.final:
            return self._txn_next()
        if p.coordinator is None:
            return self._request("t-find", self._random_node(), FindCoordinator(p.transactional_id, 1))
        if p.id is None:
            return self._request("t-init", p.coordinator, InitProducerId(p.transactional_id, TXN_TIMEOUT_MS))
        if p.zombie is not None:
            pid, epoch, key, seq, value = p.zombie
            leader = self.leaders.get(key)
            if leader is None and not t.zombie_asked:
                t.zombie_asked = True
                return self._request("t-zmeta", self._random_node(), Metadata(TOPIC))
            p.zombie = None
            if leader is not None:
                body = Produce(
                    TOPIC, partition_of(key), encode_value(value), -1, PRODUCE_TIMEOUT_MS, pid, epoch, seq, True
                )
                return self._request("t-zombie", leader, body)
        return self._txn_next()

    def _txn_next(self) -> Step:
        t, p = self.t, self.txp
        assert t is not None
        while t.i < len(t.mops):
            m = t.mops[t.i]
            if m[0] == "send" and not t.final:
                key, value = str(m[1]), m[2]
                assert p.id is not None and p.coordinator is not None
                if key not in t.added:
                    t.began = True  # the coordinator may know the transaction from now on
                    body = AddPartitionsToTxn(p.transactional_id, *p.id, TOPIC, (partition_of(key),))
                    return self._request("t-add", p.coordinator, body)
                seq = p.sequences.get(key, 0)
                if t.i == t.withhold:  # the crash: this write is still on its way when the producer dies
                    p.sequences[key] = seq + 1
                    p.zombie = (*p.id, key, seq, value)
                    t.i += 1
                    continue
                leader = self.leaders.get(key)
                if leader is None:
                    return self._request("t-meta", self._random_node(), Metadata(TOPIC))
                p.sequences[key] = seq + 1
                t.seq = seq
                body = Produce(TOPIC, partition_of(key), encode_value(value), -1, PRODUCE_TIMEOUT_MS, *p.id, seq, True)
                return self._request("t-send", leader, body)
            if m[0] != "poll":
                return self._txn_done("fail", t.mops, f"unknown micro-op {m[0]!r}")
            if t.poll_keys is None:
                t.poll_keys, t.polled = list(self.consumer.assigned), {}
            if t.poll_keys:
                key = t.poll_keys[0]
                leader = self.leaders.get(key)
                if leader is None:
                    return self._request("t-fmeta", self._random_node(), Metadata(TOPIC))
                pos = self.consumer.positions.get(key, 0)
                return self._request("t-fetch", leader, Fetch(TOPIC, partition_of(key), pos, isolation_level=1))
            t.out.append(["poll", t.polled])
            t.poll_keys = None
            t.i += 1
        return self._txn_finish()

    def _txn_finish(self) -> Step:
        t, p = self.t, self.txp
        assert t is not None
        if t.final:
            return self._txn_done("ok", t.out)
        if t.init:
            if p.group_coordinator is None:
                return self._request("t-ginit", self._random_node(), FindCoordinator(TXN_GROUP))
            return self._txn_done("ok", None)
        if t.crash:
            p.reset()  # the successor re-inits: the epoch bump aborts this transaction and fences the zombie
            return self._txn_done("fail", t.mops, "crash")
        if t.abort:
            return self._txn_abort("abort", by_choice=True)
        if t.read:
            t.began = True
            body = AddOffsetsToTxn(p.transactional_id, *p.id, TXN_GROUP)  # type: ignore[misc]
            return self._request("t-offsets", p.coordinator, body)  # type: ignore[arg-type]
        if not t.began:
            return self._txn_done("ok", t.out)  # only polls that read nothing: no transaction to end
        return self._txn_end_commit()

    def _txn_abort(self, reason: str, by_choice: bool = False) -> Step:
        """End the transaction without committing it: EndTxn abort when the producer is sure of its
        writes, else leave it to the next re-init (which aborts it at a bumped epoch)."""
        t, p = self.t, self.txp
        assert t is not None
        t.reason = reason
        if not by_choice:
            t.reset_after = True
        if not t.began:
            return self._txn_done("fail", t.mops, reason)
        if t.in_doubt or p.id is None or p.coordinator is None:
            p.reset()
            return self._txn_done("fail", t.mops, reason)
        t.ending = "abort"
        return self._request("t-end", p.coordinator, EndTxn(p.transactional_id, *p.id, False))

    def _txn_end_commit(self) -> Step:
        t, p = self.t, self.txp
        assert t is not None and p.id is not None
        t.ending = "commit"
        t.tries += 1
        if p.coordinator is None:
            return self._request("t-efind", self._random_node(), FindCoordinator(p.transactional_id, 1))
        return self._request("t-end", p.coordinator, EndTxn(p.transactional_id, *p.id, True))

    def _txn_refind(self, reason: str, failed: str | None = None) -> Step:
        """Look the transaction coordinator up again after a backoff, or give up: the op fails, or the
        transaction aborts once it has begun. `failed`: the stage whose coordinator was gone (else the
        lookup itself failed, and the stage it serves is the one to resend, if any)."""
        t, p = self.t, self.txp
        assert t is not None
        if failed is None:
            failed = t.resend[0] if t.resend is not None else "t-find"
        if t.refinds >= REFIND_TRIES:
            t.resend = None
            what = f"{REFIND_STAGES[failed]}: {reason}"
            return self._txn_done("fail", t.mops, what) if failed in ("t-find", "t-init") else self._txn_abort(what)
        backoff = min(REFIND_BACKOFF_S[0] * 2**t.refinds, REFIND_BACKOFF_S[1])
        t.refinds += 1
        body = FindCoordinator(p.transactional_id, 1)
        return self._request("t-refind", self._random_node(), body, backoff_s=backoff)

    def _txn_unknown(self, reason: str) -> Completion:
        """EndTxn commit got no definite answer: `info` if one attempt may have been applied, else `fail`."""
        t = self.t
        assert t is not None
        self.txp.reset()
        return self._txn_done("info" if t.maybe else "fail", t.mops, reason)

    def _txn_answer(self, answer: Reply | Failure) -> Step:
        t, p, stage = self.t, self.txp, self.stage
        assert t is not None
        body = answer.body if isinstance(answer, Reply) else None
        reason = answer.reason if isinstance(answer, Failure) else getattr(body, "error_name", "no answer")
        error = -1 if body is None else getattr(body, "error", 0)
        if stage in ("t-find", "t-efind", "t-refind"):
            node = self._found(body, error)
            if node is None:
                if stage == "t-efind":
                    return self._txn_end_commit() if t.tries < END_TXN_TRIES else self._txn_unknown(reason)
                return self._txn_refind(reason)
            p.coordinator = node
            if stage == "t-efind":
                return self._request("t-end", node, EndTxn(p.transactional_id, *p.id, True))  # type: ignore[misc]
            if stage == "t-refind" and t.resend is not None:
                resend, t.resend = t.resend, None
                return self._request(resend[0], node, resend[1])
            return self._txn_ready()
        if stage in REFIND_STAGES and (body is None or error in REFIND_ERRORS):
            p.coordinator = None
            last = self._last
            assert last is not None
            t.resend = (stage, last.body) if stage != "t-init" else None  # t-init: the id found may differ
            return self._txn_refind(reason, stage)
        if error == CONCURRENT_TRANSACTIONS and stage in ("t-init", "t-add", "t-offsets") and t.busy < BUSY_TRIES:
            t.busy += 1
            last = self._last
            assert last is not None
            return self._request(stage, last.node, last.body, backoff_s=BUSY_BACKOFF_S)
        if error == COORDINATOR_LOAD_IN_PROGRESS and stage in LOAD_RETRY_STAGES and t.loading < LOAD_TRIES:
            # as Kafka's TransactionManager: the coordinator has not taken the request; the same one again
            backoff = min(LOAD_BACKOFF_S[0] * 2**t.loading, LOAD_BACKOFF_S[1])
            t.loading += 1
            last = self._last
            assert last is not None
            return self._request(stage, last.node, last.body, backoff_s=backoff)
        if stage == "t-init":
            if error != 0 or body.producer_id < 0:
                if error in COORDINATOR_ERRORS or body is None:
                    p.coordinator = None
                return self._txn_done("fail", t.mops, f"init-producer-id: {reason}")
            p.id, p.sequences = (body.producer_id, max(0, body.producer_epoch)), {}
            return self._txn_ready()
        if stage in ("t-zmeta", "t-meta", "t-fmeta"):
            if body is not None:
                self._learn(body)
            if stage == "t-zmeta":
                return self._txn_ready()
            if stage == "t-meta":
                key = str(t.mops[t.i][1])
                return self._txn_next() if key in self.leaders else self._txn_abort("leader-not-available")
            if t.poll_keys and t.poll_keys[0] not in self.leaders:
                t.poll_keys.pop(0)
            return self._txn_next()
        if stage == "t-zombie":  # the zombie's answer goes nowhere: its producer is gone
            return self._txn_next()
        if stage == "t-fetch":
            return self._txn_fetched(answer)
        if stage == "t-add":
            if error != 0:
                if error in COORDINATOR_ERRORS or body is None:
                    p.coordinator = None
                return self._txn_abort(f"add-partitions: {reason}")
            t.added.add(str(t.mops[t.i][1]))
            return self._txn_next()
        if stage == "t-send":
            return self._txn_sent(answer)
        if stage == "t-offsets":
            if error != 0:
                if error in COORDINATOR_ERRORS or body is None:
                    p.coordinator = None
                return self._txn_abort(f"add-offsets: {reason}")
            if p.group_coordinator is None:
                return self._request("t-gfind", self._random_node(), FindCoordinator(TXN_GROUP))
            return self._txn_commit_offsets()
        if stage in ("t-gfind", "t-ginit"):  # the group's coordinator, for a transaction or the setup's txn-init
            node = self._found(body, error)
            if node is None:
                what = f"find-group-coordinator: {reason}"
                return self._txn_abort(what) if stage == "t-gfind" else self._txn_done("fail", None, what)
            p.group_coordinator = node
            return self._txn_commit_offsets() if stage == "t-gfind" else self._txn_done("ok", None)
        if stage == "t-txoffsets":
            if error != 0:
                if error in COORDINATOR_ERRORS or body is None:
                    p.group_coordinator = None
                return self._txn_abort(f"txn-offset-commit: {reason}")
            return self._txn_end_commit()
        # t-end
        if t.ending == "abort":
            if error != 0:
                if error in COORDINATOR_ERRORS or body is None:
                    p.coordinator = None
                p.reset()
            elif t.reset_after:
                p.reset()
            return self._txn_done("fail", t.mops, t.reason if error == 0 else f"{t.reason}; end-txn abort: {reason}")
        if error == 0:
            for m in t.out:
                if m[0] == "send":
                    self.workload.note_ack(m[1], m[2][0])
            return self._txn_done("ok", t.out)
        if isinstance(answer, Failure):
            t.maybe = t.maybe or answer.sent
        elif error == 7:  # REQUEST_TIMED_OUT: the coordinator may still complete it
            t.maybe = True
        if body is None or error in COORDINATOR_ERRORS:
            p.coordinator = None
        if body is None or error in TXN_RETRY:
            return self._txn_end_commit() if t.tries < END_TXN_TRIES else self._txn_unknown(f"end-txn: {reason}")
        if error in TXN_DEFINITE:
            return self._txn_unknown(f"end-txn: {reason}")
        t.maybe = True
        return self._txn_unknown(f"end-txn: {reason}")

    def _txn_commit_offsets(self) -> Step:
        p = self.txp
        c = self.consumer
        offsets = tuple((partition_of(k), c.positions.get(k, 0)) for k in c.assigned)
        body = TxnOffsetCommit(p.transactional_id, TXN_GROUP, *p.id, TOPIC, offsets)  # type: ignore[misc]
        return self._request("t-txoffsets", p.group_coordinator, body)  # type: ignore[arg-type]

    def _txn_sent(self, answer: Reply | Failure) -> Step:
        t, p = self.t, self.txp
        assert t is not None
        key, value = str(t.mops[t.i][1]), t.mops[t.i][2]
        if isinstance(answer, Failure) or answer.body is None:
            self.leaders.pop(key, None)
            if isinstance(answer, Failure) and not answer.sent:
                p.sequences[key] = t.seq
            else:
                t.in_doubt = True  # the write may still land: only an epoch bump fences it
            return self._txn_abort(f"produce: {answer.reason if isinstance(answer, Failure) else 'no answer'}")
        produced: Produced = answer.body
        if produced.error != 0:
            if produced.error in REFRESH:
                self.leaders.pop(key, None)
            if produce_outcome(produced.error) == "fail":
                p.sequences[key] = t.seq
            else:
                t.in_doubt = True
            return self._txn_abort(f"produce: {produced.error_name}")
        t.out.append(["send", key, [produced.base_offset, value]])
        t.i += 1
        return self._txn_next()

    def _txn_fetched(self, answer: Reply | Failure) -> Step:
        t, c = self.t, self.consumer
        assert t is not None and t.poll_keys
        key = t.poll_keys.pop(0)
        if isinstance(answer, Failure):
            self.leaders.pop(key, None)
            return self._txn_next()
        fetched: Fetched = answer.body
        if fetched.error != 0:
            self._fetch_failed(key, fetched)
            return self._txn_next()
        pairs = self._consume(key, fetched)
        c.polled.add(key)
        if pairs:
            c.at_end.discard(key)
            t.read = True
        if fetched.next_offset > c.positions.get(key, 0):  # past aborted records and markers
            c.positions[key] = fetched.next_offset
        if fetched.open_txn:  # the end it reached is the LSO: committed records may still follow
            c.held.add(key)
            c.at_end.discard(key)
        else:
            c.held.discard(key)
            if not pairs and c.positions.get(key, 0) >= fetched.high_watermark:
                c.at_end.add(key)
        t.polled[key] = pairs
        return self._txn_next()


class TxnInit(gen.Generator):
    """One thread's `txn-init` (its producer's coordinator, producer id and the group's coordinator),
    asked again SETUP_RETRY_S after a failure until it is ok. Immutable: `each_thread` copies it."""

    def __init__(self, workload: QueueState, busy: bool = False, not_before: int = 0) -> None:
        self.workload, self.busy, self.not_before = workload, busy, not_before

    def op(self, ctx: gen.Context) -> gen.Result:
        if self.busy or not ctx.free:
            return gen.PENDING, self
        out = gen.fill({"f": "txn-init", "key": None, "value": None, "time": max(ctx.time, self.not_before)}, ctx)
        return out, self if out is gen.PENDING else TxnInit(self.workload, True, self.not_before)

    def update(self, ctx: gen.Context, event: Op) -> gen.Generator | None:
        typ = event.get("type")
        if typ == "ok":
            return None
        if typ not in ("fail", "info"):
            return self
        self.workload.setup_error = f"txn-init: {event.get('error')}"
        return TxnInit(self.workload, False, event["time"] + int(SETUP_RETRY_S * gen.SECOND))
