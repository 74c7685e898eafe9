"""The `Runtime` port: where a test's phases run. `harness.core.run.run_test` drives every phase through it.

Two runtimes implement it: `harness.sim.runtime.SimRuntime` (the deterministic simulator: virtual time,
faults as events on its scheduler, a stored schedule replayed as its SimPlan's operations) and
`harness.real.runtime.RealRuntime` (a real cluster on a backend: real time on an asyncio loop, faults driven
through the interpreter's nemesis thread, a stored schedule replayed as a `ReplayMain`). What differs
between them lives behind these methods; the sequence of phases, their time limits
(`harness.core.phases`), what is recorded about them and the verdict live in `run_test` only.

Times are nanoseconds in the history's time base (`now`): the simulator's virtual time since the nodes
booted; on a real cluster the monotonic clock since the main phase began (nothing is recorded before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from types import TracebackType

    from harness.core.recorder import Recorder
    from workloads.generator import Generator
    from workloads.protocol import Workload

# how the recovery phase ends (a runtime's `recovery`)
SETTLE_READY = "settle-ready"  # at least the settle, and until a leader is known to every running node
PAUSE = "pause"  # the settle only: simulator runs stored before schedule.json's "recover" (a fixed 10 s)


class NotReady(RuntimeError):
    """The cluster did not elect a leader known to every node, or did not finish the workload's setup, in time."""


@dataclass
class Collected:
    """What a runtime gathers from its nodes once the final reads are done."""

    events: list[dict[str, Any]]  # every node's events, merged (events.jsonl)
    logs: dict[str, list[dict[str, Any]]]  # each node's committed raft log (logs/<node>.jsonl)
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)  # brokers' batches
    invariants: dict[str, Any] | None = None  # the simulator's invariants result (None on real clusters)
    node_fatal: list[dict[str, Any]] = field(default_factory=list)  # nodes that stopped on an illegal state
    notes: dict[str, Any] = field(default_factory=dict)  # what could not be gathered, and why


class Runtime(Protocol):
    """A cluster that runs one test's phases (see the module docstring)."""

    names: Sequence[str]  # the nodes, n1 … nN
    workload: Workload  # the test's workload, made for these nodes with the phases' client op timeout
    recovery: str  # SETTLE_READY, or PAUSE for a stored simulator run that predates it
    stats: dict[str, Any]  # what the runtime measured (results.json "run")

    def __enter__(self) -> Runtime:
        """Create the cluster: hosts, the DB's and the nemesis's setup, every node started."""
        ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        """Tear the cluster down (every fault healed, nodes stopped, hosts removed) on every way out."""

    def now(self) -> int:
        """Nanoseconds in the history's time base."""
        ...

    def log(self, message: str) -> None:
        """Tell the user (a real run's progress output; the simulator's command line)."""

    def set_phase(self, name: str, seconds: float | None = None) -> None:
        """The run enters phase `name`, which lasts at most `seconds` (a progress display shows it)."""

    def wait_ready(self, timeout: float, nodes: Sequence[str] | None = None) -> str | None:
        """Wait until a leader is known to every node (of `nodes`); that leader. NotReady after `timeout` s."""
        ...

    def prepare(self, leader: str | None) -> None:
        """Before the workload's setup: a stored schedule is fitted to the fresh cluster's `leader`."""

    def setup(self, generator: Generator, timeout: float) -> None:
        """Run the workload's setup on clients of its own (not in the history); NotReady after `timeout` s."""

    def main(self, recorder: Recorder, time_limit: float) -> int:
        """Run the main phase (clients and faults, or the stored schedule) for `time_limit` seconds, recording
        into `recorder`; the time it began. Returns once it is over."""
        ...

    def heal(self) -> None:
        """Heal every fault (each heal recorded in the history)."""

    def sleep_until(self, time: int) -> None:
        """Let time pass until `time` (ns, the history's time base); nothing if it has passed."""

    def running(self) -> list[str]:
        """The nodes whose process runs (a node that stopped itself does not)."""
        ...

    def ops(self) -> list[dict[str, Any]]:
        """The client operations completed so far, as schedule.json stores them ({"at", "client", "f", "key",
        "value", "node"}, "at" counted from the main phase's start)."""
        ...

    def final(self, generator: Generator | None, seconds: float) -> None:
        """Run the final reads for at most `seconds`; operations still in flight then complete or time out."""

    def collect(self) -> Collected:
        """Gather what the nodes wrote (the nodes are stopped first on a real cluster)."""
        ...

    def schedule_document(self) -> dict[str, Any]:
        """schedule.json: what the run did (every fault and client operation with its time and targets)."""
        ...
