"""The executor's one pass without Spark: reading files as Spark reads them, latencies, chunks, roll-up helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.history import read_jsonl
from checkers.pipeline import jsonl
from checkers.pipeline.batch import RunTask, history_problem, latencies, process_run
from checkers.pipeline.checks import RunChecks
from checkers.pipeline.job import _chunks
from checkers.pipeline.rollups import percentile
from checkers.pipeline.verdicts import merge_valid
from checkers.registry import Checking, check_history


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_history_lines_read_as_spark_reads_them(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "history.jsonl",
        [
            json.dumps(
                {"index": 0, "time": 5, "process": 3, "type": "invoke", "f": "cas", "key": "r1", "value": [1, 2]}
            ),
            "",
            json.dumps(
                {"index": 1, "time": 9, "process": "nemesis", "type": "info", "f": "kill", "value": {"n1": "x"}}
            ),
            '{"index": 2, "time": oops',
            json.dumps({"index": 1.5}),
            json.dumps([1]),
        ],
    )
    rows = jsonl.read_jsonl(path, jsonl.HISTORY)
    assert len(rows) == 5  # the blank line is skipped
    assert rows[0]["process"] == "3" and rows[0]["value"] == "[1, 2]" and rows[0]["key"] == "r1"
    assert rows[1]["value"] == '{"n1": "x"}' and rows[1]["key"] is None and rows[1]["malformed"] is None
    assert [r["malformed"] for r in rows[2:]] == ['{"index": 2, "time": oops', '{"index": 1.5}', "[1]"]
    assert all(r["index"] is None for r in rows[2:])
    assert history_problem(rows) == '3 malformed line(s), first: {"index": 2, "time": oops'
    assert jsonl.read_jsonl(str(tmp_path / "gone.jsonl"), jsonl.HISTORY) == []


def test_columnar_reading_only_when_every_value_fits(tmp_path: Path) -> None:
    good = {"node": "n1", "time": 0, "type": "state", "epoch": 1, "role": "leader", "leader": None, "extra": [1]}
    path = _write(tmp_path / "events.jsonl", [json.dumps(good)])
    table = jsonl.read_arrow(path, jsonl.EVENTS_ARROW)
    assert table is not None
    rows = jsonl.read_jsonl(path, jsonl.EVENTS)
    assert table.to_pylist() == [{k: v for k, v in rows[0].items() if k != "malformed"}]
    assert table.to_pylist()[0]["time"] == 0.0
    for misfit in ({**good, "leader": 3}, {**good, "epoch": 1.0}):  # Spark: "3"; malformed
        path = _write(tmp_path / "events.jsonl", [json.dumps(misfit)])
        assert jsonl.read_arrow(path, jsonl.EVENTS_ARROW) is None
    path = _write(tmp_path / "events.jsonl", [json.dumps({**good, "leader": 3})])
    assert jsonl.read_jsonl(path, jsonl.EVENTS)[0]["leader"] == "3"
    assert jsonl.read_arrow(str(tmp_path / "gone.jsonl"), jsonl.EVENTS_ARROW) is None


def test_history_problems() -> None:
    def op(i: Any) -> dict[str, Any]:
        return {"index": i, "malformed": None}

    assert history_problem([]) == "history.jsonl is empty"
    assert history_problem([op(0), op(None)]) == "1 line(s) without an index"
    assert history_problem([op(0), op(2)]).startswith("indices are not dense from 0")
    assert history_problem([op(1), op(0)]) is None


def _op(i: int, process: Any, typ: str, f: str, t: int | None) -> dict[str, Any]:
    return {"index": i, "time": t, "process": process, "type": typ, "f": f}


def test_latencies_pair_invocations_and_mark_fault_windows() -> None:
    ops = [
        _op(0, "0", "invoke", "read", 10),
        _op(1, "nemesis", "info", "kill", 15),
        _op(2, "0", "ok", "read", 20),
        _op(3, "1", "invoke", "write", 30),
        _op(4, "nemesis", "info", "start", 40),
        _op(5, "1", "fail", "write", 45),
        _op(6, "0", "invoke", "read", 50),
        _op(7, "nemesis", "info", "start-partition", 55),
        _op(8, "0", "info", "read", 60),
        _op(9, "1", "invoke", "read", 70),
        _op(10, None, "invoke", "read", 12),  # no process: not a client's
    ]
    rows = {(r["process"], r["invoke_time"]): r for r in latencies(ops)}
    assert set(rows) == {("0", 10), ("1", 30), ("0", 50), ("1", 70)}
    assert rows[("0", 10)] == {
        "process": "0",
        "f": "read",
        "type": "ok",
        "invoke_time": 10,
        "latency_ns": 10,
        "in_fault": False,
    }
    assert rows[("1", 30)]["type"] == "fail" and rows[("1", 30)]["latency_ns"] == 15 and rows[("1", 30)]["in_fault"]
    assert rows[("0", 50)]["type"] == "info" and rows[("0", 50)]["latency_ns"] is None
    assert not rows[("0", 50)]["in_fault"]
    # a partition never stopped lasts to the run's last operation (70): 70 is not before it
    assert rows[("1", 70)]["type"] == "info" and not rows[("1", 70)]["in_fault"]


class _Task:
    def __init__(self, size: int) -> None:
        self.size = size


def test_chunks_are_a_multiple_of_the_cores_and_weigh_alike() -> None:
    tasks = [_Task(s) for s in range(1000)]
    chunks = _chunks(tasks, 2)
    assert len(chunks) == 8 and sorted(t.size for c in chunks for t in c) == list(range(1000))
    weights = [sum(t.size for t in c) for c in chunks]
    assert max(weights) - min(weights) <= 1000
    assert len(_chunks(tasks[:3], 2)) == 3 and _chunks([], 2) == []
    assert len(_chunks([_Task(1)] * 5000, 2)) == 26  # at most 200 runs a chunk, rounded up to the cores


def test_percentile_and_merge() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2 and percentile([1, 2, 3], 0.5) == 2
    assert percentile([5], 0.99) == 5 and percentile([], 0.5) is None
    assert merge_valid([]) == "true" and merge_valid(["true", None]) == "true"
    assert merge_valid(["true", "unknown", "false"]) == "false" and merge_valid(["error", "true"]) == "unknown"


def test_a_run_is_checked_from_its_lines_as_written_as_kraftwerk_test_checks_it(tmp_path: Path) -> None:
    """The executor checks the values the file holds, not their text in the ops table: a read of the string
    "1" after a write of the number 1 is not linearizable (json: different values), as `kraftwerk test` says;
    the ops table's string column alone cannot tell the two apart."""
    lines = [
        {"index": 0, "time": 10, "process": 0, "type": "invoke", "f": "write", "key": "r1", "value": 1},
        {"index": 1, "time": 20, "process": 0, "type": "ok", "f": "write", "key": "r1", "value": 1},
        {"index": 2, "time": 25, "process": "nemesis", "type": "info", "f": "kill", "value": None},
        {"index": 3, "time": 30, "process": 1, "type": "invoke", "f": "read", "key": "r1", "value": None},
        {"index": 4, "time": 40, "process": 1, "type": "ok", "f": "read", "key": "r1", "value": "1"},
    ]
    path = _write(tmp_path / "history.jsonl", [json.dumps(line) for line in lines])
    checking = Checking("cas-register")
    assert check_history(read_jsonl(path), checking)["valid"] is False  # what `kraftwerk test` says
    task = RunTask("r", "2026-11-29", "register", path, None, [], RunChecks(checking, 5.0, str(tmp_path)))
    pieces: dict[str, list[Any]] = {"ops": [], "events": [], "logs": [], "latencies": []}
    result = process_run(task, pieces, "b")
    assert result.problems == []
    [key] = result.key_checks
    assert key["valid"] == "false" and key["fail_index"] == 4 and key["fail_time"] == 40
    assert "(index 3)" in key["summary"]
    assert result.run_check is not None and result.run_check["valid"] == "true"
