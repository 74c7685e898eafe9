"""Simulated runs as data: run a schedule, check it, store it, load it back.

Shared by `kraftwerk replay`, `shrink` and `explore`: a run is (TestSpec, SimPlan)
→ (history, events, log dumps, invariants) → composed verdict; its anomaly class
is the set of anomaly types in that verdict. The plan is what a stored schedule.json
adds to the spec (the fault events and operations to drive instead of drawing them).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from harness.core.checks import check_run
from harness.core.interpreter import SCHEDULE_FORMAT
from harness.core.spec import SpecError, TestSpec
from harness.sim.cluster import MODES, SimPlan, SimResult, Simulation, mode_error
from harness.store.runs import write_json, write_jsonl
from nodes.runtime.config import CLOCK_SOURCES
from workloads.registry import WORKLOADS

CHECK_TIME_LIMIT = 120.0


@dataclass
class Checked:
    spec: TestSpec
    plan: SimPlan
    sim: SimResult
    results: dict[str, Any]
    # queue workload: {partition: {node: committed batches}} at the end of the run
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    main_start: int = 0  # virtual ns at which the main phase began (schedule times count from it)

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
    history_path: str | None = None,
    check_time_limit: float = CHECK_TIME_LIMIT,
) -> Checked:
    """Run `spec` in the simulator (driven by `plan` if given) and every checker its workload needs."""
    plan = plan or SimPlan()
    simulation = Simulation(spec, plan, history_path=history_path)
    sim = simulation.run()
    history = sim.recorder.history(history_path or "history.jsonl")
    model = simulation.workload.model
    dumps = simulation.partition_dumps
    results = check_run(
        history, sim.events, sim.logs, sim.invariants, model, check_time_limit, partition_logs=dumps or None
    )
    results["run"] = dict(sim.stats)
    return Checked(spec, plan, sim, results, dumps, simulation.main_start)


# schedule.json's workload options (as test.json names them) → TestSpec fields
_STORED_OPTIONS = {
    "acks": "acks",
    "partitions": "partitions",
    "replication-factor": "replication_factor",
    "min-isr": "min_isr",
    "unclean": "unclean",
    "sub-via": "sub_via",
    "txn": "txn",
}


def from_schedule(doc: dict[str, Any], bugs: list[str] | None = None) -> tuple[TestSpec, SimPlan]:
    """The test and plan that drive a run from a stored schedule.json (no random ops or faults);
    `bugs` replaces the stored bugs. InputError if the document is not one this kraftwerk replays."""
    for name in ("seed", "nodes", "concurrency", "time-limit", "nemesis", "ops"):
        if name not in doc:
            raise InputError(f"schedule.json has no {name!r} (written by an older kraftwerk?)")
    version = doc.get("format", 1)
    if version == 2 and "lazy-flush" in doc.get("bugs", []):
        raise InputError(
            f"schedule.json is format 2 with the lazy-flush bug; this kraftwerk replays and shrinks it in format "
            f"{SCHEDULE_FORMAT} only (its lazy flushes now fall on whole seconds of the node's clock, so the "
            "history would differ): run its seed again with `kraftwerk explore` or `kraftwerk test --backend sim`"
        )
    if version not in (2, SCHEDULE_FORMAT):
        raise InputError(
            f"schedule.json is format {version}; this kraftwerk replays and shrinks formats 2 and {SCHEDULE_FORMAT} "
            "only "
            "(the simulator's clients changed, so an older run's history cannot come back byte for byte: "
            "run its seed again with `kraftwerk explore` or `kraftwerk test --backend sim`)"
        )
    workload = str(doc.get("workload", "register"))
    if workload not in WORKLOADS:
        raise InputError(f"schedule.json: unknown workload {workload!r}")
    # runs stored before a field was written were simulated the older way: messages lost at partitions,
    # register runs started at boot (queue runs always waited for a led topic), clock faults moved timers
    before = {"links": "datagram", "start": "boot" if workload == "register" else "ready", "clocks": "timers"}
    modes = {name: str(doc.get(name, before[name])) for name in MODES}
    for name, value in modes.items():
        if error := mode_error(name, value):
            raise InputError(f"schedule.json: {error}")
    # the workload's options it stored (acks as the producer sends it: -1, 1, 0)
    stored = {attr: doc[key] for key, attr in _STORED_OPTIONS.items() if key in doc and workload == "queue"}
    if "acks" in stored:
        stored["acks"] = {-1: "all", 1: "1", 0: "0"}.get(stored["acks"], str(stored["acks"]))
    # runs stored before "clock-source": with "clocks": "wall" the nodes' timers ran on the true time
    clock_source = str(doc.get("clock-source", "monotonic" if modes["clocks"] == "wall" else "wall"))
    if clock_source not in CLOCK_SOURCES:
        raise InputError(f"schedule.json: unknown clock-source {clock_source!r} (one of {', '.join(CLOCK_SOURCES)})")
    try:
        spec = TestSpec(
            workload=workload,
            seed=int(doc["seed"]),
            nodes=int(doc["nodes"]),
            concurrency=int(doc["concurrency"]),
            time_limit=float(doc["time-limit"]),
            bugs=tuple(doc.get("bugs", [])) if bugs is None else tuple(bugs),
            nemeses=tuple(sorted({e["package"] for e in doc["nemesis"]})),
            fsync_delay=int(doc.get("fsync-delay-ms", 0)),
            clock_source=clock_source,
            lease_reads=bool(doc.get("lease-reads", False)),
            **stored,
        )
    except (SpecError, TypeError, ValueError) as e:
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


def write_node_files(
    run_dir: Path,
    events: list[dict[str, Any]],
    logs: dict[str, list[dict[str, Any]]],
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]],
) -> None:
    """events.jsonl, logs/<node>.jsonl and logs/partitions/<partition>/<node>.jsonl of a simulated run."""
    write_jsonl(run_dir / "events.jsonl", events)
    for node, entries in logs.items():
        write_jsonl(run_dir / "logs" / f"{node}.jsonl", entries)
    for tp, dumps in partition_logs.items():
        (run_dir / "logs" / "partitions" / tp).mkdir(parents=True, exist_ok=True)
        for node, entries in dumps.items():
            write_jsonl(run_dir / "logs" / "partitions" / tp / f"{node}.jsonl", entries)


def store_run(run_dir: Path, checked: Checked, test: dict[str, Any]) -> None:
    """Write a checked run's files (the history is already there when it was streamed)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    sim = checked.sim
    if not (run_dir / "history.jsonl").exists():
        from checkers.history import write_jsonl as write_history

        write_history(sim.recorder.ops, run_dir / "history.jsonl")
    write_json(run_dir / "test.json", test)
    write_node_files(run_dir, sim.events, sim.logs, checked.partition_logs)
    write_json(run_dir / "schedule.json", sim.schedule_document(checked.spec, checked.plan))
    lin = checked.results.get("linearizable", {})
    if lin.get("valid") is False:
        from checkers.linearizable.timeline import write_timeline

        lin["html"] = write_timeline(
            sim.recorder.history(str(run_dir / "history.jsonl")), lin, str(run_dir / "timeline.html")
        )
    write_json(run_dir / "results.json", checked.results)


def file_sha256(path: str | os.PathLike[str]) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
