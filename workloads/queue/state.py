"""What the queue's clients share with the workload: the client state it keeps per process and per worker
thread (`Consumer`, `Producer`, `TxnProducer`), and `QueueState`, everything the clients and the setup and
drain generators use of the workload itself.

The clients are typed against `QueueState`, not `workloads.queue.workload.QueueWorkload`, which imports
them: `QueueWorkload` satisfies it structurally (tests/workloads/test_queue.py checks that it does, and
that the clients use nothing else of it), so no module of the package imports the one above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from workloads.queue.bodies import CreateTopic


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


class QueueState(Protocol):
    """The queue workload as its clients (`workloads.queue.client` and its mixins) and its setup and drain
    generators use it: the topic and producer settings, the client state it keeps, and what they report
    back to it. `workloads.queue.workload.QueueWorkload` is the one implementation."""

    @property
    def nodes(self) -> Sequence[str]: ...
    @property
    def seed(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...  # a request's timeout
    @property
    def acks(self) -> int: ...  # -1 (all), 0 or 1
    @property
    def idempotent(self) -> bool: ...  # sends go through the thread's idempotent producer
    @property
    def txn(self) -> bool: ...
    @property
    def partitions(self) -> int: ...
    @property
    def replication_factor(self) -> int: ...
    @property
    def min_isr(self) -> int: ...
    @property
    def acked_max(self) -> Mapping[str, int]: ...  # the highest acknowledged offset per key (`note_ack`)

    draining: bool  # the final drain has begun (its txn ops poll without a transaction)
    partition_leaders: dict[str, str]  # the setup's last readiness check: key -> leader
    setup_error: str  # why the setup has not succeeded yet

    def consumer(self, process: int) -> Consumer: ...
    def producer(self, owner: Any) -> Producer: ...
    def txn_producer(self, thread: Any) -> TxnProducer: ...
    def note_ack(self, key: str, offset: int) -> None: ...
    def all_keys(self) -> list[str]: ...
    def create_topic(self) -> CreateTopic: ...
