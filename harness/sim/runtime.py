"""`SimRuntime`: the simulator as a `harness.core.runtime.Runtime`, on which `harness.core.run.run_test` runs
a test's phases in virtual time.

What is the simulator's own, behind the port: time passes by running the scheduler's events; the
schedule's faults are events on that scheduler (no nemesis thread), at the main phase's start plus their
times; a stored run's client operations (its SimPlan) replace the workload's generator; and the way a
stored run was simulated (SimPlan's modes, recorded in schedule.json) is honoured — register runs stored
with "start": "boot" start their main phase at boot without waiting for a leader, runs stored before
"recover" wait a fixed pause after the heal (`recovery` PAUSE). When it waits for the cluster after the
heal, it checks first: a cluster that is ready when the settle ends starts its final reads at once, so the
history is the one the fixed pause gave.

    result = SimRuntime(spec).run()             # every phase, unjudged (tests, benchmarks)
    run = run_test(spec, SimRuntime(spec))      # judged: what `kraftwerk test --backend sim` does
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from harness.core.interpreter import Core, client_phase
from harness.core.phases import PHASES
from harness.core.recorder import Recorder
from harness.core.run import Run, run_phases
from harness.core.runtime import Collected, NotReady
from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan, SimResult, Simulation, schedule_document
from harness.sim.engine import MS, SECOND
from harness.sim.interpreter import SimInterpreter
from workloads import generator as gen


class SimRuntime(Simulation):
    """The simulated cluster of `spec` (and `plan`) as a Runtime; `say` hears what a real run's progress
    output would say (nothing by default)."""

    def __init__(
        self,
        spec: TestSpec,
        plan: SimPlan | None = None,
        history_path: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(spec, plan)
        self.history_path = history_path  # where `run()` streams the history
        self.say = say
        self.recovery = self.plan.recover
        self.stats: dict[str, Any] = {}
        # register runs stored before "start": "ready" began their main phase at boot (queue runs always waited)
        self.waits = self.plan.start == "ready" or self.workload.setup() is not None
        self.core: Core | None = None
        self.interpreter: SimInterpreter | None = None
        self._started = 0.0

    def run(self) -> SimResult:
        """Every phase of the test (harness.core.run.run_phases), unjudged."""
        return self.result(run_phases(self.spec, self, self.history_path))

    def result(self, run: Run) -> SimResult:
        """The simulator's view of `run`, a run of this runtime."""
        c = run.collected
        return SimResult(
            run.recorder,
            c.events,
            c.logs,
            run.invariants,  # type: ignore[arg-type]  # the simulator always has its invariants
            self.schedule,
            self.op_log,
            run.stats,
            self.assignment,
            self.main_start,
        )

    # ------------------------------------------------------------------ the Runtime port
    def __enter__(self) -> SimRuntime:
        self._started = time.perf_counter()
        for node in self.nodes.values():
            node.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def now(self) -> int:
        return self.sched.now

    def log(self, message: str) -> None:
        if self.say is not None:
            self.say(message)

    def set_phase(self, name: str, seconds: float | None = None) -> None:
        self.phase = name

    def wait_ready(self, timeout: float, nodes: Sequence[str] | None = None) -> str | None:
        """Run until a leader is known to every node (of `nodes`). The fresh cluster's events run until then
        (a register run stored with "start": "boot" does not wait); after the heal the cluster is checked
        first, so that one ready when the settle ends runs no event here."""
        if self.core is None and not self.waits:
            return None
        ready = lambda: self.cluster_ready(nodes)  # noqa: E731
        if self.core is None or not ready():
            self.sched.run_until(self.sched.now + int(timeout * SECOND), stop=ready)
            if not ready():
                raise NotReady(f"no leader known to every node within {timeout:g} s")
        leader = self.leader()
        return leader.name if leader is not None else None

    def prepare(self, leader: str | None) -> None:
        return None  # a stored run's operations and faults need no fitting: the same seed, the same cluster

    def setup(self, generator: gen.Generator, timeout: float) -> None:
        """The workload's setup on clients of its own (their operations are not part of the history)."""
        clock = lambda: self.sched.now  # noqa: E731
        core = Core(self.spec.concurrency, Recorder(clock), clock, nemesis=False)
        SimInterpreter(core, self.sched, self.transport, self.workload.client).start(gen.clients(generator))
        self.sched.run_until(self.sched.now + int(timeout * SECOND), stop=lambda: core.finished)
        if not core.finished:
            why = getattr(self.workload, "setup_error", "")
            raise NotReady(f"the {self.workload.name} workload's setup did not finish in {timeout:g} s: {why}")

    def main(self, recorder: Recorder, time_limit: float) -> int:
        """The clients' operations (the workload's, or the plan's) while the schedule's faults fire as events
        on the scheduler, from the main phase's start."""
        self.recorder = recorder
        clock = lambda: self.sched.now  # noqa: E731
        # no nemesis thread: the simulator's faults come from the scheduler, at the schedule's times
        self.core = Core(self.spec.concurrency, recorder, clock, rng=self._rng("interpreter"), nemesis=False)
        self.interpreter = SimInterpreter(self.core, self.sched, self.transport, self.workload.client)
        limit = int(time_limit * SECOND)
        if self.waits:
            if self.plan.ready_delay:
                self.sched.run_until(self.sched.now + self.plan.ready_delay)
            self.main_start = self.sched.now
            self.assignment = self.replica_assignment()
        self.main_end = self.main_start + limit
        for event in self.schedule:
            if event["at"] < limit:
                self.sched.at(self.main_start + event["at"], self._fault, event)
        self.core.ops_origin = self.main_start
        self.interpreter.start(self._main_generator(time_limit))
        self.sched.run_until(self.main_end)
        return self.main_start

    def _main_generator(self, time_limit: float) -> gen.Generator:
        """The clients' main phase: the workload's operations at the runner's rate, or a stored plan."""
        if self.plans is None:
            return client_phase(self.workload, time_limit, self.spec.rate)
        limit = int(time_limit * SECOND)
        lanes = {slot: [step for step in steps if step["at"] < limit] for slot, steps in self.plans.items()}
        return gen.clients(gen.plan(lanes, time_limit))

    def heal(self) -> None:
        self._heal_all()

    def sleep_until(self, time: int) -> None:
        self.sched.run_until(time)

    def running(self) -> list[str]:
        return [n.name for n in self.nodes.values() if n.alive]

    def ops(self) -> list[dict[str, Any]]:
        return self.core.ops if self.core is not None else []

    def final(self, generator: gen.Generator | None, seconds: float) -> None:
        """The final reads until they are done or `seconds` pass; then operations still in flight get the
        client timeout to complete, so the history has no loose ends."""
        assert self.core is not None and self.interpreter is not None
        limit = int(self.spec.time_limit * SECOND)
        self.op_log = sorted((o for o in self.core.ops if o["at"] < limit), key=lambda o: o["at"])
        self.final_end = self.sched.now + int(seconds * SECOND)
        self.core.rng = self._rng("interpreter-final")  # the same whether the main phase followed a plan or not
        self.interpreter.start(generator)
        core = self.core
        self.sched.run_until(self.final_end, stop=lambda: core.finished)
        self.sched.run_until(self.sched.now + (round(PHASES.op_timeout * 1000) + 10) * MS)

    def collect(self) -> Collected:
        logs = self.dump_logs()
        self.partition_dumps = self.partition_logs()
        wall = time.perf_counter() - self._started
        virtual = self.sched.now / SECOND
        self.stats.update(
            {
                "seed": self.spec.seed,
                "virtual-seconds": round(virtual, 3),
                "wall-seconds": round(wall, 3),
                "speedup": round(virtual / wall, 1) if wall > 0 else None,
                "events": self.sched.events_run,
                "messages": self.net.sent,
                "dropped": self.net.dropped,
                "retransmitted": self.net.retransmitted,
                "operations": sum(1 for op in self.recorder.ops if op.type == "invoke"),
                "restarts": sum(n.restarts for n in self.nodes.values()),
            }
        )
        self.log(
            f"simulated {self.stats['virtual-seconds']} s in {self.stats['wall-seconds']} s "
            f"({self.stats['speedup']}x): {self.stats['operations']} operations, "
            f"{self.stats['restarts']} restarts; history sha256 {self.recorder.digest()[:16]}…"
        )
        return Collected(self.events, logs, self.partition_dumps, self.invariants.result(), list(self.fatal))

    def schedule_document(self) -> dict[str, Any]:
        return schedule_document(self.spec, self.plan, self.schedule, self.op_log, self.assignment, self.main_start)
