"""Simulated runs as data: run a schedule, check it, store it, load it back.

Shared by `kraftwerk replay`, `shrink`, `explore` and the fleet: a run is (TestSpec, SimPlan)
→ `harness.core.run.run_test` on a `SimRuntime` → (history, events, log dumps, invariants, composed
verdict); its anomaly class is the set of anomaly types in that verdict. The plan is what a stored
schedule.json adds to the spec (the fault events and operations to drive instead of drawing them, and
the way the run was simulated: `harness.sim.cluster.MODES`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from harness.core.run import Run, run_test
from harness.core.runtime import PAUSE
from harness.core.spec import SpecError, TestSpec
from harness.sim.cluster import MODES, SimPlan, SimResult, mode_error
from harness.sim.runtime import SimRuntime
from harness.store.runs import RunDir, write_json
from harness.store.schedule import check_format, spec_of


@dataclass
class Checked:
    spec: TestSpec
    plan: SimPlan
    sim: SimResult
    results: dict[str, Any]
    run: Run  # as run_test left it: what `store_run` writes
    # queue workload: {partition: {node: committed batches}} at the end of the run
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    main_start: int = 0  # virtual ns at which the main phase began (schedule times count from it)
    runtime: SimRuntime | None = None  # the simulated cluster, as it ended

    @property
    def valid(self) -> Any:
        return self.results["valid"]

    @property
    def anomalies(self) -> frozenset[str]:
        return frozenset(self.results.get("anomaly-types", []))

    @property
    def observable(self) -> frozenset[str]:
        """The anomalies a real run's checkers can also report (not the simulator's own invariants)."""
        from harness.sim.invariants import NAMES

        return self.anomalies - frozenset(NAMES)

    @property
    def digest(self) -> str:
        return str(self.sim.stats["history-sha256"])


def simulate(
    spec: TestSpec,
    plan: SimPlan | None = None,
    check_time_limit: float | None = None,
    runtime: SimRuntime | None = None,
) -> Checked:
    """Run `spec` in the simulator (driven by `plan` if given) and judge it as `kraftwerk test` does;
    `check_time_limit` replaces the spec's checker budget (shrink's candidates take less). `runtime`: a
    SimRuntime of `spec` and `plan` made by the caller (one whose faults a test changes, say)."""
    runtime = runtime or SimRuntime(spec, plan)
    run = run_test(spec, runtime, check_time_limit=check_time_limit)
    return Checked(
        spec,
        runtime.plan,
        runtime.result(run),
        run.results,
        run,
        runtime.partition_dumps,
        runtime.main_start,
        runtime,
    )


def from_schedule(
    doc: dict[str, Any], bugs: list[str] | None = None, test: dict[str, Any] | None = None
) -> tuple[TestSpec, SimPlan]:
    """The test and plan that drive a run from a stored schedule.json (no random ops or faults); `bugs`
    replaces the stored bugs; `test` is the run's test.json (what schedules stored before format 4 lacked).
    InputError if the document is not one this kraftwerk replays."""
    version = doc.get("format", 1) if isinstance(doc, dict) else None
    if isinstance(version, int) and version < 2:
        raise InputError(
            f"schedule.json is format {version}; the simulator replays and shrinks formats 2 and later (its clients "
            "changed since, so an older run's history cannot come back byte for byte: run its seed again with "
            "`kraftwerk explore` or `kraftwerk test --backend sim`)"
        )
    version = check_format(doc)
    if version == 2 and "lazy-flush" in doc.get("bugs", []):
        raise InputError(
            "schedule.json is format 2 with the lazy-flush bug; this kraftwerk replays and shrinks it in format 3 "
            "or later only (its lazy flushes now fall on whole seconds of the node's clock, so the history would "
            "differ): run its seed again with `kraftwerk explore` or `kraftwerk test --backend sim`"
        )
    spec = spec_of(doc, test)
    # runs stored before a field was written were simulated the older way: messages lost at partitions, the main
    # phase started at boot (unless the workload had a setup, which always waited for a leader), clock faults
    # moved timers, the final reads came a fixed pause after the heal
    before = {"links": "datagram", "start": "boot", "clocks": "timers", "recover": PAUSE}
    modes = {name: str(doc.get(name, before[name])) for name in MODES}
    for name, value in modes.items():
        if error := mode_error(name, value):
            raise InputError(f"schedule.json: {error}")
    try:
        spec = replace(spec, backend="sim", **({} if bugs is None else {"bugs": tuple(bugs)}))
    except SpecError as e:
        raise InputError(f"schedule.json: {e}") from None
    return spec, SimPlan(schedule=list(doc["nemesis"]), ops=list(doc["ops"]), **modes)


def load_run(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(test.json, schedule.json) of a stored simulator run; InputError if it is not one."""
    d = Path(run_dir)
    if not d.is_dir():
        raise InputError("not a run directory", str(d))
    try:
        test = json.loads((d / "test.json").read_text())
        schedule = json.loads((d / "schedule.json").read_text())
    except FileNotFoundError as e:
        raise InputError(f"missing {Path(e.filename).name} (is this a kraftwerk run directory?)", str(d)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"unreadable JSON: {e.msg}", str(d)) from None
    if test.get("backend", "sim") != "sim":
        raise InputError(f"this command drives the simulator; the run used backend {test.get('backend')!r}", str(d))
    return test, schedule


def store_run(run_dir: Path, checked: Checked, test: dict[str, Any]) -> None:
    """Store a checked run in `run_dir` with `test` as its test.json (harness.store.runs.RunDir: the history
    too, as it was not streamed)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "test.json", test)
    RunDir(run_dir).write(checked.run)


def file_sha256(path: str | os.PathLike[str]) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
