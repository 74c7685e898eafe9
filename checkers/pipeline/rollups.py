"""The roll-ups of an analyze output, computed on the driver from its tables (pyarrow; no Spark job).

They read the small per-run tables (verdicts, runs, key_checks, errors) and one column set of the
latencies table, restricted to the batches the manifest committed, and aggregate them in memory:
thousands of verdict rows and one latency per client operation. Percentiles are exact: the smallest
value with at least that fraction of the values at or below it (what Spark's percentile_approx
approximates). Each roll-up is written to OUT/rollups/<name>.parquet and returned as rows (dicts).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from checkers.pipeline.schemas import PARTITION_COLUMNS

ROLLUPS = (
    "config_daily",
    "bug_detection",
    "anomaly_daily",
    "anomaly_by_config",
    "availability",
    "first_anomaly",
    "flaky",
    "slowest_checks",
    "failing_runs",
    "mismatches",
    "errors",
)
_S, _L, _D, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
SCHEMAS: dict[str, pa.Schema] = {
    "config_daily": pa.schema(
        [("config", _S), ("date", _S), ("runs", _L), ("valid", _L), ("invalid", _L), ("unknown", _L), ("pass_rate", _D)]
    ),
    "bug_detection": pa.schema(
        [("bug", _S), ("date", _S), ("runs", _L), ("caught", _L), ("unknown", _L), ("rate", _D)]
    ),
    "anomaly_daily": pa.schema([("date", _S), ("anomaly", _S), ("runs", _L)]),
    "anomaly_by_config": pa.schema([("config", _S), ("anomaly", _S), ("runs", _L)]),
    "availability": pa.schema(
        [
            ("config", _S),
            ("in_fault", _B),
            ("ops", _L),
            ("ok", _L),
            ("ok_fraction", _D),
            ("p50_ms", _D),
            ("p95_ms", _D),
            ("p99_ms", _D),
            ("max_ms", _D),
        ]
    ),
    "first_anomaly": pa.schema([("config", _S), ("invalid_runs", _L), ("min_s", _D), ("median_s", _D), ("max_s", _D)]),
    "flaky": pa.schema(
        [
            ("config", _S),
            ("runs", _L),
            ("valid", _L),
            ("invalid", _L),
            ("unknown", _L),
            ("verdicts", pa.list_(pa.field("element", _S, nullable=False))),
            ("flaky", _B),
        ]
    ),
    "slowest_checks": pa.schema(
        [
            ("run_id", _S),
            ("config", _S),
            ("key", _S),
            ("ops", _L),
            ("seconds", _D),
            ("valid", _S),
            ("date", _S),
            ("run_dir", _S),
        ]
    ),
    "failing_runs": pa.schema(
        [
            ("run_id", _S),
            ("config", _S),
            ("seed", _L),
            ("date", _S),
            ("start_time", _S),
            ("valid", _S),
            ("recorded_valid", _S),
            ("anomaly_types", pa.list_(_S)),
            ("first_anomaly_s", _D),
            ("reproduce", _S),
            ("run_dir", _S),
            ("has_timeline", _B),
        ]
    ),
    "mismatches": pa.schema(
        [
            ("run_id", _S),
            ("config", _S),
            ("seed", _L),
            ("valid", _S),
            ("recorded_valid", _S),
            ("history_valid", _S),
            ("epochs_valid", _S),
            ("run_valid", _S),
        ]
    ),
    "errors": pa.schema([("run_id", _S), ("run_dir", _S), ("stage", _S), ("message", _S), ("date", _S), ("batch", _S)]),
}


def scan(out: Path, name: str, batches: list[str], columns: list[str] | None = None) -> ds.Scanner | None:
    """A scanner over table `name` of `out` (its committed `batches` only); None if there is nothing to read."""
    from checkers.pipeline.tables import arrow_schema

    path = out / "tables" / name
    if not path.is_dir() or not batches:
        return None
    partitions = pa.schema([(c, pa.string()) for c in PARTITION_COLUMNS])
    schema = pa.unify_schemas([arrow_schema(name), partitions])
    data = ds.dataset(
        str(path), schema=schema, format="parquet", partitioning=ds.partitioning(partitions, flavor="hive")
    )
    return data.scanner(columns=columns, filter=ds.field("batch").isin(batches))


def read_rows(out: Path, name: str, batches: list[str], columns: list[str] | None = None) -> pa.Table:
    """Table `name` of `out` (its committed `batches` only) as one Arrow table; empty (no columns) if absent."""
    scanner = scan(out, name, batches, columns)
    return pa.table({}) if scanner is None else scanner.to_table()


def percentile(ordered: Any, fraction: float) -> Any:
    """The smallest value of `ordered` (a sorted list or Arrow array, no nulls) with at least `fraction` of the
    values at or below it."""
    if not len(ordered):
        return None
    value = ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
    return value.as_py() if isinstance(value, pa.Scalar) else value


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return (value is not None, value if value is not None else 0)


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "runs": len(rows),
        "valid": sum(1 for r in rows if r["valid"] == "true"),
        "invalid": sum(1 for r in rows if r["valid"] == "false"),
        "unknown": sum(1 for r in rows if r["valid"] == "unknown"),
    }


def _group(rows: Iterable[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


def _sorted_groups(groups: dict[tuple[Any, ...], Any]) -> list[tuple[tuple[Any, ...], Any]]:
    return sorted(groups.items(), key=lambda kv: tuple(_nulls_first(v) for v in kv[0]))


def _availability(out: Path, batches: list[str], configs: dict[str, str]) -> list[dict[str, Any]]:
    """Per configuration and inside/outside fault windows: operations, ok ones, ok latency percentiles and
    max. Columnar and batch by batch (one latency per client operation): only the ok latencies are kept."""
    scanner = scan(out, "latencies", batches, ["run_id", "in_fault", "type", "latency_ns"])
    if scanner is None or not configs:
        return []
    runs = pa.table({"run_id": list(configs), "config": list(configs.values())})
    keys = ["config", "in_fault"]
    totals: dict[tuple[Any, ...], list[int]] = {}
    timed: dict[tuple[Any, ...], list[pa.Array]] = {}
    for batch in scanner.to_batches():
        # a run without a verdict (a malformed run) is not rolled up
        lat = pa.Table.from_batches([batch]).join(runs, "run_id", join_type="inner", use_threads=False)
        if lat.num_rows == 0:
            continue
        ok = pc.fill_null(pc.equal(lat["type"], "ok"), False)
        lat = lat.append_column("ok", ok).append_column("ok_ns", pc.if_else(ok, lat["latency_ns"], None))
        for r in lat.group_by(keys, use_threads=False).aggregate([("run_id", "count"), ("ok", "sum")]).to_pylist():
            counts = totals.setdefault((r["config"], r["in_fault"]), [0, 0])
            counts[0] += r["run_id_count"]
            counts[1] += r["ok_sum"] or 0
        kept = lat.filter(pc.is_valid(lat["ok_ns"])).select([*keys, "ok_ns"])
        kept = kept.sort_by([("config", "ascending"), ("in_fault", "ascending")])
        start = 0
        for r in kept.group_by(keys, use_threads=False).aggregate([("ok_ns", "count")]).to_pylist():
            n = r["ok_ns_count"]
            timed.setdefault((r["config"], r["in_fault"]), []).append(kept["ok_ns"].slice(start, n).combine_chunks())
            start += n
    rows = []
    for (config, inside), (ops, ok_count) in _sorted_groups(totals):
        chunks = timed.get((config, inside))
        values = pa.concat_arrays(chunks).sort() if chunks else pa.array([], pa.int64())
        q = [percentile(values, f) for f in (0.5, 0.95, 0.99)]
        rows.append(
            {
                "config": config,
                "in_fault": inside,
                "ops": ops,
                "ok": ok_count,
                "ok_fraction": ok_count / ops,
                "p50_ms": None if q[0] is None else q[0] / 1e6,
                "p95_ms": None if q[1] is None else q[1] / 1e6,
                "p99_ms": None if q[2] is None else q[2] / 1e6,
                "max_ms": values[-1].as_py() / 1e6 if len(values) else None,
            }
        )
    return rows


def compute(out: Path, batches: list[str], slowest: int = 25) -> dict[str, list[dict[str, Any]]]:
    """Every roll-up over `batches` of `out`, as rows; also written to OUT/rollups/<name>.parquet."""
    verdicts = read_rows(out, "verdicts", batches).to_pylist()
    configs = {v["run_id"]: v["config"] for v in verdicts}
    run_dirs = {v["run_id"]: v["run_dir"] for v in verdicts}
    bugs: dict[str, list[str]] = {}
    for r in read_rows(out, "runs", batches, ["run_id", "bugs"]).to_pylist():
        bugs.setdefault(r["run_id"], r["bugs"] or [])
    result: dict[str, list[dict[str, Any]]] = {}

    result["config_daily"] = [
        {"config": c, "date": d, **(n := _counts(rows)), "pass_rate": n["valid"] / n["runs"]}
        for (c, d), rows in _sorted_groups(_group(verdicts, "config", "date"))
    ]
    detection: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for v in verdicts:
        for bug in bugs.get(v["run_id"], []):
            detection.setdefault((bug, v["date"]), []).append(v)
    result["bug_detection"] = [
        {
            "bug": bug,
            "date": d,
            "runs": len(rows),
            "caught": (caught := sum(1 for r in rows if r["valid"] == "false")),
            "unknown": sum(1 for r in rows if r["valid"] == "unknown"),
            "rate": caught / len(rows),
        }
        for (bug, d), rows in _sorted_groups(detection)
    ]
    for name, key in (("anomaly_daily", "date"), ("anomaly_by_config", "config")):
        counts: dict[tuple[Any, ...], int] = {}
        for v in verdicts:
            for anomaly in v["anomaly_types"] or []:
                counts[(v[key], anomaly)] = counts.get((v[key], anomaly), 0) + 1
        result[name] = [{key: k, "anomaly": a, "runs": n} for (k, a), n in _sorted_groups(counts)]
    result["availability"] = _availability(out, batches, configs)
    first = _group((v for v in verdicts if v["first_anomaly_s"] is not None), "config")
    result["first_anomaly"] = [
        {
            "config": c,
            "invalid_runs": len(rows),
            "min_s": (times := sorted(r["first_anomaly_s"] for r in rows))[0],
            "median_s": percentile(times, 0.5),
            "max_s": times[-1],
        }
        for (c,), rows in _sorted_groups(first)
    ]
    flaky = []
    for (c,), rows in _sorted_groups(_group(verdicts, "config")):
        seen = sorted({r["valid"] for r in rows if r["valid"] is not None})
        flaky.append({"config": c, **_counts(rows), "verdicts": seen, "flaky": len(seen) > 1})
    result["flaky"] = sorted(flaky, key=lambda r: not r["flaky"])  # stable: by config within each
    checks = read_rows(out, "key_checks", batches, ["run_id", "key", "ops", "seconds", "valid", "date"]).to_pylist()
    slow = sorted((k for k in checks if k["run_id"] in configs), key=lambda k: _nulls_first(k["seconds"]), reverse=True)
    result["slowest_checks"] = [
        {**k, "config": configs[k["run_id"]], "run_dir": run_dirs[k["run_id"]]} for k in slow[:slowest]
    ]
    failing = [v for v in verdicts if v["valid"] != "true" or v["matches_recorded"] is False]
    failing.sort(key=lambda v: (_nulls_first(v["config"]), _nulls_first(v["seed"])))
    failing.sort(key=lambda v: _nulls_first(v["date"]), reverse=True)
    result["failing_runs"] = failing
    result["mismatches"] = sorted((v for v in verdicts if v["matches_recorded"] is False), key=lambda v: v["run_id"])
    errors = read_rows(out, "errors", batches).to_pylist()
    result["errors"] = sorted(errors, key=lambda e: (e["run_id"], e["stage"]))

    (out / "rollups").mkdir(exist_ok=True)
    for name in ROLLUPS:
        schema = SCHEMAS[name]
        rows = [{f: r.get(f) for f in schema.names} for r in result[name]]
        result[name] = rows
        path = out / "rollups" / f"{name}.parquet"
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
        os.replace(tmp, path)
    result["totals"] = [
        {
            "runs": len(verdicts),
            **{k: sum(r[k] for r in result["config_daily"]) for k in ("valid", "invalid", "unknown")},
            "errors": len({e["run_id"] for e in errors}),
        }
    ]
    return result
