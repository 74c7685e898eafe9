"""One run's verdict row from its check rows, composed as `kraftwerk test` composes them (checkers.registry.judge).

The history (per key, or the whole run for models that do not split by key), the events (epochs) and the rest
of the verdict (stats, partition logs, what the runtime observed): false beats unknown beats true.
"""

from __future__ import annotations

from typing import Any


def merge_valid(values: list[str | None]) -> str:
    """false beats unknown (and error) beats true; None ignored; nothing at all → true."""
    seen = [v for v in values if v is not None]
    if "false" in seen:
        return "false"
    if any(v != "true" for v in seen):
        return "unknown"
    return "true"


def verdict_row(
    run: dict[str, Any],
    key_checks: list[dict[str, Any]],
    epoch_check: dict[str, Any] | None,
    run_check: dict[str, Any] | None,
) -> dict[str, Any]:
    """The verdicts-table row of `run` (its runs-table row) from its check rows. A run without client
    operations has no key or run check: its history cannot be refuted (true), but its stats make it unknown;
    a run without events is unknown on epochs."""
    history_valid = merge_valid([k["valid"] for k in key_checks]) if key_checks else "true"
    epochs_valid = epoch_check["valid"] if epoch_check is not None and epoch_check["valid"] is not None else "unknown"
    run_valid = run_check["valid"] if run_check is not None and run_check["valid"] is not None else "unknown"
    valid = merge_valid([history_valid, epochs_valid, run_valid])
    types: set[str] = set()
    for part in [*key_checks, epoch_check or {}, run_check or {}]:
        types.update(part.get("anomaly_types") or [])
    fail_times = [k["fail_time"] for k in key_checks if k["valid"] == "false" and k.get("fail_time") is not None]
    seconds = [
        sum(k["seconds"] for k in key_checks if k.get("seconds") is not None) if key_checks else 0.0,
        (epoch_check or {}).get("seconds") or 0.0,
        (run_check or {}).get("seconds") or 0.0,
    ]
    recorded = run["recorded_valid"]
    return {
        "run_id": run["run_id"],
        "config": run["config"],
        "test_name": run["test_name"],
        "seed": run["seed"],
        "start_time": run["start_time"],
        "history_valid": history_valid,
        "epochs_valid": epochs_valid,
        "run_valid": run_valid,
        "valid": valid,
        "recorded_valid": recorded,
        "matches_recorded": valid == recorded if recorded is not None else None,
        "anomaly_types": sorted(types),
        "first_anomaly_s": min(fail_times) / 1e9 if fail_times else None,
        "check_seconds": seconds[0] + seconds[1] + seconds[2],
        "keys": len(key_checks),
        "ops": sum(k["ops"] or 0 for k in key_checks),
        "run_dir": run["run_dir"],
        "reproduce": run["reproduce"],
        "has_timeline": run["has_timeline"],
        "date": run["date"],
        "workload": run["workload"],
    }
