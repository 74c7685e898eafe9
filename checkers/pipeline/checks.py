"""What the Spark executors run: the project's own checkers over one (run, key) or one run's events.

Plain functions from rows (dicts, as the ops, events and logs tables hold them) to result rows (the
columns of `schemas.KEY_CHECK`, `RUN_CHECK`, `EPOCH_CHECK`), so they are unit-testable without Spark and are
the same code `kraftwerk test` and `kraftwerk check` use (`checkers.linearizable.check`,
`checkers.epochs.check_events`). Every failure is caught and returned as a row with `error` set:
one malformed run never aborts the job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checkers.errors import InputError
from checkers.registry import Checking, bad_anomalies

if TYPE_CHECKING:
    from checkers.history import Op


@dataclass(frozen=True)
class RunChecks:
    """What the executors need to judge one run as its test did: its workload's checking, its checker budget,
    its directory (partition logs), the main phase's [start, end) ns and what its runtime observed."""

    checking: Checking
    time_limit: float | None
    run_dir: str
    main: tuple[int, int] | None = None
    observed: dict[str, Any] | None = None


VALID_TEXT = {True: "true", False: "false"}


def valid_text(valid: Any) -> str:
    """A checker's valid (True, False, "unknown") as the pipeline's string column."""
    return VALID_TEXT.get(valid, "unknown") if isinstance(valid, bool) else "unknown"


def validated_ops(objs: list[dict[str, Any]], source: str) -> list[Op]:
    """History ops from decoded lines (in index order), each validated once and keeping its index (its
    position when it has none); InputError on the first bad one."""
    from checkers.history import op_from_dict

    ops = []
    for i, obj in enumerate(objs):
        op = op_from_dict(obj, source, i + 1)
        if op.index == -1:
            op.index = i
        ops.append(op)
    return ops


def check_key(
    run_id: str, key: str | None, objs: list[dict[str, Any]], checking: Checking, time_limit: float | None
) -> tuple[dict[str, Any], list[Op] | None]:
    """Check one key of one run (or a whole run, for models that do not split by key) as the run's workload
    composes its checking (`checkers.registry`: model, allowed anomalies, ww-deps), from its history lines
    as decoded (in index order). Returns the result row (schemas.KEY_CHECK) and the validated ops (None if a
    line was not a valid op); a malformed history gives valid="error" with the reason, never an exception.
    """
    from checkers.history import History
    from checkers.linearizable.check import describe_failure
    from checkers.registry import check_history

    started = time.monotonic()
    out: dict[str, Any] = {"run_id": run_id, "key": key, "ops": 0, "valid": "error"}
    ops = None
    try:
        source = f"{run_id} key {key}"
        ops = validated_ops(objs, source)
        history = History(ops, source)
        out["ops"] = len(history.operations())
        result = check_history(history, checking, time_limit=time_limit)
        out["valid"] = valid_text(result.get("valid"))
        out["anomaly_types"] = [str(a) for a in bad_anomalies(result)]
        cause = result.get("cause")
        if cause is not None:
            out["cause"] = cause if isinstance(cause, str) else "; ".join(map(str, cause))
        if result.get("valid") is False:
            out["summary"] = describe_failure(result)
            op = (result.get("failure") or {}).get("op") or {}
            index = op.get("completed-index", op.get("index"))
            failed = next((o for o in ops if o.index == index), None) if isinstance(index, int) else None
            if failed is not None:
                out["fail_index"] = index
                out["fail_time"] = failed.time
    except InputError as e:
        out["valid"], out["error"] = "error", f"malformed history: {e}"
    except Exception as e:  # noqa: BLE001 - reported as a row, never abort the job
        out["valid"], out["error"] = "error", f"checker failed: {type(e).__name__}: {e}"
    out["seconds"] = round(time.monotonic() - started, 6)
    return out, ops


def check_run(run_id: str, objs: list[dict[str, Any]], run: RunChecks, ops: list[Op] | None = None) -> dict[str, Any]:
    """The parts of a run's verdict beyond its history and events, as `kraftwerk test` composes them
    (`checkers.registry.judge`): the stats of its main phase over its client operations (`objs`, its history
    lines as decoded, in index order; `ops`, the same validated, when the caller has them), its partition
    logs (read from the run directory) and what its runtime observed. The result row (schemas.RUN_CHECK)."""
    from checkers.epochs import check_partition_logs, load_partition_logs
    from checkers.history import History
    from checkers.registry import stats_part
    from checkers.verdict import compose

    started = time.monotonic()
    out: dict[str, Any] = {"run_id": run_id, "valid": "error", "anomaly_types": []}
    try:
        source = f"{run_id} (stats)"
        history = History(ops if ops is not None else validated_ops(objs, source), source)
        parts: dict[str, dict[str, Any]] = {}
        dumps = load_partition_logs(run.run_dir)
        if dumps:
            parts["partition-logs"] = check_partition_logs(dumps)
        if run.observed is not None:
            parts["invariants"] = dict(run.observed)
        stats = stats_part(history, run.checking, run.main)
        parts["stats"] = stats
        result = compose(parts)
        out["valid"] = valid_text(result["valid"])
        out["anomaly_types"] = [str(a) for a in bad_anomalies(result)]
        out["never_ok"] = [str(f) for f in stats.get("never-ok", [])]
    except InputError as e:
        out["error"] = f"malformed run: {e}"
    except Exception as e:  # noqa: BLE001 - reported as a row, never abort the job
        out["error"] = f"checker failed: {type(e).__name__}: {e}"
    out["seconds"] = round(time.monotonic() - started, 6)
    return out


def check_epoch_rows(run_id: str, events: list[dict[str, Any]], logs: list[dict[str, Any]]) -> dict[str, Any]:
    """The epoch/leader checker over one run's events and log dumps (rows as the events and logs tables hold
    them, with their `line`, and `node` for log entries); the result row (schemas.EPOCH_CHECK)."""
    evs = [
        {k: v for k, v in e.items() if v is not None and k not in ("line", "run_id")}
        for e in sorted(events, key=lambda e: e["line"])
    ]
    dumps: dict[str, list[dict[str, Any]]] = {}
    for entry in sorted(logs, key=lambda e: (e["node"], e["line"])):
        dumps.setdefault(entry["node"], []).append(
            {k: entry[k] for k in ("offset", "epoch", "digest") if entry.get(k) is not None}
        )
    return check_epochs(run_id, evs, dumps)


def check_epochs(run_id: str, evs: list[dict[str, Any]], dumps: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The epoch/leader checker over one run's events (in file order, their fields without nulls) and log
    dumps (node, in node order -> its entries in file order); the result row (schemas.EPOCH_CHECK)."""
    from checkers.epochs import check_events

    started = time.monotonic()
    out: dict[str, Any] = {"run_id": run_id, "valid": "error", "events": len(evs), "anomaly_types": []}
    try:
        if evs:
            result = check_events(evs, dumps)
        else:
            result = {"valid": "unknown", "error": "no events"}
        out["valid"] = valid_text(result.get("valid"))
        out["anomaly_types"] = list(result.get("anomaly-types", []))
        out["anomaly_counts"] = [(k, int(v)) for k, v in (result.get("anomaly-counts") or {}).items()]
        times = [
            ref["event"]["time"]
            for examples in (result.get("anomalies") or {}).values()
            for ex in examples
            for ref in ex.get("events", [])
            if isinstance(ref, dict) and isinstance(ref.get("event", {}).get("time"), (int, float))
        ]
        if times:
            out["first_anomaly_node_time"] = float(min(times))
    except InputError as e:
        out["valid"], out["error"] = "error", f"malformed events: {e}"
    except Exception as e:  # noqa: BLE001 - reported as a row, never abort the job
        out["valid"], out["error"] = "error", f"checker failed: {type(e).__name__}: {e}"
    out["seconds"] = round(time.monotonic() - started, 6)
    return out
