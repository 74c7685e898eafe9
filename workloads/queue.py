"""The queue workload: clients send unique values to a Kafka-style log and poll them back.

As Jepsen's Kafka workload (docs/formats.md "Queue ops"): one partition is one key (`t0-2`), `send` appends a
unique value, `poll` reads from the process's position, `assign` replaces the process's
partitions and resets its positions to the beginning. Written once for every runtime: the
generator, the sans-IO client (`QueueClient`: an operation in, requests out; answers in, a
completion out), the setup that creates the topic and the final drain. Its history is judged by
model `queue` (`checkers.queue`).

The client finds a partition's leader with a Metadata request to a random node and keeps it
until an answer says leadership moved; it sends single-record batches with the run's acks and
fetches from its process's position. As a KIP-320 consumer, a Fetch carries the leader epoch the
metadata named (``current_leader_epoch``: a node leading an older or newer epoch answers
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, and the next poll asks for metadata again), and a poll
never fetches from a leader whose epoch is older than the newest one the client has seen named or
the one its position was read at (or, for a group member, committed with: commits carry it); it
fails ``stale-metadata`` instead, so a stale leader's shorter log cannot answer OFFSET_OUT_OF_RANGE
and reset the position. Produce carries no leader epoch in Kafka, so sends go where the metadata says.
Outcomes: produce errors that prove nothing was appended are
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

With ``sub_via="subscribe"`` (Jepsen's ``:sub-via #{:subscribe}``) a process ``subscribe``s instead:
it joins the consumer group ``kraftwerk-queue`` (the coordinator and a client-side range assignor
choose its partitions, rebalancing as members come, leave and crash), its polls read every assigned
partition (``{key: [[offset, value], ...]}``), and ``commit`` ops commit its positions with its
generation (``{"generation": g, "offsets": {key: offset}}``; a commit that ends ``info`` carries the same
value: what it tried to commit). The completion of a poll that joined the group (JoinGroup, SyncGroup,
OffsetFetch) also records the assignment it began, ``"assigned": {"generation": g, "start": {key: s},
"committed": {key: c}}``: the position each assigned partition starts from and the committed offset
OffsetFetch answered (-1: none; the start is then 0), so the checker can tell a start past the group's
commits (``start-past-commit``). Processes also subscribe again now
and then (a rebalance), sometimes take long to process what they polled before committing it (the
group may rebalance without them meanwhile), and ``crash`` (an ``info``: a fresh client takes over
and the old member's session expires). The final drain still assigns.

With ``txn=True`` (``--txn``, Jepsen's ``:txn?``) the main phase's ops are ``txn``s of 1 to 4 micro-ops,
``["send", key, value]`` and ``["poll"]``, completed as ``["send", key, [offset, value]]`` and
``["poll", {key: [[offset, value], ...]}]`` (model ``txn-queue``: ``checkers.txn_queue``). Each worker
thread has a transactional producer (transactional id ``kraftwerk-txn-<thread>``); polls are
read_committed fetches of the process's assigned partitions, and the positions they reach are
committed in the transaction (AddOffsetsToTxn, TxnOffsetCommit to group ``kraftwerk-txn``). Some
transactions abort by choice, some by a crash of their producer, whose last write is left in
flight: the successor's InitProducerId fences the old epoch, and the zombie write is then sent with
it (a broker must refuse it). See ``QueueClient._txn_start`` for the outcomes.

The request and reply bodies below are the workload's own; a transport translates them to the
system under test (the simulator's broker messages, or the Kafka wire protocol).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workloads import generator as gen
from workloads.protocol import Completion, Failure, Op, Reply, Request, Step

NAME = "queue"
MODEL = "queue"
TXN_MODEL = "txn-queue"  # --txn: judged by checkers.txn_queue
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


SUB_VIA = ("assign", "subscribe")
GROUP = "kraftwerk-queue"  # the consumer group of --sub-via subscribe
SESSION_TIMEOUT_MS = 4000
REBALANCE_TIMEOUT_MS = 1500
HEARTBEAT_INTERVAL_S = 1.0  # a subscribed poll sends a Heartbeat first when the last one is older
MAX_JOINS = 3  # JoinGroup attempts within one op
SUBSCRIBE_P = 0.02  # a subscribed process subscribes again (leaves the group and rejoins: a rebalance)
CRASH_P = 0.01  # a subscribed process crashes (Jepsen's :crash): its member lingers until its session expires
COMMIT_P = 0.1  # of the non-send ops of a subscribed process, commits (the rest are polls)
SLOW_P = 0.2  # a subscribed process processes what it polled slowly before committing it ...
SLOW_S = (0.5, 3.0)  # ... for this long (past the rebalance timeout: the group may move on without it)
UNKNOWN_MEMBER_ID = 25
REBALANCE_ERRORS = frozenset({22, 27})  # ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: join again
COORDINATOR_ERRORS = frozenset({14, 15, 16})  # load in progress, not available, not coordinator: find it again
MEMBER_ID_REQUIRED = 79

# --txn (Jepsen's transactional Kafka workload)
TXN_ID_PREFIX = "kraftwerk-txn-"  # + the worker thread: each thread's transactional id
TXN_GROUP = "kraftwerk-txn"  # the consumer group whose offsets the transactions commit
TXN_TIMEOUT_MS = 10_000  # transaction.timeout.ms: the coordinator aborts a transaction open longer
MAX_MOPS = 4  # micro-ops per transaction
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


def validate_assignment(
    assignment: Mapping[int, Sequence[str]] | None, nodes: Sequence[str], partitions: int, rf: int
) -> dict[int, tuple[str, ...]]:
    """An explicit replica placement for the topic (partition -> replica nodes, leader first), checked
    against the topic's partition count and replication factor; ValueError naming what is wrong."""
    if not assignment:
        return {}
    out = {int(p): tuple(str(n) for n in r) for p, r in assignment.items()}
    if sorted(out) != list(range(partitions)):
        raise ValueError(f"assignment must list partitions 0..{partitions - 1} once each, got {sorted(out)}")
    for p, r in sorted(out.items()):
        if len(r) != rf or len(set(r)) != len(r):
            raise ValueError(f"assignment of partition {p}: {list(r)} is not {rf} distinct replicas")
        unknown = [n for n in r if n not in nodes]
        if unknown:
            raise ValueError(f"assignment of partition {p}: {', '.join(unknown)} not among the nodes")
    return out


def range_assignment(members: Sequence[str], all_keys: Sequence[str]) -> dict[str, list[str]]:
    """The group leader's assignment: Kafka's range assignor over the members in id order."""
    ordered = sorted(members)
    per, extra = divmod(len(all_keys), len(ordered)) if ordered else (0, 0)
    out, start = {}, 0
    for i, member in enumerate(ordered):
        n = per + (1 if i < extra else 0)
        out[member] = list(all_keys[start : start + n])
        start += n
    return out


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
    leader_epoch: int = -1  # the partition's leader epoch as the answering node knows it (-1: not told)


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
    transactional: bool = False  # a batch of the producer's open transaction (--txn)


@dataclass(frozen=True)
class InitProducerId:
    """Ask a node for an idempotent producer's id, or (with `transactional_id`, at its transaction
    coordinator) a transactional producer's id and a bumped epoch that fences its predecessors."""

    transactional_id: str | None = None
    transaction_timeout_ms: int = 0  # 0: the workload's TXN_TIMEOUT_MS


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
    """Records from `offset` on; `leader_epoch` is the leader epoch the client believes current
    (KIP-320's current_leader_epoch: a node that leads an older or newer epoch refuses; -1: none)."""

    topic: str
    partition: int
    offset: int
    max_wait_ms: int = FETCH_MAX_WAIT_MS
    leader_epoch: int = -1
    isolation_level: int = 0  # 1: read_committed (up to the last stable offset, aborted records left out)


@dataclass(frozen=True)
class Fetched:
    """The records at or after the fetch offset, as (offset, value bytes), and the partition's end
    (the high watermark; the last stable offset for read_committed). Control batches and, for
    read_committed, aborted records are left out; `next_offset` is the offset after the last batch
    served, whichever it was (-1: none). `open_txn` (read_committed): the last stable offset is below
    the high watermark, so an open transaction still holds back what follows it."""

    error: int
    error_name: str
    high_watermark: int = -1
    records: tuple[tuple[int, bytes | None], ...] = ()
    next_offset: int = -1
    open_txn: bool = False


ServedBatch = tuple[int, int, bool, bool, Sequence[tuple[int, "bytes | None"]]]
# (base offset, producer id, transactional, control, its (offset, value) records) as a transport decodes a batch


def fetched(
    batches: Sequence[ServedBatch],
    aborted: Sequence[tuple[int, int]] | None,
    read_committed: bool,
    last_stable_offset: int,
    high_watermark: int,
) -> Fetched:
    """A partition's successful fetch answer as the client sees it (every transport builds it here):
    the records a consumer returns (`visible_records`), its end, and whether an open transaction
    holds the last stable offset below the high watermark (read_committed only)."""
    records, end = visible_records(batches, aborted)
    visible = last_stable_offset if read_committed else high_watermark
    held = read_committed and 0 <= last_stable_offset < high_watermark
    return Fetched(0, "none", visible, records, end, held)


def visible_records(
    batches: Sequence[ServedBatch], aborted: Sequence[tuple[int, int]] | None
) -> tuple[tuple[tuple[int, bytes | None], ...], int]:
    """What a consumer returns of the fetched `batches` (in offset order), and the offset after the last.

    As Kafka's consumer: control batches are never returned; with read_committed, `aborted` (the fetch
    answer's (producer id, first offset) of aborted transactions) makes the transactional batches of a
    producer from its first offset up to its next control batch disappear.
    """
    pending = sorted(aborted or (), key=lambda a: a[1])
    active: set[int] = set()
    out: list[tuple[int, bytes | None]] = []
    i, end = 0, -1
    for base, pid, transactional, control, records in batches:
        last = records[-1][0] if records else base
        end = max(end, last + 1)
        while i < len(pending) and pending[i][1] <= last:
            active.add(pending[i][0])
            i += 1
        if control:
            active.discard(pid)
            continue
        if transactional and pid in active:
            continue
        out.extend(records)
    return tuple(out), end


@dataclass(frozen=True)
class CreateTopic:
    topic: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()
    timeout_ms: int = CREATE_TIMEOUT_MS
    # explicit replica placement, (partition, replica nodes, preferred leader first), as Kafka's
    # CreateTopics replica_assignment: when given, partitions and replication_factor are sent as -1
    assignments: tuple[tuple[int, tuple[str, ...]], ...] = ()


def broker_id(node: str) -> int:
    """A node's broker id (node `nK` is broker K)."""
    if not node.startswith("n") or not node[1:].isdigit():
        raise ValueError(f"not a node name: {node!r}")
    return int(node[1:])


@dataclass(frozen=True)
class TopicCreated:
    error: int
    error_name: str
    message: str | None = None


# ---------------------------------------------------------------------------- group bodies (--sub-via subscribe)


@dataclass(frozen=True)
class FindCoordinator:
    group: str  # the key: a group id, or a transactional id with key_type 1
    key_type: int = 0  # 0 group coordinator, 1 transaction coordinator


@dataclass(frozen=True)
class CoordinatorFound:
    error: int
    error_name: str
    node: str | None = None  # the coordinator's node name


@dataclass(frozen=True)
class JoinGroup:
    """Join (or rejoin, with `member_id`) the group; the answer waits for the rebalance."""

    group: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: bytes


@dataclass(frozen=True)
class GroupJoined:
    error: int
    error_name: str
    generation: int = -1
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()  # the leader's: (member id, subscription)


@dataclass(frozen=True)
class SyncGroup:
    group: str
    generation: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()  # from the leader only


@dataclass(frozen=True)
class GroupSynced:
    error: int
    error_name: str
    assignment: bytes = b""


@dataclass(frozen=True)
class Heartbeat:
    group: str
    generation: int
    member_id: str


@dataclass(frozen=True)
class LeaveGroup:
    group: str
    member_id: str


@dataclass(frozen=True)
class GroupAnswer:
    """The answer to a Heartbeat or a LeaveGroup."""

    error: int
    error_name: str


@dataclass(frozen=True)
class FetchOffsets:
    group: str
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class OffsetsFetched:
    error: int
    error_name: str
    offsets: tuple[tuple[int, int], ...] = ()  # (partition, committed offset; -1 for none)
    leader_epochs: tuple[tuple[int, int], ...] = ()  # (partition, the committed leader epoch; -1 for none)


@dataclass(frozen=True)
class CommitOffsets:
    group: str
    generation: int
    member_id: str
    topic: str
    offsets: tuple[tuple[int, int], ...]  # (partition, offset)
    leader_epochs: tuple[tuple[int, int], ...] = ()  # (partition, the leader epoch the position was read at)


@dataclass(frozen=True)
class OffsetsCommitted:
    error: int  # the first partition error (0: all committed)
    error_name: str


GROUP_REQUESTS = (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, FetchOffsets, CommitOffsets)


# ---------------------------------------------------------------------------- transaction bodies (--txn)


@dataclass(frozen=True)
class AddPartitionsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class AddOffsetsToTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group: str


@dataclass(frozen=True)
class TxnOffsetCommit:
    """The consumer's positions, committed to `group` as part of the producer's transaction."""

    transactional_id: str
    group: str
    producer_id: int
    producer_epoch: int
    topic: str
    offsets: tuple[tuple[int, int], ...]  # (partition, offset)


@dataclass(frozen=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True)
class TxnAnswer:
    """The answer to AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit or EndTxn (the first error)."""

    error: int
    error_name: str


TXN_REQUESTS = (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn)
# the request bodies a transport must carry
REQUESTS = (Metadata, Produce, Fetch, CreateTopic, InitProducerId, *GROUP_REQUESTS, *TXN_REQUESTS)


# ---------------------------------------------------------------------------- state


@dataclass
class Consumer:
    """One process's consumer state: its assigned partitions and positions (fresh for a new process),
    and, once it subscribed, its group membership (the partitions then come from the group)."""

    assigned: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    # the leader epoch each position was read at, or committed with (KIP-320): a leader older than it is stale
    epochs: dict[str, int] = field(default_factory=dict)
    polled: set[str] = field(default_factory=set)  # keys polled ok since the last assign
    at_end: set[str] = field(default_factory=set)  # keys whose last ok poll found nothing past the end
    # read_committed: keys whose last ok poll found an open transaction holding back the records after it
    held: set[str] = field(default_factory=set)
    subscribed: bool = False
    coordinator: str | None = None
    member_id: str = ""
    generation: int = -1
    joined: bool = False  # holds this generation's assignment and committed positions
    commit_due: bool = False  # a subscribed poll read something: the process commits next (commitSync)
    last_heartbeat: int = 0  # ns, the op time of the last heartbeat or join

    def assign(self, keys: Sequence[str]) -> None:
        self.assigned = list(keys)
        self.positions = dict.fromkeys(self.assigned, 0)
        self.epochs = {}
        self.polled = set()
        self.at_end = set()
        self.held = set()
        self.subscribed = False

    def subscribe(self) -> None:
        self.assign(())
        self.subscribed = True
        self.joined = False

    def rejoin(self, forget_member: bool = False) -> None:
        """The group moved on: join again before polling (with a new member id if `forget_member`)."""
        self.joined = False
        self.assigned, self.positions, self.epochs = [], {}, {}
        if forget_member:
            self.member_id, self.generation = "", -1


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


@dataclass
class TxnProducer:
    """A worker thread's transactional producer (transactional id ``kraftwerk-txn-<thread>``): its
    (id, epoch), next sequence per key, coordinators, and the write a crashed predecessor still had
    in flight (a zombie: ``(producer id, epoch, key, sequence, value)``), sent with the old epoch once
    the successor has fenced it."""

    transactional_id: str
    id: tuple[int, int] | None = None
    sequences: dict[str, int] = field(default_factory=dict)
    coordinator: str | None = None
    group_coordinator: str | None = None
    zombie: tuple[int, int, str, int, Any] | None = None

    def reset(self) -> None:
        """Start over: the next transaction re-inits (InitProducerId bumps the epoch, aborting an open one)."""
        self.id, self.sequences = None, {}


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


class QueueClient:
    """One worker process's client (sans-IO): a leader cache; exactly one request outstanding."""

    def __init__(self, workload: QueueWorkload, process: int, rng: random.Random, thread: int | None = None) -> None:
        self.workload = workload
        self.consumer = workload.consumer(process)
        self.rng = rng
        self.leaders: dict[str, str] = {}
        self.leader_epochs: dict[str, int] = {}  # the cached leader's epoch, as the metadata that named it said
        self.seen_epochs: dict[str, int] = {}  # the highest leader epoch any metadata answer named
        self.fetch_epoch = -1  # the current_leader_epoch of the outstanding fetch
        self.op: Op = {}
        self.stage = ""  # what the outstanding request is: metadata, send, poll, create, ready, pid, retry
        self.node: str | None = None  # where the outstanding request went
        self.prod = workload.producer(thread if thread is not None else ("process", process))
        self.batch: tuple[int, Any] | None = None  # this send's (sequence, value)
        self.retrying: tuple[int, Any] | None = None
        self.pending: Completion | None = None  # this send's outcome, while older batches are retried
        self.resend = False  # this send was refused out of order: resend it after the retries
        # a subscribed poll's progress: join attempts, keys still to fetch, what was read, errors
        self.joins = 0
        self.gkeys: list[str] = []
        self.gread: dict[str, list] = {}
        self.gerrors: list[str] = []
        self.committing: dict[str, Any] = {}  # the outstanding commit: {"generation": g, "offsets": {key: offset}}
        self.gassigned: dict[str, Any] | None = None  # the assignment this poll began (its `assigned` field)
        # --txn: the thread's transactional producer, this process's abort/crash draws, the running transaction
        self.txp = workload.txn_producer(thread if thread is not None else process)
        self.txn_rng = random.Random(f"txn-{workload.seed}-{thread}-{process}")
        self.t: _Txn | None = None
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
            self.t = _Txn([], init=True, start_positions=dict(self.consumer.positions))
            return self._txn_ready()
        if f == "poll" and key is None:
            return self._group_poll()
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
        leader = self.leaders.get(key) if f == "send" else self._fetch_leader(key)
        if leader is None:
            return self._request("metadata", self._random_node(), Metadata(TOPIC))
        return self._operate(leader)

    def _fetch_leader(self, key: str) -> str | None:
        """The leader to fetch `key` from: the cached one, unless a newer leader epoch is known than the
        metadata that named it (from another answer, or the epoch the position was read at or committed
        with). As a KIP-320 consumer, never fetch from a leader older than what the position has seen."""
        leader = self.leaders.get(key)
        if leader is None:
            return None
        need = max(self.seen_epochs.get(key, -1), self.consumer.epochs.get(key, -1))
        return leader if self.leader_epochs.get(key, -1) >= need else None

    def _fetch(self, key: str) -> Fetch:
        self.fetch_epoch = self.leader_epochs.get(key, -1)
        offset = self.consumer.positions.get(key, 0)
        return Fetch(TOPIC, partition_of(key), offset, leader_epoch=self.fetch_epoch)

    def _read_at(self, key: str) -> None:
        """An ok fetch: the position is now known at the fetch's leader epoch."""
        if self.fetch_epoch > self.consumer.epochs.get(key, -1):
            self.consumer.epochs[key] = self.fetch_epoch

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
        return self._request("poll", node, self._fetch(key))

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

    def _no_leader(self, key: str) -> str:
        """Why a fetch of `key` has no leader after a metadata answer."""
        return "stale-metadata" if key in self.leaders else "leader-not-available"

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
            if fetched.error == OFFSET_OUT_OF_RANGE:
                # the log was truncated below our position (auto.offset.reset=earliest); the answer is from a
                # leader of an epoch no older than any the position was read at (`_fetch_leader`)
                consumer.positions[key] = 0
            return self._done("fail", None, fetched.error_name)
        start = consumer.positions.get(key, 0)
        pairs = [[offset, decode_value(data)] for offset, data in fetched.records if offset >= start]
        self._read_at(key)
        consumer.polled.add(key)
        if pairs:
            consumer.positions[key] = pairs[-1][0] + 1
            consumer.at_end.discard(key)
        elif start >= fetched.high_watermark:
            consumer.at_end.add(key)
        return self._done("ok", pairs)

    # ------------------------------------------------------------------ --sub-via subscribe
    # A subscribed process is a member of GROUP: its polls (no key) join the group when needed
    # (FindCoordinator, JoinGroup, SyncGroup with the leader's range assignment, then the committed
    # offsets as positions), heartbeat when the last heartbeat is older than HEARTBEAT_INTERVAL_S,
    # and fetch every assigned partition; a poll's value is {key: [[offset, value], ...]}. `commit`
    # commits the positions of the assigned partitions with the member's generation (and does not
    # heartbeat first: a member that missed a rebalance commits with its old generation, which the
    # coordinator must refuse); its value is {"generation": g, "offsets": {key: offset}}.

    def _subscribe(self, value: Any) -> Step:
        c = self.consumer
        if c.subscribed and c.member_id and c.coordinator is not None:
            return self._request("g-leave", c.coordinator, LeaveGroup(GROUP, c.member_id))
        c.subscribe()
        c.member_id, c.generation = "", -1
        return self._done("ok", list(value))

    def _group_poll(self) -> Step:
        if not self.consumer.subscribed:
            return self._done("fail", None, "not-subscribed")
        self.joins, self.gkeys, self.gread, self.gerrors = 0, [], {}, []
        return self._ensure_member()

    def _now(self) -> int:
        return int(self.op.get("time") or 0)

    def _ensure_member(self) -> Step:
        c = self.consumer
        if c.coordinator is None:
            return self._request("g-find", self._random_node(), FindCoordinator(GROUP))
        if not c.joined:
            self.joins += 1
            if self.joins > MAX_JOINS:
                return self._done("fail", None, "rebalancing")
            body = JoinGroup(GROUP, c.member_id, SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS, TOPIC.encode())
            return self._request("g-join", c.coordinator, body, REBALANCE_TIMEOUT_MS / 1000 + self.workload.timeout_s)
        if self._now() - c.last_heartbeat >= int(HEARTBEAT_INTERVAL_S * gen.SECOND):
            return self._request("g-heartbeat", c.coordinator, Heartbeat(GROUP, c.generation, c.member_id))
        self.gkeys = list(c.assigned)
        return self._next_fetch()

    def _next_fetch(self) -> Step:
        c = self.consumer
        while self.gkeys:
            key = self.gkeys[0]
            leader = self._fetch_leader(key)
            if leader is None:
                return self._request("g-metadata", self._random_node(), Metadata(TOPIC))
            return self._request("g-fetch", leader, self._fetch(key))
        if self.gerrors and not self.gread:
            return self._done("fail", None, self.gerrors[0])
        if any(self.gread.values()):
            c.commit_due = True
        return self._done("ok", dict(self.gread), self.gerrors[0] if self.gerrors else None)

    def _commit(self) -> Step:
        c = self.consumer
        c.commit_due = False
        if not c.subscribed or not c.joined or c.coordinator is None:
            return self._done("fail", None, "not-a-member")
        offsets = tuple((partition_of(k), c.positions.get(k, 0)) for k in c.assigned)
        if not offsets:
            return self._done("ok", {"generation": c.generation, "offsets": {}})
        self.committing = {"generation": c.generation, "offsets": {k: c.positions.get(k, 0) for k in c.assigned}}
        epochs = tuple((partition_of(k), c.epochs.get(k, -1)) for k in c.assigned)
        body = CommitOffsets(GROUP, c.generation, c.member_id, TOPIC, offsets, epochs)
        return self._request("g-commit", c.coordinator, body)

    def _group_answer(self, answer: Reply | Failure) -> Step:
        c, stage = self.consumer, self.stage
        if stage == "g-leave":
            c.subscribe()
            c.member_id, c.generation = "", -1
            return self._done("ok", list(self.op.get("value") or ()))
        if stage in ("g-fetch", "g-metadata"):
            return self._group_fetched(answer)
        if isinstance(answer, Failure):
            c.coordinator = None
            if stage == "g-commit":  # it may have been applied: say what it tried to commit
                return self._done("info", self.committing, answer.reason)
            return self._done("fail", None, answer.reason)
        body = answer.body
        error = body.error
        if stage == "g-commit":
            if error == 0:
                return self._done("ok", self.committing)
            if error in REBALANCE_ERRORS or error == UNKNOWN_MEMBER_ID:
                c.rejoin(forget_member=error == UNKNOWN_MEMBER_ID)
                return self._done("fail", None, body.error_name)
            if error in COORDINATOR_ERRORS:
                c.coordinator = None
                if error != 14:  # not coordinator / not available: the append may have happened
                    return self._done("info", self.committing, body.error_name)
            return self._done("fail", None, body.error_name)
        if error in COORDINATOR_ERRORS:
            c.coordinator = None
            if stage == "g-find":
                return self._done("fail", None, body.error_name)
            return self._ensure_member()
        if stage == "g-find":
            c.coordinator = self._found(body, error)
            if c.coordinator is None:
                return self._done("fail", None, body.error_name if error else "unknown-coordinator")
            return self._ensure_member()
        if error == UNKNOWN_MEMBER_ID:
            c.rejoin(forget_member=True)
            return self._ensure_member()
        if error in REBALANCE_ERRORS:
            c.rejoin()
            return self._ensure_member()
        if stage == "g-join":
            if error == MEMBER_ID_REQUIRED:
                c.member_id = body.member_id
                return self._ensure_member()
            if error != 0:
                return self._done("fail", None, body.error_name)
            c.member_id, c.generation = body.member_id, body.generation
            assignments: tuple[tuple[str, bytes], ...] = ()
            if body.leader == body.member_id:
                plan = range_assignment([m for m, _ in body.members], self.workload.all_keys())
                assignments = tuple((m, json.dumps(ks).encode()) for m, ks in sorted(plan.items()))
            return self._request("g-sync", c.coordinator, SyncGroup(GROUP, c.generation, c.member_id, assignments))
        if stage == "g-sync":
            if error != 0:
                return self._done("fail", None, body.error_name)
            try:
                assigned = [str(k) for k in json.loads(body.assignment or b"[]")]
            except ValueError:
                return self._done("fail", None, "bad-assignment")
            c.assigned = assigned
            partitions = tuple(partition_of(k) for k in assigned)
            return self._request("g-offsets", c.coordinator, FetchOffsets(GROUP, TOPIC, partitions))
        if stage == "g-offsets":
            if error != 0:
                return self._done("fail", None, body.error_name)
            committed = {f"{TOPIC}-{p}": o for p, o in body.offsets}
            c.positions = {k: max(0, committed.get(k, -1)) for k in c.assigned}
            # the committed leader epoch: no fetch of a key goes to a leader older than the one it was read at
            epochs = {f"{TOPIC}-{p}": e for p, e in body.leader_epochs}
            c.epochs = {k: epochs[k] for k in c.assigned if committed.get(k, -1) >= 0 and epochs.get(k, -1) >= 0}
            # where each newly assigned partition starts, and the committed offset (-1: none) it came from
            self.gassigned = {
                "generation": c.generation,
                "start": dict(c.positions),
                "committed": {k: committed.get(k, -1) for k in c.assigned},
            }
            c.polled, c.at_end = set(), set()
            c.joined = True
            c.last_heartbeat = self._now()
            return self._ensure_member()
        # g-heartbeat
        if error != 0:
            return self._done("fail", None, body.error_name)
        c.last_heartbeat = self._now()
        return self._ensure_member()

    def _group_fetched(self, answer: Reply | Failure) -> Step:
        key = self.gkeys[0]
        c = self.consumer
        if isinstance(answer, Failure):
            self.leaders.pop(key, None)
            self.gerrors.append(answer.reason)
            self.gkeys.pop(0)
            return self._next_fetch()
        body = answer.body
        if self.stage == "g-metadata":
            self._learn(body)
            if self._fetch_leader(key) is None:
                self.gerrors.append(self._no_leader(key))
                self.gkeys.pop(0)
            return self._next_fetch()
        self.gkeys.pop(0)
        if body.error != 0:
            if body.error in REFRESH:
                self.leaders.pop(key, None)
            if body.error == OFFSET_OUT_OF_RANGE:  # from a leader no older than the position (`_fetch_leader`)
                c.positions[key] = 0
            self.gerrors.append(body.error_name)
            return self._next_fetch()
        start = c.positions.get(key, 0)
        pairs = [[offset, decode_value(data)] for offset, data in body.records if offset >= start]
        self._read_at(key)
        if pairs:
            c.positions[key] = pairs[-1][0] + 1
        self.gread[key] = pairs
        return self._next_fetch()

    # ------------------------------------------------------------------ --txn
    # A `txn` op runs its micro-ops in one transaction of the thread's transactional producer: first
    # FindCoordinator (key type 1) and InitProducerId when the producer has no id (the epoch bump
    # aborts what a predecessor left open and fences it), and the zombie write of a crashed
    # predecessor, with its old epoch; then per send a Metadata when the leader is not known,
    # AddPartitionsToTxn for a partition new to the transaction and a transactional Produce; per poll
    # a read_committed Fetch of every assigned partition (value {key: [[offset, value], ...]}); then,
    # if the polls read something, AddOffsetsToTxn and TxnOffsetCommit of the positions (group
    # TXN_GROUP), and EndTxn. Outcomes: `ok` once EndTxn commit is answered; `fail` when no EndTxn
    # commit was ever sent, or every one was refused (aborted by choice, by a crash of the producer, or
    # after an error: EndTxn abort, or a re-init by the next transaction when a write is in doubt);
    # `info` when an EndTxn commit may have been applied. An aborted or unknown transaction puts the
    # consumer's positions back where they were (as a consumer rewinds to its committed offsets).
    # A coordinator that answers COORDINATOR_LOAD_IN_PROGRESS is asked the same again after a backoff
    # (0.1 s doubling to 1 s, LOAD_TRIES times), and one busy ending the previous transaction
    # (CONCURRENT_TRANSACTIONS) after BUSY_BACKOFF_S, as Kafka's producer does.
    # The final drain's txn ops only poll, without a transaction.

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

    def _found(self, body: Any, error: int) -> str | None:
        """The coordinator a FindCoordinator answer names, if it is one of the test's nodes."""
        node = body.node if body is not None and error == 0 else None
        return node if node in self.workload.nodes else None

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
            if fetched.error in REFRESH:
                self.leaders.pop(key, None)
            if fetched.error == OFFSET_OUT_OF_RANGE:
                c.positions[key] = 0
            return self._txn_next()
        start = c.positions.get(key, 0)
        pairs = [[offset, decode_value(data)] for offset, data in fetched.records if offset >= start]
        c.polled.add(key)
        if pairs:
            c.positions[key] = pairs[-1][0] + 1
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
    f: str  # send, poll, assign, subscribe, commit or crash
    key: str | None
    value: Any
    delay_s: float = 0.0  # not before this long from now (a slow consumer's processing)

    def as_op(self) -> Op:
        listed = self.f in ("assign", "subscribe")
        value = [list(m) for m in self.value] if self.f == "txn" else self.value
        return {"f": self.f, "key": self.key, "value": list(self.value) if listed else value}


class QueueGenerator:
    """Draws operations: mostly sends and polls on the process's assigned keys, sometimes a new assignment."""

    def __init__(
        self, rng: random.Random, partitions: int, assign_p: float = 0.05, sub_via: str = "assign", txn: bool = False
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be positive")
        self.rng = rng
        self.keys = keys(partitions)
        self.assign_p = assign_p
        self.sub_via = sub_via
        self.txn = txn
        self._next_value = 0

    def assignment(self) -> list[str]:
        rng = self.rng
        chosen = [k for k in self.keys if rng.random() < 0.5]
        return chosen or [self.keys[rng.randrange(len(self.keys))]]

    def next(self, assigned: Sequence[str], subscribed: bool = False, commit_due: bool = False) -> QueueOp:
        """The next operation for a process assigned `assigned` (or, with --sub-via subscribe, that has
        `subscribed`; one whose last poll read something commits next, as commitSync after a poll)."""
        rng = self.rng
        if self.sub_via == "subscribe":
            if subscribed and commit_due:
                slow = rng.random() < SLOW_P
                return QueueOp("commit", None, None, rng.uniform(*SLOW_S) if slow else 0.0)
            return self._next_subscribed(subscribed)
        if not assigned or rng.random() < self.assign_p:
            return QueueOp("assign", None, self.assignment())
        if self.txn:
            return QueueOp("txn", None, self.transaction())
        if rng.random() < 0.5:
            self._next_value += 1
            return QueueOp("send", self.keys[rng.randrange(len(self.keys))], self._next_value)
        return QueueOp("poll", assigned[rng.randrange(len(assigned))], None)

    def transaction(self) -> list[list[Any]]:
        """1 to MAX_MOPS micro-ops, each a send of a fresh value to any key or a poll (Jepsen's txn)."""
        rng = self.rng
        mops: list[list[Any]] = []
        for _ in range(rng.randint(1, MAX_MOPS)):
            if rng.random() < 0.5:
                self._next_value += 1
                mops.append(["send", self.keys[rng.randrange(len(self.keys))], self._next_value])
            else:
                mops.append(["poll"])
        return mops

    def _next_subscribed(self, subscribed: bool) -> QueueOp:
        rng = self.rng
        r = rng.random()
        if not subscribed or r < SUBSCRIBE_P:
            return QueueOp("subscribe", None, list(self.keys))
        if r < SUBSCRIBE_P + CRASH_P:
            return QueueOp("crash", None, None)
        if rng.random() < 0.5:
            self._next_value += 1
            return QueueOp("send", self.keys[rng.randrange(len(self.keys))], self._next_value)
        return QueueOp("commit" if rng.random() < COMMIT_P else "poll", None, None)


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


class _TxnInit(gen.Generator):
    """One thread's `txn-init` (its producer's coordinator, producer id and the group's coordinator),
    asked again SETUP_RETRY_S after a failure until it is ok. Immutable: `each_thread` copies it."""

    def __init__(self, workload: QueueWorkload, busy: bool = False, not_before: int = 0) -> None:
        self.workload, self.busy, self.not_before = workload, busy, not_before

    def op(self, ctx: gen.Context) -> gen.Result:
        if self.busy or not ctx.free:
            return gen.PENDING, self
        out = gen.fill({"f": "txn-init", "key": None, "value": None, "time": max(ctx.time, self.not_before)}, ctx)
        return out, self if out is gen.PENDING else _TxnInit(self.workload, True, self.not_before)

    def update(self, ctx: gen.Context, event: Op) -> gen.Generator | None:
        typ = event.get("type")
        if typ == "ok":
            return None
        if typ not in ("fail", "info"):
            return self
        self.workload.setup_error = f"txn-init: {event.get('error')}"
        return _TxnInit(self.workload, False, event["time"] + int(SETUP_RETRY_S * gen.SECOND))


class _Drain(gen.Generator):
    """One thread's final phase: assign its partitions (positions back to 0), then poll each to its end.

    A key is done once it has been polled ok since the assign and the process has read past the
    highest acknowledged offset, or its end (an empty poll at the high watermark) has not moved for
    END_QUIET_S, which is what a lost acknowledged tail looks like. Every key is polled ok at least
    once, so a run whose sends all failed is still observed (valid), not unknown. With --txn, a key
    whose last read_committed poll stopped at an open transaction (its last stable offset below the
    high watermark) is not done: the records after it may be committed (a transaction whose EndTxn
    ended `info`, or an `ok` one behind a transaction left open by a crash or an error), and become
    visible once the coordinator completes or times out the open one (Jepsen's final polls likewise
    go on until every known offset has been seen; the final phase's time limit bounds the wait).
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
            if key in consumer.polled and key not in consumer.held and (read_all or quiet):
                self.keys.pop(0)
                continue
            pause = int(END_POLL_S * gen.SECOND) if ended is not None else 0
            poll = {"f": "poll", "key": key, "value": None, "process": process, "time": ctx.time + pause}
            if self.workload.txn:  # a read_committed poll of every assigned key, as the checker reads txn ops
                self.workload.draining = True
                poll = {**poll, "f": "txn", "key": None, "value": [["poll"]]}
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
        sub_via: str = "assign",
        txn: bool = False,
        assignment: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("the queue workload needs at least one node")
        if sub_via not in SUB_VIA:
            raise ValueError(f"sub_via must be one of {', '.join(SUB_VIA)}, got {sub_via!r}")
        if txn and (sub_via != "assign" or (acks if isinstance(acks, int) else ACKS[acks]) != -1):
            raise ValueError("txn needs acks all and sub_via assign")
        self.sub_via = sub_via
        self.txn = txn
        self.model = TXN_MODEL if txn else MODEL
        self.draining = False  # the final drain has begun (its txn ops poll without a transaction)
        self.txn_producers: dict[Any, TxnProducer] = {}
        self.nodes = sorted(nodes, key=lambda n: (len(n), n))
        self.seed = seed
        self.timeout_s = timeout_s
        self.acks = acks if isinstance(acks, int) else ACKS[acks]
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.min_isr = min_isr
        self.unclean = unclean
        self.assignment = validate_assignment(assignment, nodes, partitions, replication_factor)
        self.idempotent = idempotent and self.acks == -1  # as Kafka clients: only with acks=all
        self.ops = QueueGenerator(random.Random(f"workload-{seed}"), partitions, sub_via=sub_via, txn=txn)
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
            **({"sub-via": self.sub_via} if self.sub_via != "assign" else {}),
            **({"txn": True} if self.txn else {}),
        }

    def consumer(self, process: int) -> Consumer:
        return self.consumers.setdefault(process, Consumer())

    def producer(self, owner: Any) -> Producer:
        return self.producers.setdefault(owner, Producer())

    def txn_producer(self, thread: Any) -> TxnProducer:
        return self.txn_producers.setdefault(thread, TxnProducer(f"{TXN_ID_PREFIX}{thread}"))

    def note_ack(self, key: str, offset: int) -> None:
        if offset > self.acked_max.get(key, -1):
            self.acked_max[key] = offset

    def all_keys(self) -> list[str]:
        return keys(self.partitions)

    def place(self, assignment: Mapping[int, Sequence[str]] | None) -> None:
        """Create the topic with this replica placement (partition -> replica nodes, leader first) instead of
        the controller's; checked as the constructor's `assignment`."""
        self.assignment = validate_assignment(assignment, self.nodes, self.partitions, self.replication_factor)

    def create_topic(self) -> CreateTopic:
        configs = (
            ("min.insync.replicas", str(self.min_isr)),
            ("unclean.leader.election.enable", "true" if self.unclean else "false"),
        )
        assignments = tuple((p, tuple(r)) for p, r in sorted(self.assignment.items()))
        return CreateTopic(TOPIC, self.partitions, self.replication_factor, configs, assignments=assignments)

    # ------------------------------------------------------------------ phases
    def _next(self, ctx: gen.Context) -> Op | None:
        # the op is drawn for one process (its assignment decides between poll and assign), so the
        # process is chosen here rather than by `gen.fill`; Fn asks only when some thread is free
        process = ctx.some_free_process()
        consumer = self.consumer(process)
        op = self.ops.next(consumer.assigned, consumer.subscribed, consumer.commit_due)
        out = {**op.as_op(), "process": process}
        if op.delay_s:
            out["time"] = ctx.time + int(op.delay_s * gen.SECOND)
        return out

    def generator(self) -> gen.Generator:
        return gen.Fn(self._next)

    def setup(self) -> gen.Generator | None:
        """Create the topic, then wait until every node sees every partition led (not in the history).
        --txn: then every thread inits its transactional producer, as a Kafka application calls
        initTransactions() before its first transaction."""
        topic = gen.on_threads(lambda t: t == 0, _Setup(self))
        return gen.phases(topic, gen.each_thread(_TxnInit(self))) if self.txn else topic

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
    idempotent, sub-via, txn)."""
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
        sub_via=str(options.get("sub-via", "assign")),
        txn=bool(options.get("txn", False)),
    )
