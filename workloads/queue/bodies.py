"""The queue workload's request and reply bodies: plain values its client sends and receives.

They are the workload's own; a transport translates them to the system under test (the simulator's
broker messages, or the Kafka wire protocol). `REQUESTS` lists every request body a transport must
carry: the topic's (Metadata, Produce, Fetch, CreateTopic, InitProducerId), the group coordinator's
of ``--sub-via subscribe`` and the transaction coordinator's of ``--txn``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PRODUCE_TIMEOUT_MS = 1500  # the broker's wait for acks=all
FETCH_MAX_WAIT_MS = 100
CREATE_TIMEOUT_MS = 5000


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
