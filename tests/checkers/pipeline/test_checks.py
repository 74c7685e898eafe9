"""The executor-side functions and the driver-side discovery, without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.pipeline.checks import (
    RunChecks,
    check_epoch_rows,
    check_key,
    check_run,
)
from checkers.pipeline.config import config_label, config_of
from checkers.pipeline.discover import discover, parse_date
from checkers.pipeline.schemas import EPOCH_CHECK, KEY_CHECK, RUN_CHECK
from checkers.registry import Checking
from harness.core.checks import judging

CAS = Checking("cas-register")


def row(index: int, process: Any, typ: str, f: str, value: Any, time: int, key: str = "r1") -> dict[str, Any]:
    """A history line as decoded, as the executor hands it to the checkers."""
    return {"index": index, "time": time, "process": process, "type": typ, "f": f, "key": key, "value": value}


def check_key_rows(run_id: str, key: str, rows: list[dict[str, Any]], checking: Checking, limit: Any) -> dict:
    """`check_key` of lines in any order (the executor sorts them by index): the result row."""
    return check_key(run_id, key, sorted(rows, key=lambda r: r["index"]), checking, limit)[0]


def check_run_rows(run_id: str, rows: list[dict[str, Any]], run: RunChecks) -> dict[str, Any]:
    return check_run(run_id, sorted(rows, key=lambda r: r["index"]), run)


def test_linearizable_key() -> None:
    rows = [
        row(0, 0, "invoke", "write", 1, 10),
        row(1, 0, "ok", "write", 1, 20),
        row(2, 1, "invoke", "read", None, 30),
        row(3, 1, "ok", "read", 1, 40),
    ]
    out = check_key_rows("run", "r1", list(reversed(rows)), CAS, 5.0)  # order comes from index
    assert out["valid"] == "true" and out["ops"] == 2 and out.get("error") is None


def test_stale_read_is_found_with_its_time() -> None:
    rows = [
        row(10, 0, "invoke", "write", 1, 100),
        row(11, 0, "ok", "write", 1, 200),
        row(12, 1, "invoke", "read", None, 300),
        row(13, 1, "ok", "read", 2, 400),
    ]
    out = check_key_rows("run", "r1", rows, CAS, 5.0)
    assert out["valid"] == "false"
    assert out["fail_index"] == 13 and out["fail_time"] == 400  # the original index and time
    assert "cannot be placed" in out["summary"]
    assert "(index 12)" in out["summary"]  # the history's own index, as `kraftwerk test` names the op


def test_malformed_history_is_a_row_not_an_exception() -> None:
    rows = [row(0, 0, "ok", "write", 1, 10)]  # a completion without an invocation
    out = check_key_rows("run", "r1", rows, CAS, 5.0)
    assert out["valid"] == "error" and "without a matching invoke" in out["error"]
    with pytest.raises(ValueError, match="unknown checker model"):
        Checking("no-such-model")


def test_queue_runs_are_checked_whole() -> None:
    rows = [
        row(0, 0, "invoke", "send", 5, 10, key="t0"),
        row(1, 0, "ok", "send", [0, 5], 20, key="t0"),
        row(2, 1, "invoke", "poll", None, 30, key="t0"),
        row(3, 1, "ok", "poll", [[0, 5]], 40, key="t0"),
    ]
    assert check_key_rows("run", "*", rows, Checking("queue"), None)["valid"] == "true"


def test_a_queue_run_is_judged_with_its_allowed_anomalies() -> None:
    """A lost write the test allows (--acks 1 --allow lost-write) does not make the key check invalid."""
    rows = [
        row(0, 0, "invoke", "send", 5, 10, key="t0"),
        row(1, 0, "ok", "send", [0, 5], 20, key="t0"),
        row(2, 0, "invoke", "send", 6, 30, key="t0"),
        row(3, 0, "ok", "send", [1, 6], 40, key="t0"),
        row(4, 1, "invoke", "poll", None, 50, key="t0"),
        row(5, 1, "ok", "poll", [[1, 6]], 60, key="t0"),
    ]
    assert check_key_rows("run", "*", rows, Checking("queue"), None)["valid"] == "false"
    allowed = check_key_rows("run", "*", rows, Checking("queue", allow=("lost-write",)), None)
    assert allowed["valid"] == "true" and allowed["anomaly_types"] == []


def test_run_rows_hold_the_stats_rule_and_what_the_runtime_observed(tmp_path: Path) -> None:
    """The rest of `kraftwerk test`'s verdict: an f that never succeeded in the main phase makes the run
    unknown; a simulator invariant the run recorded makes it invalid."""
    rows = [
        row(0, 0, "invoke", "write", 1, 10),
        row(1, 0, "ok", "write", 1, 20),
        row(2, 1, "invoke", "read", None, 30),
        row(3, 1, "fail", "read", None, 40),
        row(4, 1, "invoke", "read", None, 900),  # after the main phase: the final reads
        row(5, 1, "ok", "read", 1, 910),
    ]
    main = RunChecks(CAS, 5.0, str(tmp_path), (0, 100))
    out = check_run_rows("r", rows, main)
    assert out["valid"] == "unknown" and out["never_ok"] == ["read"]
    assert check_run_rows("r", rows, RunChecks(CAS, 5.0, str(tmp_path)))["valid"] == "true"  # no phase times
    broken = {"valid": False, "anomaly-types": ["SingleLeader"]}
    out = check_run_rows("r", rows, RunChecks(CAS, 5.0, str(tmp_path), None, broken))
    assert out["valid"] == "false" and out["anomaly_types"] == ["SingleLeader"]


def _event(line: int, node: str, epoch: int, role: str, leader: str | None) -> dict[str, Any]:
    return {
        "run_id": "r",
        "line": line,
        "node": node,
        "time": float(line),
        "type": "state",
        "epoch": epoch,
        "role": role,
        "leader": leader,
        "voted_for": leader,
        "hw": None,
        "partition": None,
        "leader_epoch": None,
    }


def test_epoch_rows() -> None:
    events = [_event(1, "n1", 1, "leader", "n1"), _event(2, "n2", 1, "follower", "n1")]
    logs = [
        {"run_id": "r", "node": "n1", "line": 1, "offset": 0, "epoch": 1, "digest": "a"},
        {"run_id": "r", "node": "n2", "line": 1, "offset": 0, "epoch": 1, "digest": "a"},
    ]
    assert check_epoch_rows("r", events, logs)["valid"] == "true"
    two = [*events, _event(3, "n3", 1, "leader", "n3")]
    out = check_epoch_rows("r", two, [])
    assert out["valid"] == "false" and out["anomaly_types"] == ["multiple-leaders"]
    assert dict(out["anomaly_counts"]) == {"multiple-leaders": 1} and out["first_anomaly_node_time"] >= 1.0
    assert check_epoch_rows("r", [], [])["valid"] == "unknown"  # no events, as `kraftwerk test` says
    bad = [{**events[0], "role": "king"}]
    assert check_epoch_rows("r", bad, [])["valid"] == "error"


def test_check_rows_have_the_declared_columns() -> None:
    rows = [row(0, 0, "invoke", "read", None, 1), row(1, 0, "ok", "read", None, 2)]
    runs = RunChecks(CAS, 1.0, "/nonexistent")
    key = check_key_rows("x", "r1", rows, CAS, 1.0)
    assert set(key) <= set(KEY_CHECK.fieldNames()) and key["valid"] == "true"
    run = check_run_rows("x", rows, runs)
    assert set(run) <= set(RUN_CHECK.fieldNames()) and run["valid"] == "true"
    epochs = check_epoch_rows("r", [{**_event(1, "n1", 1, "leader", "n1"), "line": 1}], [])
    assert set(epochs) <= set(EPOCH_CHECK.fieldNames()) and epochs["valid"] == "true"


def test_config_label_is_the_same_from_test_json_and_from_options() -> None:
    test = {
        "name": "x",
        "workload": "register",
        "backend": "sim",
        "nemesis": ["kill", "partition"],
        "nodes": 5,
        "concurrency": 10,
        "time-limit": 60.0,
        "interval": 5.0,
        "seed": 3,
        "bugs": ["b", "a"],
        "argv": [],
        "start-time": "now",
    }
    args = {
        "workload": "register",
        "backend": "sim",
        "nemesis": "kill,partition",
        "nodes": 5,
        "concurrency": 10,
        "time_limit": 60,
        "interval": 5,
        "seed": 9,
        "bug": ["a", "b"],
        "store": "s",
        "name": None,
        "quiet": False,
        "check_time_limit": 300.0,
    }
    assert config_label(test) == config_label(args)
    assert config_label(test) == "register/sim/kill+partition/concurrency=10,interval=5,nodes=5,time-limit=60/bugs=a+b"
    assert config_of({"nemesis": []})["nemesis"] == []


def test_discover(tmp_path: Path) -> None:
    store = tmp_path / "store"
    good = store / "t" / "20261103T101010.000"
    (good / "logs").mkdir(parents=True)
    (good / "test.json").write_text(json.dumps({"name": "t", "workload": "register", "backend": "sim", "seed": 1}))
    (good / "history.jsonl").write_text("")
    (good / "results.json").write_text(json.dumps({"valid": False, "anomaly-types": ["nonlinearizable"]}))
    (good / "logs" / "n1.jsonl").write_text("")
    (store / "latest").symlink_to(good)  # not a second run
    broken = store / "t" / "20261001T000000.000"
    broken.mkdir()
    (broken / "test.json").write_text("{not json")
    (broken / "history.jsonl").write_text("")
    odd = store / "u" / "20261104T000000.000"
    odd.mkdir(parents=True)
    (odd / "test.json").write_text(json.dumps({"workload": "bank"}))
    runs = {r.run_id: r for r in discover(store, judging)}
    assert set(runs) == {"t/20261103T101010.000", "t/20261001T000000.000", "u/20261104T000000.000"}
    g = runs["t/20261103T101010.000"]
    assert g.errors == [] and g.date == "2026-11-03" and len(g.logs) == 1
    assert g.checks is not None and g.checks.checking == CAS and g.checks.time_limit == 300.0
    assert g.row["recorded_valid"] == "false" and g.row["recorded_anomalies"] == ["nonlinearizable"]
    assert runs["t/20261001T000000.000"].errors[0][0] == "test.json"
    stages = [s for s, _ in runs["u/20261104T000000.000"].errors]
    assert stages == ["test.json", "history.jsonl"]  # no checker for "bank"; no history
    assert [r.run_id for r in discover(store, judging, since="2026-11-04")] == ["u/20261104T000000.000"]
    assert parse_date("20261104") == "2026-11-04"
