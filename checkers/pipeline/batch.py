"""One pass over a chunk of runs on an executor: read each run's files once, validate, check, write its rows.

For every run of the chunk: history.jsonl, events.jsonl and logs/*.jsonl are read in Python
(`jsonl.read_jsonl`, as Spark would read them), the history validated (malformed lines, missing or
sparse indices), and, when the run has no problem, checked in the same pass: every key (or the whole run)
with `checks.check_key` (from its lines as read, each validated once), its events with `checks.check_epochs`,
the rest of its verdict with `checks.check_run`, and its op latencies paired and marked inside or outside
fault windows. The big tables (ops, events, logs, latencies) are written by the executor as one Parquet file
per table and (date, workload) (`tables.write_rows`); only the small check rows and problems go back to the
driver.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.pipeline import jsonl
from checkers.pipeline.checks import RunChecks, check_epochs, check_key, check_run

if TYPE_CHECKING:
    from checkers.history import Op

NEMESIS_PACKAGES = {
    "start-partition": ("partition", True),
    "stop-partition": ("partition", False),
    "kill": ("kill", True),
    "start": ("kill", False),
    "pause": ("pause", True),
    "resume": ("pause", False),
    "bump-clock": ("clock", True),
    "reset-clock": ("clock", False),
}
COMPLETIONS = ("ok", "fail", "info")


@dataclass
class RunTask:
    """What an executor needs of one run: where its files are, how it is judged, whether it may be checked."""

    run_id: str
    date: str
    workload: str
    history: str
    events: str | None
    logs: list[str]
    checks: RunChecks | None  # None: not checked (its discovery found problems); its files are still ingested
    size: int = 0  # history bytes, to balance chunks


@dataclass
class RunResult:
    """What goes back to the driver for one run."""

    run_id: str
    invokes: int = 0  # client invocations in its history
    problems: list[tuple[str, str]] = field(default_factory=list)  # (stage, message), as the errors table has
    key_checks: list[dict[str, Any]] = field(default_factory=list)
    epoch_check: dict[str, Any] | None = None
    run_check: dict[str, Any] | None = None


def _bad_lines(rows: list[dict[str, Any]]) -> str | None:
    return _bad_message([r["malformed"] for r in rows if r["malformed"] is not None])


def _bad_message(bad: list[str]) -> str | None:
    return f"{len(bad)} malformed line(s), first: {bad[0]}" if bad else None


def history_problem(ops: list[dict[str, Any]]) -> str | None:
    """Why a history cannot be checked (malformed lines, lines without an index, indices not dense from 0)."""
    if not ops:
        return "history.jsonl is empty"
    if bad := _bad_lines(ops):
        return bad
    no_index = sum(1 for r in ops if r["index"] is None)
    if no_index:
        return f"{no_index} line(s) without an index"
    indices = [r["index"] for r in ops]
    lo, hi, distinct = min(indices), max(indices), len(set(indices))
    if lo != 0 or hi != len(ops) - 1 or distinct != len(ops):
        return f"indices are not dense from 0 ({len(ops)} lines, {distinct} distinct, range {lo}..{hi})"
    return None


def _is_client(row: dict[str, Any]) -> bool:
    return row["process"] is not None and row["process"] != "nemesis"


def latencies(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each client invocation paired with the next operation of its process (its completion, if ok, fail or
    info), marked `in_fault` when it was invoked inside a fault window: from a nemesis start to the next
    nemesis operation of the same package, or to the run's last operation."""
    ordered = sorted(ops, key=lambda r: r["index"])
    end = max((r["time"] for r in ordered if r["time"] is not None), default=None)
    windows: list[tuple[Any, Any]] = []
    by_package: dict[str, list[dict[str, Any]]] = {}
    for r in ordered:
        if r["process"] == "nemesis" and r["f"] in NEMESIS_PACKAGES:
            by_package.setdefault(NEMESIS_PACKAGES[r["f"]][0], []).append(r)
    for rows in by_package.values():
        for i, r in enumerate(rows):
            if NEMESIS_PACKAGES[r["f"]][1]:
                stop = rows[i + 1]["time"] if i + 1 < len(rows) else None
                windows.append((r["time"], end if stop is None else stop))
    by_process: dict[str, list[dict[str, Any]]] = {}
    for r in ordered:
        if _is_client(r):
            by_process.setdefault(r["process"], []).append(r)
    out: list[dict[str, Any]] = []
    for process, rows in by_process.items():
        for i, r in enumerate(rows):
            if r["type"] != "invoke":
                continue
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            next_type = nxt["type"] if nxt is not None else None
            t = r["time"]
            latency = None
            if next_type in ("ok", "fail") and nxt["time"] is not None and t is not None:
                latency = nxt["time"] - t
            inside = t is not None and any(s is not None and e is not None and s <= t < e for s, e in windows)
            out.append(
                {
                    "process": process,
                    "f": r["f"],
                    "type": next_type if next_type in COMPLETIONS else "info",
                    "invoke_time": t,
                    "latency_ns": latency,
                    "in_fault": inside,
                }
            )
    return out


def _check(
    task: RunTask,
    checks: RunChecks,
    ops: list[dict[str, Any]],
    objs: list[dict[str, Any] | None],
    evs: list[dict[str, Any]],
    dumps: dict[str, list[dict[str, Any]]],
    result: RunResult,
) -> None:
    """Check a run whose history has no problem: `ops` its rows, `objs` its lines as decoded (one per row)."""
    client = sorted((t for t in zip(ops, objs) if _is_client(t[0])), key=lambda t: t[0]["index"])
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for r, obj in client:
        groups.setdefault(r["key"] if checks.checking.split_keys else "*", []).append(obj)  # type: ignore[arg-type]
    validated: list[Op] | None = []
    for key in sorted(groups, key=lambda k: (k is None, k or "")):
        row, key_ops = check_key(task.run_id, key, groups[key], checks.checking, checks.time_limit)
        result.key_checks.append(row)
        if key_ops is None:
            validated = None
        elif validated is not None:
            validated.extend(key_ops)
    if evs or dumps:
        result.epoch_check = check_epochs(task.run_id, evs, dumps)
    if client:
        if validated is not None and len(groups) > 1:
            validated.sort(key=lambda op: op.index)
        lines = [obj for _, obj in client]
        result.run_check = check_run(task.run_id, lines, checks, validated)  # type: ignore[arg-type]
    failed_key = next((k for k in result.key_checks if k["valid"] == "error"), None)
    if failed_key is not None:
        key = "(none)" if failed_key["key"] is None else failed_key["key"]
        result.problems.append(("check", f"key {key}: {failed_key.get('error') or '?'}"))
    if result.epoch_check is not None and result.epoch_check["valid"] == "error":
        result.problems.append(("epochs", str(result.epoch_check.get("error"))))
    if failed_key is None and result.run_check is not None and result.run_check["valid"] == "error":
        result.problems.append(("run", str(result.run_check.get("error"))))


HISTORY_COLUMNS = [name for name, _, _ in jsonl.HISTORY] + ["malformed"]
LATENCY_COLUMNS = ("process", "f", "type", "invoke_time", "latency_ns", "in_fault")


def _read(
    path: str, arrow: Any, columns: list[tuple[str, Any, type]], keep: tuple[str, ...]
) -> tuple[int, dict[str, Any], list[dict[str, Any]], list[str]]:
    """A file read for its Parquet table and its checker: its number of rows, its columns (a table's columns
    or lists), each row's `keep` fields that are not null as a dict (in file order), and what is wrong with
    its malformed lines' text."""
    table = jsonl.read_arrow(path, arrow)
    if table is not None:
        values = [table.column(name).to_pylist() for name in keep]
        if any(table.column(name).null_count for name in keep):
            kept = [{k: v for k, v in zip(keep, row) if v is not None} for row in zip(*values)]
        else:
            kept = [dict(zip(keep, row)) for row in zip(*values)]
        return table.num_rows, {name: table.column(name) for name in table.column_names}, kept, []
    rows = jsonl.read_jsonl(path, columns)
    kept = [{k: r[k] for k in keep if r[k] is not None} for r in rows]
    names = [*(c[0] for c in columns), "malformed"]
    bad = [r["malformed"] for r in rows if r["malformed"] is not None]
    return len(rows), {name: [r[name] for r in rows] for name in names}, kept, bad


EVENT_FIELDS = tuple(name for name, _, _ in jsonl.EVENTS)
LOG_FIELDS = ("offset", "epoch", "digest")


def _dumps(parts: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, list[dict[str, Any]]]:
    """Log entries by node, nodes in order, each node's entries in line order (files of one node interleaved
    by line, as sorting all of them by node and line would)."""
    by_node: dict[str, list[list[dict[str, Any]]]] = {}
    for node, entries in parts:
        if entries:
            by_node.setdefault(node, []).append(entries)
    dumps: dict[str, list[dict[str, Any]]] = {}
    for node in sorted(by_node):
        files = by_node[node]
        if len(files) == 1:
            dumps[node] = files[0]
        else:
            lined = sorted(((line, e) for f in files for line, e in enumerate(f, 1)), key=lambda t: t[0])
            dumps[node] = [e for _, e in lined]
    return dumps


def process_run(task: RunTask, pieces: dict[str, list[Any]], batch: str) -> RunResult:
    """Read, validate and (when it has no problem) check one run; its tables' rows are appended to `pieces`
    as (date, workload, Arrow table)."""
    from checkers.pipeline.tables import columns_table

    result = RunResult(task.run_id)
    tail = {"run_id": task.run_id, "batch": batch}

    def add(name: str, n: int, columns: dict[str, Any]) -> None:
        if n:
            pieces[name].append((task.date, task.workload, columns_table(name, n, {**columns, **tail})))

    objs: list[dict[str, Any] | None] = []
    ops = jsonl.read_jsonl(task.history, jsonl.HISTORY, objs)
    add("ops", len(ops), {name: [r[name] for r in ops] for name in HISTORY_COLUMNS})
    evs: list[dict[str, Any]] = []
    bad_events: list[str] = []
    if task.events:
        n, columns, evs, bad_events = _read(task.events, jsonl.EVENTS_ARROW, jsonl.EVENTS, EVENT_FIELDS)
        add("events", n, {**columns, "line": list(range(1, n + 1))})
    logs: list[tuple[str, list[dict[str, Any]]]] = []
    bad_logs: list[str] = []
    for path in task.logs:
        node = Path(path).stem
        n, columns, entries, bad = _read(path, jsonl.LOG_ARROW, jsonl.LOG, LOG_FIELDS)
        logs.append((node, entries))
        bad_logs.extend(bad)
        add("logs", n, {**columns, "node": node, "line": list(range(1, n + 1))})
    result.invokes = sum(1 for r in ops if r["type"] == "invoke" and _is_client(r))
    if problem := history_problem(ops):
        result.problems.append(("history.jsonl", problem))
    for bad, label in ((bad_events, "events.jsonl"), (bad_logs, "logs/*.jsonl")):
        if message := _bad_message(bad):
            result.problems.append((label, message))
    if task.checks is not None and not result.problems:
        _check(task, task.checks, ops, objs, evs, _dumps(logs), result)
        paired = latencies(ops)
        add("latencies", len(paired), {name: [r[name] for r in paired] for name in LATENCY_COLUMNS})
    return result


def process_chunk(tasks: list[RunTask], out: str, batch: str, chunk: int) -> tuple[list[RunResult], dict[str, float]]:
    """Process a chunk of runs and write its ops, events, logs and latencies; the runs' results and where the
    time went (read-and-check, write) in seconds."""
    from checkers.pipeline.tables import write_tables

    started = time.monotonic()
    pieces: dict[str, list[Any]] = {"ops": [], "events": [], "logs": [], "latencies": []}
    results = [process_run(task, pieces, batch) for task in tasks]
    checked = time.monotonic()
    for name, parts in pieces.items():
        write_tables(out, name, parts, f"part-{batch}-{chunk:05d}.parquet")
    return results, {"process": checked - started, "write": time.monotonic() - checked}
