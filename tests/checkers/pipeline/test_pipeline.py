"""The analyze job on a real store (sim runs, a seeded bug, malformed runs), on a local[1] Spark session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from checkers.pipeline.job import analyze, read_table
from harness.core.checks import judging
from harness.store.report.analysis import write_report
from tests.checkers.pipeline.runs import kraftwerk_test

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

VALID = {True: "true", False: "false"}


def _copy(run: Path, stamp: str) -> Path:
    dest = run.parent / stamp
    shutil.copytree(run, dest)
    return dest


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("pipeline") / "store"
    clean = kraftwerk_test(root, "--time-limit", "10", "--seed", "3", "--nemesis", "partition,kill")
    calm = kraftwerk_test(root, "--time-limit", "10", "--seed", "5", "--nemesis", "none")
    bug = kraftwerk_test(root, "--time-limit", "20", "--seed", "1", "--bug", "stale-read")
    queue = kraftwerk_test(root, "--workload", "queue", "--time-limit", "5", "--seed", "2")
    # the bug's configuration, but a history that happens to be clean: mixed verdicts (flaky)
    lucky = _copy(calm, "20261101T000000.001")
    test = json.loads((bug / "test.json").read_text())
    (lucky / "test.json").write_text(json.dumps({**test, "seed": 77}))
    # malformed runs, each on an older night
    corrupt = _copy(clean, "20261101T000000.002")
    lines = (corrupt / "history.jsonl").read_text().splitlines(keepends=True)
    lines[4] = '{"index": 4, "time": oops\n'
    (corrupt / "history.jsonl").write_text("".join(lines))
    unpaired = _copy(clean, "20261101T000000.003")
    ops = [json.loads(x) for x in (unpaired / "history.jsonl").read_text().splitlines()]
    victim = next(o for o in ops if o["type"] == "ok")
    victim["process"] = 999  # a completion nobody invoked: valid JSON, broken history
    (unpaired / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    no_test = _copy(calm, "20261101T000000.004")
    (no_test / "test.json").unlink()
    return {
        "root": root,
        "good": [clean, calm, bug, lucky, queue],
        "queue": queue,
        "bad": {corrupt: "history.jsonl", unpaired: "check", no_test: "test.json"},
        "bug": bug,
        "lucky": lucky,
    }


@pytest.fixture(scope="module")
def first(spark: Any, store: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    out = tmp_path_factory.mktemp("analysis")
    return analyze(store["root"], out, resolve=judging, spark=spark, check_time_limit=30), out


def _rid(store: dict[str, Any], run: Path) -> str:
    return run.relative_to(store["root"].resolve()).as_posix()


def test_verdicts_equal_each_runs_results(spark: Any, store: dict[str, Any], first: tuple[Any, Path]) -> None:
    result, out = first
    assert result.found == 8 and result.analysed == 8 and result.errors == 3
    verdicts = {r["run_id"]: r for r in (x.asDict() for x in read_table(spark, out, "verdicts").collect())}
    assert set(verdicts) == {_rid(store, p) for p in store["good"]}
    for run in store["good"]:
        recorded = json.loads((run / "results.json").read_text())
        v = verdicts[_rid(store, run)]
        assert v["valid"] == VALID[recorded["valid"]], run
        assert v["recorded_valid"] == VALID[recorded["valid"]] and v["matches_recorded"] is True
        history = recorded.get("linearizable") or recorded["queue"]  # per key, or the whole queue run
        assert v["history_valid"] == VALID[history["valid"]]
        assert v["epochs_valid"] == VALID[recorded["epochs"]["valid"]]
        assert set(v["anomaly_types"]) == set(recorded.get("anomaly-types", []))
    bug = verdicts[_rid(store, store["bug"])]
    assert bug["valid"] == "false" and bug["anomaly_types"] == ["nonlinearizable"]
    assert 0 < bug["first_anomaly_s"] < 60
    queue = verdicts[_rid(store, store["queue"])]
    assert queue["keys"] == 1 and queue["ops"] > 100  # one group: the queue checker sees the whole run


def test_every_key_is_checked_separately(spark: Any, store: dict[str, Any], first: tuple[Any, Path]) -> None:
    _, out = first
    run = store["good"][0]
    keys = {json.loads(x).get("key") for x in (run / "history.jsonl").read_text().splitlines()} - {None}
    checks = read_table(spark, out, "key_checks").where(f"run_id = '{_rid(store, run)}'").collect()
    assert {r["key"] for r in checks} == keys
    assert all(r["valid"] == "true" and r["seconds"] >= 0 for r in checks)


def test_malformed_runs_are_errors_not_crashes(spark: Any, store: dict[str, Any], first: tuple[Any, Path]) -> None:
    _, out = first
    errors = {r["run_id"]: r for r in read_table(spark, out, "errors").collect()}
    assert {rid: e["stage"] for rid, e in errors.items()} == {_rid(store, p): s for p, s in store["bad"].items()}
    corrupt = next(p for p, s in store["bad"].items() if s == "history.jsonl")
    assert "1 malformed line(s)" in errors[_rid(store, corrupt)]["message"]
    unpaired = next(p for p, s in store["bad"].items() if s == "check")
    assert "without a matching invoke" in errors[_rid(store, unpaired)]["message"]
    runs = {r["run_id"]: r["status"] for r in read_table(spark, out, "runs").collect()}
    assert sorted(runs.values()).count("error") == 3 and len(runs) == 8


def test_tables_are_partitioned_parquet(first: tuple[Any, Path]) -> None:
    _, out = first
    for table in ("ops", "events", "logs", "runs", "verdicts", "key_checks", "latencies"):
        parts = list((out / "tables" / table).glob("date=*/workload=*/*.parquet"))
        assert parts, table
    dates = {p.name for p in (out / "tables" / "ops").iterdir() if p.is_dir()}
    assert "date=2026-11-01" in dates and len(dates) == 2  # the copies' night and today


def test_rollups(store: dict[str, Any], first: tuple[Any, Path]) -> None:
    result, out = first
    r = result.rollups
    assert r["totals"] == [{"runs": 5, "valid": 4, "invalid": 1, "unknown": 0, "errors": 3}]
    bug_config = next(x["config"] for x in r["failing_runs"])
    flaky = {x["config"]: x for x in r["flaky"]}
    assert flaky[bug_config]["flaky"] is True and flaky[bug_config]["verdicts"] == ["false", "true"]
    assert sum(1 for x in r["flaky"] if x["flaky"]) == 1
    assert r["anomaly_by_config"] == [{"config": bug_config, "anomaly": "nonlinearizable", "runs": 1}]
    windows = {(x["config"], x["in_fault"]) for x in r["availability"]}
    assert any(inside for _, inside in windows) and any(not inside for _, inside in windows)
    for x in r["availability"]:
        assert 0 <= x["ok_fraction"] <= 1 and (x["p50_ms"] or 0) <= (x["p99_ms"] or 0)
    assert r["first_anomaly"][0]["invalid_runs"] == 1
    assert r["mismatches"] == []
    # stale-read: the lucky copy (2026-11-01) missed it, the run of today caught it
    old, new = r["bug_detection"]
    assert (old["bug"], str(old["date"]), old["runs"], old["caught"], old["rate"]) == (
        "stale-read",
        "2026-11-01",
        1,
        0,
        0,
    )
    assert (new["bug"], new["runs"], new["caught"], new["unknown"], new["rate"]) == ("stale-read", 1, 1, 0, 1)
    assert str(new["date"]) > "2026-11-01"
    assert len(r["slowest_checks"]) > 5
    assert r["slowest_checks"][0]["seconds"] >= r["slowest_checks"][-1]["seconds"]
    assert sorted(p.name for p in (out / "rollups").iterdir()) == sorted(f"{n}.parquet" for n in r if n != "totals")


def test_report(store: dict[str, Any], first: tuple[Any, Path]) -> None:
    result, out = first
    path = Path(write_report(result.rollups, out, store=str(store["root"]), batch=result.batch, new_runs=8))
    text = path.read_text()
    assert "Failing runs (1)" in text and "Malformed runs (3)" in text
    bug = store["bug"]
    link = urllib.parse.quote(os.path.relpath(bug.resolve() / "results.json", out.resolve()))
    assert f'href="{link}"' in text
    assert "--bug stale-read" in text and "flaky" in text
    detection = text[text.index("Seeded bugs: detection rate</h2>") :]
    assert "<code>stale-read</code></td><td>2</td><td>1</td><td>50%</td><td>100% (1/1," in detection
    assert "0% (0/1, 2026-11-01)</td><td>↑</td>" in detection
    for png in ("pass_rate", "anomalies", "slowest_checks", "availability", "bug_detection"):
        data = (out / "plots" / f"{png}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_incremental(spark: Any, store: dict[str, Any], first: tuple[Any, Path]) -> None:
    _, out = first
    old_run = _rid(store, store["good"][0])
    before = read_table(spark, out, "ops").where(f"run_id = '{old_run}'").count()
    new = kraftwerk_test(store["root"], "--time-limit", "5", "--seed", "8", "--nemesis", "pause")
    again = analyze(store["root"], out, resolve=judging, spark=spark, since="2026-11-02")
    # the 2026-11-01 runs are before --since; of the others only the new one was not analysed before
    assert again.found == 5 and again.skipped == 4 and again.analysed == 1
    assert read_table(spark, out, "ops").where(f"run_id = '{old_run}'").count() == before
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["batches"]) == 2 and _rid(store, new) in manifest["runs"]
    assert again.rollups["totals"][0]["runs"] == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "--since"),
        (["--master", "yarn"], "--master"),
        (["--check-time-limit", "0"], "--check-time-limit"),
    ],
)
def test_analyze_bad_arguments_exit_254(tmp_path: Path, args: list[str], message: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", str(tmp_path), "--out", str(tmp_path / "o"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 254 and message in r.stderr


def test_analyze_missing_store_exits_254(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 254 and "not a directory" in r.stderr


def test_a_session_running_in_this_process_is_used_and_left_running(
    spark: Any, store: dict[str, Any], tmp_path: Path
) -> None:
    """analyze (and the fleet) without a session of their own use the one running here and do not stop it: it is
    its owner's (this test session's)."""
    result = analyze(store["root"], tmp_path / "out", resolve=judging, check_time_limit=30)
    assert result.found >= 8 and result.analysed == result.found  # a fresh output: every run of the store
    assert spark.range(3).count() == 3  # still alive
