"""`run_test`: one test from a fresh cluster to its verdict, on any runtime — Jepsen's `core.clj` `run!`.

    run = run_test(spec, SimRuntime(spec))                               # the simulator
    run = run_test(spec, RealRuntime(spec, run_dir), RunDir(run_dir))    # a real cluster, stored

The phases, in order, with their limits from `harness.core.phases` (the same on every runtime):

1. setup: wait until a leader is known to every node (PHASES.ready), fit a stored schedule to it
   (`Runtime.prepare`), run the workload's setup (PHASES.setup; the queue creates its topic);
2. main: clients and faults for the test's time limit (`Runtime.main`: the simulator schedules the faults
   on its scheduler, a real cluster drives them through the interpreter's nemesis thread);
3. heal: every fault healed, each heal recorded;
4. recovery: wait at least `spec.settle` seconds from the heal (default 10 s), then until a leader is known
   to every running node, up to PHASES.recovery (30 s) from the heal. A node that stopped by itself is
   reported (`exited-by-themselves`); without a majority of running nodes there are no final reads.
   Simulator runs stored before schedule.json's `"recover"` had a fixed pause: their runtime's
   `recovery` is PAUSE (the settle only, no readiness wait, final reads in any case);
5. final: every key read back, for at most PHASES.final seconds;
6. collect: the nodes' events, committed logs and (queue) partition logs; stored (`RunStore`);
7. check: `check_run`, called here and nowhere else, on what the run produced.

The history's recorder belongs to `run_test`; the runtime records into it from the main phase on.

run.json
--------
One file per run, next to the history, holding what the runtime observed that the history does not::

    {"phases": {"main": [start_ns, end_ns], "heal": ns, "final": [start_ns, end_ns]},
     "invariants": <the simulator's invariants result, or null>,
     "node-fatal": [{"node": "n2", "reason": "..."}, ...]}

Times are in the history's own time base (its ops' `time`: the simulator's virtual ns since the nodes
booted; on a real cluster the monotonic ns since the main phase began). `main` runs from the main phase's
start until its last operation completed: an operation invoked within it is a main-phase operation. `heal`
is when every fault had been healed, `final` the final reads (until their last operation completed or
timed out). `invariants` is the simulator's own invariants result (`harness.sim.invariants`), null on a real
cluster. `node-fatal` lists the nodes that stopped themselves on an illegal state (a raft core's Fatal;
simulated nodes add the `time`). The verdict's `invariants` part is `invariants` with `node-fatal` folded
in (`checkers.registry.observed_of`), so a stored run can be judged again from history.jsonl, events.jsonl, logs/ and
run.json exactly as `run_test` judged it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from checkers.registry import observed_of
from harness.core.checks import check_run
from harness.core.phases import PHASES, Phases
from harness.core.recorder import Recorder
from harness.core.runtime import PAUSE, Collected, NotReady, Runtime
from workloads import generator as gen

if TYPE_CHECKING:
    from checkers.history import History
    from harness.core.spec import TestSpec

SECOND = 1_000_000_000
READS = ("read", "poll")  # the final phase's operations that read a key back


class RunStore(Protocol):
    """Where a run's files go (`harness.store.runs.RunDir`)."""

    @property
    def history(self) -> Path:
        """history.jsonl, written as the run goes."""
        ...

    def write_run(self, run: Run) -> None:
        """Everything the run produced but its verdict (events, logs, schedule.json, run.json)."""

    def write_results(self, run: Run) -> None:
        """The verdict (results.json, and what goes with it)."""


@dataclass
class Run:
    """One run, as `run_test` leaves it."""

    spec: TestSpec
    recorder: Recorder  # the history
    history_path: str | None  # where it was streamed to, if anywhere
    collected: Collected
    schedule: dict[str, Any]  # schedule.json
    phases: dict[str, Any]  # run.json's "phases"
    stats: dict[str, Any]  # results.json's "run"
    results: dict[str, Any] = field(default_factory=dict)  # the verdict, once checked
    _history: History | None = field(default=None, init=False, repr=False)

    @property
    def history(self) -> History:
        """The history the checkers read (built once)."""
        if self._history is None:
            self._history = self.recorder.history(self.history_path or "history.jsonl")
        return self._history

    @property
    def names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.spec.nodes + 1)]

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.collected.events

    @property
    def logs(self) -> dict[str, list[dict[str, Any]]]:
        return self.collected.logs

    @property
    def partition_logs(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        return self.collected.partition_logs

    @property
    def digest(self) -> str:
        """sha256 of history.jsonl's bytes."""
        return self.recorder.digest()

    @property
    def invariants(self) -> dict[str, Any] | None:
        """The verdict's invariants part: what run.json holds, as a stored run is judged again
        (`checkers.registry.observed_of`: the simulator's invariants, node-fatal folded in)."""
        return observed_of(self.run_json())

    def run_json(self) -> dict[str, Any]:
        """run.json (see the module docstring)."""
        return {"phases": self.phases, "invariants": self.collected.invariants, "node-fatal": self.collected.node_fatal}


def run_test(
    spec: TestSpec,
    runtime: Runtime,
    store: RunStore | None = None,
    *,
    check_time_limit: float | None = None,
    phases: Phases = PHASES,
) -> Run:
    """Run `spec` on `runtime` (every phase, see the module docstring), store it in `store` if given and judge
    it: the Run, with its verdict in `results` (results.json). `check_time_limit` replaces the spec's
    checker budget. Raises NotReady when the fresh cluster never became ready."""
    run = run_phases(spec, runtime, store.history if store is not None else None, phases)
    if store is not None:
        store.write_run(run)
    runtime.log("checking…")
    started = time.monotonic()
    c = run.collected
    judged = spec if check_time_limit is None else replace(spec, check_time_limit=check_time_limit)
    results = check_run(
        judged,
        run.history,
        c.events,
        c.logs,
        run.invariants,
        partition_logs=c.partition_logs or None,  # queue: the brokers' committed partition batches
        main=run.phases["main"],
    )
    run.stats["check-seconds"] = round(time.monotonic() - started, 2)
    results["run"] = run.stats
    run.results = results
    if store is not None:
        store.write_results(run)
    return run


def run_phases(spec: TestSpec, runtime: Runtime, history: str | Path | None = None, phases: Phases = PHASES) -> Run:
    """Every phase of `spec` on `runtime`, without the verdict (`run_test` adds it); the history is streamed
    to `history` if given."""
    with runtime:
        runtime.set_phase("setup", phases.ready)
        leader = runtime.wait_ready(phases.ready)
        runtime.prepare(leader)
        setup = runtime.workload.setup()
        if setup is not None:
            runtime.setup(setup, phases.setup)
        recorder = Recorder(runtime.now, history)
        try:
            runtime.set_phase("main", spec.time_limit)
            main_start = runtime.main(recorder, spec.time_limit)
            main_end = runtime.now()
            runtime.set_phase("heal")
            runtime.heal()
            heal = runtime.now()
            recovered, running = _recover(spec, runtime, phases, heal)
            recovery_end = runtime.now()

            limit = int(spec.time_limit * SECOND)
            keys = sorted(
                {o["key"] for o in runtime.ops() if o["at"] < limit and o.get("key") is not None},
                key=lambda k: (len(str(k)), str(k)),
            )
            # without a majority of running nodes no read can succeed
            final = runtime.workload.final(keys, spec.concurrency) if len(running) > len(runtime.names) // 2 else None
            runtime.set_phase("final", phases.final)
            final_start, first = runtime.now(), len(recorder.ops)
            runtime.final(gen.clients(gen.time_limit(phases.final, final)) if final is not None else None, phases.final)
            final_end = runtime.now()
        finally:
            recorder.close()
        read = {op.key for op in recorder.ops[first:] if op.type == "ok" and op.f in READS}
        runtime.set_phase("done")
        collected = runtime.collect()
        schedule = runtime.schedule_document()
    stats = runtime.stats
    stats.update(
        {
            "recovered": recovered,
            "recovery-seconds": round((recovery_end - heal) / SECOND, 2),
            "unread-keys": [k for k in keys if k not in read],
            "history-sha256": recorder.digest(),
        }
    )
    return Run(
        spec,
        recorder,
        None if history is None else str(history),
        collected,
        schedule,
        {"main": [main_start, main_end], "heal": heal, "final": [final_start, final_end]},
        stats,
    )


def _recover(spec: TestSpec, runtime: Runtime, phases: Phases, heal: int) -> tuple[bool | None, list[str]]:
    """The recovery phase (see the module docstring): (recovered — None after a fixed pause —, running nodes)."""
    runtime.set_phase("recover", max(spec.settle, phases.recovery))
    runtime.sleep_until(heal + int(spec.settle * SECOND))
    if runtime.recovery == PAUSE:
        return None, list(runtime.names)
    running = runtime.running()
    down = sorted(set(runtime.names) - set(running))
    if down:
        runtime.stats["exited-by-themselves"] = down
        runtime.log(f"warning: {', '.join(down)} exited on their own (see nodes/<node>/)")
    if len(running) <= len(runtime.names) // 2:
        runtime.log("warning: not recovered: fewer than a majority of the nodes run")
        return False, running
    deadline = heal + int(phases.recovery * SECOND)
    try:
        leader = runtime.wait_ready(max(0.0, (deadline - runtime.now()) / SECOND), running)
    except NotReady as e:
        runtime.log(f"warning: not recovered: {e}")
        return False, running
    after = (runtime.now() - heal) / SECOND
    runtime.log(f"healed; leader {leader} known to every running node {after:.1f}s after the heal")
    return True, running
