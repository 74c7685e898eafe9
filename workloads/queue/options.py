"""The queue workload's options: the topic, the producer and the consumers, and how the history is judged.

Kafka's safe profile by default (acks all, replication factor 3, min ISR 2, no unclean election): any
anomaly is then a finding. Weaker settings lose data by design; `--allow` names the anomalies the test
expects of them, so they do not make the run invalid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checkers.queue import ANOMALY_TYPES
from checkers.registry import Checking
from checkers.txn_queue import ANOMALY_TYPES as TXN_ANOMALY_TYPES
from workloads.options import option
from workloads.queue.workload import ACKS, MODEL, SUB_VIA, TXN_MODEL, QueueWorkload

GROUP = "queue workload (Kafka's safe profile by default: any anomaly is a finding)"
ACKS_CHOICES = ("all", "1", "0")


def _acks(value: Any) -> str:
    """test.json's acks: "all", "1", "0", or the producer's number (-1, 1, 0) as older runs wrote it."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = {-1: "all", 1: "1", 0: "0"}.get(value, str(value))
    if not isinstance(value, str):
        raise TypeError(value)
    return value


@dataclass(frozen=True)
class QueueOptions:
    """Every option of the queue workload."""

    acks: str = option("all", "--acks", "producer acks", choices=ACKS_CHOICES, group=GROUP, decode=_acks)
    min_isr: int = option(2, "--min-isr", "min.insync.replicas", metavar="N", group=GROUP)
    replication_factor: int = option(3, "--replication-factor", "replicas per partition", metavar="N", group=GROUP)
    partitions: int = option(3, "--partitions", "partitions of the topic", metavar="N", group=GROUP)
    unclean: bool = option(False, "--unclean", "unclean.leader.election.enable=true", group=GROUP)
    sub_via: str = option(
        "assign",
        "--sub-via",
        "how consumers get partitions: assign (manual) or subscribe (a consumer group: rebalances, committed "
        "offsets; poll-skip and nonmonotonic-poll are then allowed, as in Jepsen)",
        choices=SUB_VIA,
        group=GROUP,
    )
    txn: bool = option(
        False,
        "--txn",
        "transactions (Jepsen's :txn): each op is up to 4 sends and polls in one Kafka transaction of the thread's "
        "transactional producer, polls read_committed, consumer offsets committed in the transaction; some abort "
        "by choice, some by a producer crash (its successor fences it); judged by the transactional checker "
        "(G0/G1c cycles, aborted reads, …). Needs --acks all and --sub-via assign",
        group=GROUP,
    )
    allow: tuple[str, ...] = option(
        (),
        "--allow",
        "a queue anomaly that does not make the run invalid (repeatable; e.g. lost-write with --acks 1)",
        kind="repeat",
        metavar="ANOMALY",
        group=GROUP,
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", tuple(self.allow))

    @property
    def acks_value(self) -> int:
        """--acks as the producer sends it (-1 for all)."""
        return ACKS[self.acks]

    def problem(self, nodes: int) -> str | None:
        """What is wrong with these options on a cluster of `nodes` (naming the option), or None."""
        if self.acks not in ACKS_CHOICES:
            return f"--acks must be one of {', '.join(ACKS_CHOICES)}, got {self.acks!r}"
        if not 1 <= self.replication_factor <= nodes:
            return f"--replication-factor must be between 1 and --nodes ({nodes}), got {self.replication_factor}"
        if not 1 <= self.min_isr <= self.replication_factor:
            return f"--min-isr must be between 1 and --replication-factor, got {self.min_isr}"
        if not 1 <= self.partitions <= 100:
            return f"--partitions must be between 1 and 100, got {self.partitions}"
        if self.sub_via not in SUB_VIA:
            return f"--sub-via must be one of {', '.join(SUB_VIA)}, got {self.sub_via!r}"
        if self.txn and self.sub_via != "assign":
            return "--txn works with --sub-via assign only (transactional consumers here assign their partitions)"
        if self.txn and self.acks != "all":
            return f"--txn needs --acks all (a transactional producer is idempotent), got --acks {self.acks}"
        known = TXN_ANOMALY_TYPES if self.txn else ANOMALY_TYPES
        bad = sorted(set(self.allow) - set(known))
        if bad:
            kind = "transactional queue" if self.txn else "queue"
            return f"--allow {', '.join(bad)}: not a {kind} anomaly ({', '.join(known)})"
        return None

    def checking(self) -> Checking:
        """The queue checker (or the transactional one with --txn: offsets always give ww edges here, Jepsen's
        --ww-deps), with the anomalies the test allows; a producer `crash` never ends ok by design."""
        if self.txn:
            return Checking(TXN_MODEL, allow=self.allow, ww_deps=True)
        return Checking(MODEL, allow=self.allow, never_ok=("crash",))

    def exercises(self) -> frozenset[str]:
        """The parts of a system its requests reach: the quorum and the partition logs always, the idempotent
        producer's deduplication with acks all, the group coordinator with --sub-via subscribe, the
        transaction coordinator with --txn."""
        parts = {"raft", "broker", "storage"}
        if self.acks == "all":
            parts.add("idempotence")
        if self.sub_via == "subscribe":
            parts.add("group")
        if self.txn:
            parts.add("txn")
        return frozenset(parts)


# options that reach parts of a system the default options do not (workloads.registry names them for a bug)
VARIANTS = (QueueOptions(sub_via="subscribe"), QueueOptions(txn=True))


def make(nodes: Sequence[str], seed: int, options: QueueOptions, timeout_s: float) -> QueueWorkload:
    """The workload of a test (workloads.registry)."""
    return QueueWorkload(
        nodes,
        seed,
        timeout_s=timeout_s,
        acks=options.acks,
        partitions=options.partitions,
        replication_factor=options.replication_factor,
        min_isr=options.min_isr,
        unclean=options.unclean,
        sub_via=options.sub_via,
        txn=options.txn,
    )
