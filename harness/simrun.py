"""Simulated runs as data: run a schedule, check it, store it, load it back.

Shared by `kraftwerk replay`, `shrink` and `explore`: a run is (options, schedule)
→ (history, events, log dumps, invariants) → composed verdict; its anomaly class
is the set of anomaly types in that verdict.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from harness.checks import check_run
from harness.interpreter import SCHEDULE_FORMAT
from harness.sim.cluster import MODES, SimOptions, SimResult, Simulation, mode_error
from harness.spec import TestSpec
from harness.store import write_json, write_jsonl
from workloads.registry import OPTIONS, WORKLOADS

CHECK_TIME_LIMIT = 120.0


@dataclass
class Checked:
    opts: SimOptions
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


def sim_options(spec: TestSpec, **knobs: Any) -> SimOptions:
    """The simulator's options for `spec` (plus simulator-only knobs: schedule, ops, modes, …)."""
    return SimOptions(
        seed=spec.seed,
        nodes=spec.nodes,
        concurrency=spec.concurrency,
        time_limit=spec.time_limit,
        nemeses=list(spec.nemeses),
        bugs=list(spec.bugs),
        interval=spec.interval,
        partition_kinds=spec.partition_kinds,
        workload=spec.workload,
        acks=spec.acks_value,
        min_isr=spec.min_isr,
        replication_factor=spec.replication_factor,
        partitions=spec.partitions,
        unclean=spec.unclean,
        sub_via=spec.sub_via,
        fsync_delay_ms=spec.fsync_delay,
        rate=spec.rate,
        **knobs,
    )


def simulate(opts: SimOptions, history_path: str | None = None, check_time_limit: float = CHECK_TIME_LIMIT) -> Checked:
    """Run the simulator and every checker its workload needs (linearizability or the queue checker)."""
    simulation = Simulation(opts, history_path=history_path)
    sim = simulation.run()
    history = sim.recorder.history(history_path or "history.jsonl")
    model = simulation.workload.model
    dumps = simulation.partition_dumps
    results = check_run(
        history, sim.events, sim.logs, sim.invariants, model, check_time_limit, partition_logs=dumps or None
    )
    results["run"] = dict(sim.stats)
    return Checked(opts, sim, results, dumps, simulation.main_start)


def options_from_schedule(doc: dict[str, Any], bugs: list[str] | None = None) -> SimOptions:
    """SimOptions that drive a run from a stored schedule.json (no random ops or faults)."""
    for name in ("seed", "nodes", "concurrency", "time-limit", "nemesis", "ops"):
        if name not in doc:
            raise InputError(f"schedule.json has no {name!r} (written by an older kraftwerk?)")
    version = doc.get("format", 1)
    if version != SCHEDULE_FORMAT:
        raise InputError(
            f"schedule.json is format {version}; this kraftwerk replays and shrinks format {SCHEDULE_FORMAT} only "
            "(the simulator's clients changed, so an older run's history cannot come back byte for byte: "
            "run its seed again with `kraftwerk explore` or `kraftwerk test --backend sim`)"
        )
    workload = str(doc.get("workload", "register"))
    if workload not in WORKLOADS:
        raise InputError(f"schedule.json: unknown workload {workload!r}")
    # the workload's options it stored (schedule.json names them as test.json does: min-isr, …)
    defaults = SimOptions()
    stored = {k: doc[k.replace("_", "-")] for k in OPTIONS if k.replace("_", "-") in doc and hasattr(defaults, k)}
    options = {name: type(getattr(defaults, name))(value) for name, value in stored.items()}
    # runs stored before a field was written were simulated the older way: messages lost at partitions,
    # register runs started at boot (queue runs always waited for a led topic), clock faults moved timers
    before = {"links": "datagram", "start": "boot" if workload == "register" else "ready", "clocks": "timers"}
    modes = {name: str(doc.get(name, before[name])) for name in MODES}
    for name, value in modes.items():
        if error := mode_error(name, value):
            raise InputError(f"schedule.json: {error}")
    return SimOptions(
        seed=int(doc["seed"]),
        nodes=int(doc["nodes"]),
        concurrency=int(doc["concurrency"]),
        time_limit=float(doc["time-limit"]),
        bugs=list(doc.get("bugs", [])) if bugs is None else list(bugs),
        nemeses=sorted({e["package"] for e in doc["nemesis"]}),
        schedule=list(doc["nemesis"]),
        ops=list(doc["ops"]),
        workload=workload,
        fsync_delay_ms=int(doc.get("fsync-delay-ms", 0)),
        **modes,  # type: ignore[arg-type]
        **options,
    )


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
    write_json(run_dir / "schedule.json", sim.schedule_document(checked.opts))
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


def with_schedule(opts: SimOptions, nemesis: list[dict[str, Any]], ops: list[dict[str, Any]], **kw: Any) -> SimOptions:
    return replace(opts, schedule=list(nemesis), ops=list(ops), **kw)
