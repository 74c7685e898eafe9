"""The workloads by name: what each is, its options, how its history is judged, and how to make it.

Adding a workload is one module plus one line in `KINDS`. A workload's options class (frozen, its fields
declared with `workloads.options.option`) knows three things about the workload:

- `problem(nodes)`: what is wrong with these options on a cluster of `nodes` (naming the option), or None;
- `checking()`: how the history is judged (`checkers.registry.Checking`: model, allowed anomalies, …);
- `exercises()`: the parts of a system its requests reach, in the words a DB uses for where its seeded bugs
  live: "raft" (the quorum), "kv" (a register state machine), "broker" (partition logs), "idempotence" (the
  idempotent producer's deduplication), "group" (the group coordinator), "txn" (transactions), "storage"
  (log recovery).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from checkers.registry import Checking
from workloads import register
from workloads.options import to_argv
from workloads.protocol import Workload
from workloads.queue import options as queue_options


class WorkloadOptions(Protocol):
    """What every workload's options class offers (see the module docstring)."""

    def problem(self, nodes: int) -> str | None: ...

    def checking(self) -> Checking: ...

    def exercises(self) -> frozenset[str]: ...


@dataclass(frozen=True)
class WorkloadKind:
    """One workload: its name, summary, the client API it needs from a DB, its options and its factory.
    `variants`: options values that reach parts of a system its default options do not."""

    name: str
    summary: str
    api: str  # "kv" (register requests) or "kafka" (the Kafka protocol): a DB serves it or not
    options: type
    factory: Callable[[Sequence[str], int, Any, float], Workload]
    variants: tuple[Any, ...] = ()

    def make(self, nodes: Sequence[str], seed: int, options: Any, timeout_s: float) -> Workload:
        """The workload for a cluster of `nodes` (names such as "n1"), the test's seed and options."""
        if not isinstance(options, self.options):
            raise TypeError(f"the {self.name} workload takes {self.options.__name__}, not {type(options).__name__}")
        return self.factory(list(nodes), seed, options, timeout_s)


KINDS: dict[str, WorkloadKind] = {
    k.name: k
    for k in (
        WorkloadKind(
            "register",
            "linearizable compare-and-set registers (read, write, cas), judged by the linearizability checker",
            "kv",
            register.RegisterOptions,
            register.make,
        ),
        WorkloadKind(
            "queue",
            "a Kafka topic: unique sends and polls (or transactions of them), judged by the queue checkers",
            "kafka",
            queue_options.QueueOptions,
            queue_options.make,
            queue_options.VARIANTS,
        ),
    )
}
NAMES: tuple[str, ...] = tuple(KINDS)


def kind(name: str) -> WorkloadKind:
    """The workload `name`; ValueError naming the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r} (known: {', '.join(NAMES)})") from None


def reaching(part: str) -> list[str]:
    """The workloads (as command-line words: `--workload queue --txn`) whose requests reach `part`."""
    out: list[str] = []
    for k in KINDS.values():
        for options in (k.options(), *k.variants):
            if part in options.exercises():
                out.append(" ".join(["--workload", k.name, *to_argv(options)]))
                break
    return out
