"""`kraftwerk replay RUN_DIR`: drive a stored run again from its schedule and judge it as `test` did.

The test a replay runs is the stored one (schedule.json embeds it, harness.store.schedule), with the test
options given on the command line replacing stored ones (`--backend docker`, `--bug …`, `--settle 0`, …);
it is judged by the same checkers, as the stored run's workload composes them (allowed anomalies included).

On the simulator the schedule (every fault and every client operation, with its node and time) is run
again with the run's seed; unless an option changed the test, the new history must be the same bytes as
the stored one (a difference means determinism broke: a harness failure, 255).

On a real cluster (a run stored by a real backend, or any run with `--backend docker|netns|local|ssh`)
the schedule is driven again in real time on a fresh cluster (harness.tools.replay_plan), up to N
times, each attempt stored as a normal run, counting the attempts in which the stored run's anomaly
class comes back.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, exit_code
from harness.core.checks import stored_spec
from harness.core.spec import SpecError, TestSpec
from harness.db import registry as dbs
from harness.sim.runs import file_sha256, from_schedule, load_run, simulate
from harness.tools.replay_plan import (
    SECOND,
    Plan,
    controller_renaming,
    load_plan,
    renamed_assignment,
    renaming,
    replay_generator,
    reproduced,
)
from workloads import generator as gen
from workloads.protocol import Workload


@dataclass(frozen=True)
class Settings:
    """What a replay does besides its test: how often, where to store, how to drive a real cluster."""

    times: int = 1
    store: str = "store"
    all: bool = False  # run every attempt, not only up to the first reproduction
    keep_node_names: bool = False
    ordered: bool = True
    keep_unsynced: bool = False
    quiet: bool = False


def first_difference(a: Path, b: list[str]) -> int | None:
    with open(a, encoding="utf-8") as fh:
        stored = fh.read().splitlines()
    for i, (x, y) in enumerate(zip(stored, b), 1):
        if x != y:
            return i
    return None if len(stored) == len(b) else min(len(stored), len(b)) + 1


def stored_backend(run_dir: Path) -> str:
    """The backend a stored run used (sim when test.json cannot say: the simulator's loader then explains)."""
    try:
        return str(json.loads((run_dir / "test.json").read_text()).get("backend", "sim"))
    except (OSError, ValueError, AttributeError):
        return "sim"


def replay(run_dir: Path, overrides: Mapping[str, Any], settings: Settings) -> int:
    """Replay a stored run on the simulator or on a real cluster (`overrides["backend"]`, else the run's own)."""
    backend = overrides.get("backend") or stored_backend(run_dir)
    if backend != "sim":
        return replay_on_cluster(run_dir, overrides, settings, backend)
    return replay_on_simulator(run_dir, overrides, settings)


def replay_on_simulator(run_dir: Path, overrides: Mapping[str, Any], settings: Settings) -> int:
    """The stored schedule again in the simulator: the verdict, and 255 if an unchanged test's history
    differs from the stored one."""
    try:
        # what no simulator can run (another DB than our nodes) is refused before anything else is read
        stored_spec(run_dir).with_options(backend="sim", **{k: v for k, v in overrides.items() if k != "backend"})
        test, schedule = load_run(run_dir)
        stored, sim_plan = from_schedule(schedule, test=test)
        spec = stored.with_options(**{k: v for k, v in overrides.items() if k != "backend"})
    except (InputError, SpecError) as e:
        print(f"kraftwerk replay: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    changed = sorted(k for k, v in overrides.items() if k != "backend" and _value(stored, k) != v)
    if changed:
        print(
            f"kraftwerk replay: the test differs from the stored one ({', '.join(changed)}): its history is not "
            "compared with the stored run's",
            file=sys.stderr,
        )
    history = run_dir / "history.jsonl"
    want = file_sha256(history) if history.exists() and not changed else None
    worst = EXIT_VALID
    checked = None
    for attempt in range(1, settings.times + 1):
        checked = simulate(spec, sim_plan)
        same = checked.digest == want
        label = {True: "valid", False: "INVALID"}.get(checked.valid, "unknown")  # type: ignore[call-overload]
        print(
            f"replay {attempt}/{settings.times}: {label} ({_anomalies(checked.results)}); history sha256 "
            f"{checked.digest[:16]}… "
            + ("" if want is None else "identical to the stored run" if same else "DIFFERS from the stored run"),
            file=sys.stderr,
        )
        if want is not None and not same:
            from checkers.history import dumps_op

            line = first_difference(history, [dumps_op(op) for op in checked.sim.recorder.ops])
            print(f"kraftwerk replay: determinism broken: first differing history line {line}", file=sys.stderr)
            return EXIT_INTERNAL
        code = exit_code(checked.valid)
        worst = code if code == EXIT_INVALID or (code == EXIT_UNKNOWN and worst == EXIT_VALID) else worst
    assert checked is not None
    print(f"{checked.digest}  {run_dir}")
    return worst


def _value(spec: TestSpec, name: str) -> Any:
    return getattr(spec, name) if hasattr(spec, name) else getattr(spec.workload_options, name, None)


def _anomalies(results: Mapping[str, Any]) -> str:
    """The anomaly types of a verdict, the allowed ones apart."""
    from checkers.registry import allowed_anomalies, bad_anomalies

    bad, allowed = bad_anomalies(results), allowed_anomalies(results)
    text = f"anomalies: {', '.join(bad) or 'none'}"
    return text + (f"; allowed: {', '.join(allowed)}" if allowed else "")


def replay_spec(plan: Plan, overrides: Mapping[str, Any], backend: str, keep_unsynced: bool = False) -> TestSpec:
    """The test a real replay attempt runs: the stored run's, on `backend`, in the plan's time, with the
    options given on the command line. The simulator's crashes lose unsynced writes: so do the replay's kills
    (on our nodes), unless --keep-unsynced."""
    stored = plan.spec
    changes: dict[str, Any] = {
        "backend": backend,
        "nemeses": tuple(plan.nemeses),
        "time_limit": plan.time_limit,
        "name": f"{stored.name or 'run'}-replay-{backend}",
    }
    db = overrides.get("db", stored.db)
    if db != stored.db:  # another system: the stored one's bugs are its own (and its options start afresh)
        changes.update(db=db, bugs=())
    options = stored.db_options if db == stored.db else dbs.kind(db).options()
    if hasattr(options, "lose_unsynced") and not keep_unsynced:  # a DB that can hold writes until they are synced
        changes["lose_unsynced"] = plan.source_backend == "sim" or options.lose_unsynced
    changes.update({k: v for k, v in overrides.items() if k != "backend"})
    return stored.with_options(**changes)


def align_phase(plan: Plan, clock_source: str, sleep: Callable[[float], None] = time.sleep) -> int:
    """Wait until the real nodes' clock stands in the phase of their clock-phased timers that the stored run's
    main phase began in (the lazy-flush bug's flushes; containers share the host's clocks); the ns waited."""
    now = time.time_ns() if clock_source == "wall" else time.monotonic_ns()
    wait = plan.phase_wait(now)
    if wait:
        print(
            f"  waiting {wait / 1e6:.0f} ms to start the main phase in the stored run's lazy-flush phase "
            f"({plan.main_start % (plan.phase_period() or 1) / 1e6:.0f} ms into the nodes' flush interval)",
            file=sys.stderr,
        )
        sleep(wait / SECOND)
    return wait


class StoredMain:
    """The stored schedule as a real run's main phase (`harness.real.run.ReplayMain`): each attempt
    renames nodes so that the fresh cluster's leaders stand where the stored run's stood."""

    def __init__(self, plan: Plan, clock_source: str, keep_node_names: bool, ordered: bool) -> None:
        self.plan = plan
        self.clock_source = clock_source
        self.keep_node_names = keep_node_names
        self.ordered = ordered
        self.swaps: list[dict[str, str]] = []  # each attempt's renaming
        self.placed: dict[str, str] | None = None  # the renaming the topic was placed with, this attempt

    def prepare(self, leader: str | None, workload: Workload) -> None:
        """Before the workload's setup: create a topic with the stored assignment, renamed so that the
        fresh controller stands where the stored one stood."""
        plan = self.plan
        self.placed = None
        place = getattr(workload, "place", None)
        if self.keep_node_names or not plan.assignment or place is None:
            return
        mapping = controller_renaming(plan, leader)
        place(renamed_assignment(plan, mapping))
        self.placed = mapping
        print(
            f"  fresh controller {leader}, the stored run's {plan.leader}: topic placed as "
            + ", ".join(f"{p} {rs}" for p, rs in sorted(renamed_assignment(plan, mapping).items())),
            file=sys.stderr,
        )

    def __call__(self, leader: str | None, partition_leaders: Mapping[str, str]) -> gen.Generator:
        plan = self.plan
        if self.placed is not None:
            mapping = self.placed
        else:
            mapping = {} if self.keep_node_names else renaming(plan, leader, partition_leaders)
        self.swaps.append(mapping)
        if mapping:
            fresh = f"leader {leader}" + (
                ", partition leaders " + ", ".join(f"{k} {v}" for k, v in sorted(partition_leaders.items()))
                if plan.partition_leaders
                else ""
            )
            stored = f"leader {plan.leader}" + (
                ", partition leaders " + ", ".join(f"{k} {v}" for k, v in plan.partition_leaders.items())
                if plan.partition_leaders
                else ""
            )
            print(
                f"  fresh cluster: {fresh}; the stored run's: {stored}: renaming "
                + ", ".join(f"{a} → {b}" for a, b in sorted(mapping.items()))
                + " in the schedule",
                file=sys.stderr,
            )
        align_phase(plan, self.clock_source)
        return replay_generator(plan, mapping, ordered=self.ordered)


def replay_on_cluster(run_dir: Path, overrides: Mapping[str, Any], settings: Settings, backend: str) -> int:
    """`kraftwerk replay RUN_DIR` on docker/netns/local/ssh: 1 the anomaly class came back in some attempt,
    0 every attempt was valid, 2 not reproduced but some attempt was unknown or invalid in another way."""
    from harness.real.run import run_real_test, runnable_problem
    from harness.store.runs import new_run, test_document, write_json

    try:
        plan = load_plan(run_dir)
    except InputError as e:
        print(f"kraftwerk replay: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stored = plan.spec
    target, mapped = plan.target()
    print(
        f"kraftwerk replay: {plan.source} ({plan.source_backend}, seed {plan.seed}) on {backend}: "
        f"{plan.nodes} nodes, {plan.concurrency} clients, {len(plan.ops)} operations, {len(plan.events)} fault events "
        f"({', '.join(plan.nemeses) or 'no faults'}) in {plan.time_limit:.1f} s; bugs {', '.join(plan.bugs) or 'none'}",
        file=sys.stderr,
    )
    workload_words = ", ".join(_workload_words(stored))
    if workload_words:
        print(f"  {stored.workload}: {workload_words}", file=sys.stderr)
    for note in plan.notes:
        print(f"  note: {note}", file=sys.stderr)
    if mapped:
        print(
            f"  note: simulator invariants are not observable on a real cluster; looking for their visible "
            f"consequences instead: {'; '.join(mapped)}",
            file=sys.stderr,
        )
    wanted = ", ".join(sorted(target)) if target else "any invalid verdict (the stored run has no anomalies)"
    print(f"  reproduction = an invalid verdict with any of: {wanted}", file=sys.stderr)

    try:
        spec = replay_spec(plan, overrides, backend, keep_unsynced=settings.keep_unsynced)
        problem = runnable_problem(spec)
    except SpecError as e:
        problem = str(e)
    if problem:
        print(f"kraftwerk replay: cannot replay this run on --backend {backend}: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # the clock the nodes' clock-phased timers read (our nodes' --clock-source; wall for a DB without one)
    clock = getattr(spec.db_options, "clock_source", "wall")
    main = StoredMain(plan, clock, keep_node_names=settings.keep_node_names, ordered=settings.ordered)
    command = shlex.join(["kraftwerk", "replay", str(plan.source), "--backend", backend])
    attempts: list[dict[str, Any]] = []
    for attempt in range(1, settings.times + 1):
        try:
            run_dir_attempt = new_run(settings.store, spec.name)
        except (OSError, ValueError) as e:
            print(f"kraftwerk replay: cannot create a run under --store {settings.store}: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        test = test_document(spec)
        test["replay"] = {
            "of": str(plan.source),
            "source-backend": plan.source_backend,
            "attempt": attempt,
            "times": settings.times,
            "time-shift-seconds": round(plan.shift_ns / SECOND, 3),
            "target-anomalies": sorted(target),
        }
        write_json(run_dir_attempt / "test.json", test)
        print(f"attempt {attempt}/{settings.times}: run directory {run_dir_attempt}", file=sys.stderr, flush=True)
        code = run_real_test(spec, run_dir_attempt, command, quiet=settings.quiet, main=main, verb="replay")
        if code == EXIT_INTERNAL or not (run_dir_attempt / "results.json").exists():
            print(f"kraftwerk replay: attempt {attempt} failed in the harness (exit {code})", file=sys.stderr)
            return EXIT_INTERNAL
        results = json.loads((run_dir_attempt / "results.json").read_text())
        if main.swaps and main.swaps[-1]:
            test["replay"]["node-renaming"] = main.swaps[-1]
            write_json(run_dir_attempt / "test.json", test)
        hit = reproduced(results, target)
        anomalies = sorted(results.get("anomaly-types", []))
        attempts.append(
            {"run": str(run_dir_attempt), "valid": results.get("valid"), "anomalies": anomalies, "reproduced": hit}
        )
        label = {True: "valid", False: "INVALID"}.get(results.get("valid"), "unknown")  # type: ignore[call-overload]
        print(
            f"replay {attempt}/{settings.times}: {label} ({_anomalies(results)}) — "
            + ("REPRODUCED" if hit else "not reproduced"),
            file=sys.stderr,
            flush=True,
        )
        if hit and not settings.all:
            break
    k = sum(a["reproduced"] for a in attempts)
    early = k and len(attempts) < settings.times
    seen = sorted({x for a in attempts if a["reproduced"] for x in a["anomalies"]})
    print(
        f"reproduced in {k} of {len(attempts)} attempts"
        + (f" (anomaly classes {', '.join(seen)})" if k else f" (looked for {', '.join(sorted(target)) or 'any'})")
        + (f"; stopped at the first reproduction (of up to {settings.times}; --all runs them all)" if early else ""),
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "source": str(plan.source),
                "backend": backend,
                "target": sorted(target),
                "reproduced": k,
                "attempts": len(attempts),
                "times": settings.times,
                "runs": attempts,
            }
        )
    )
    if k:
        return EXIT_INVALID
    if any(a["valid"] is not True for a in attempts):
        return EXIT_UNKNOWN
    return EXIT_VALID


def _workload_words(spec: TestSpec) -> list[str]:
    """The workload's own options of a test, as command-line words (all of them, defaults too)."""
    from workloads.options import to_json

    return [f"{k} {v}" for k, v in to_json(spec.workload_options).items() if v not in ((), [], None)]
