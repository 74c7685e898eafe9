"""The queue workload itself: its options, the per-process and per-thread client state it keeps, and
its phases (setup, main-phase generator, final drain) and clients."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from workloads import generator as gen
from workloads.protocol import Op
from workloads.queue.bodies import CreateTopic
from workloads.queue.client import QueueClient
from workloads.queue.consumer import Drain
from workloads.queue.ops import QueueGenerator
from workloads.queue.setup import TopicSetup
from workloads.queue.state import Consumer, Producer, TxnProducer
from workloads.queue.topic import TOPIC, keys, validate_assignment
from workloads.queue.transactions import TXN_ID_PREFIX, TxnInit

NAME = "queue"
MODEL = "queue"
TXN_MODEL = "txn-queue"  # --txn: judged by checkers.txn_queue
ACKS = {"all": -1, "1": 1, "0": 0, "-1": -1}
SUB_VIA = ("assign", "subscribe")


class QueueWorkload:
    """A topic `t0` of `partitions` partitions on `nodes`: unique sends and polls (checker model `queue`).

    Its clients and its setup and drain generators see it as a `workloads.queue.state.QueueState`."""

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
        topic = gen.on_threads(lambda t: t == 0, TopicSetup(self))
        return gen.phases(topic, gen.each_thread(TxnInit(self))) if self.txn else topic

    def final(self, keys: Sequence[Any], threads: int) -> gen.Generator | None:
        """Every partition (not only the ones the history names) drained by the client threads."""
        every = self.all_keys()
        per_thread = [
            gen.on_threads(lambda x, t=t: x == t, Drain(self, t, every[t::threads]))
            for t in range(min(threads, len(every)))
        ]
        return gen.any_of(*per_thread) if per_thread else None

    def client(self, thread: int, process: int) -> QueueClient:
        return QueueClient(self, process, random.Random(f"client-{self.seed}-{thread}-{process}"), thread)
