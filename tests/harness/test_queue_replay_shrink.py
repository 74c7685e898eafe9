"""explore → replay → shrink of queue-workload runs, and the regression test shrink writes for them."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.verdict import failing_key
from harness.cli import build_parser
from harness.commands.explore import run as run_explore
from harness.commands.replay import run as run_replay
from harness.commands.shrink import run as run_shrink
from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.runs import from_schedule, simulate
from harness.tools.shrink import build


def explore_queue(store: Path, bug: str, seed: int = 0, budget: str = "90s") -> Path:
    words = ["explore", "--workload", "queue", "--budget", budget, "--bug", bug, "--seed", str(seed)]
    args = build_parser().parse_args([*words, "--store", str(store)])
    assert run_explore(args) == 1, f"explore did not find {bug}"
    return (store / "latest").resolve()


def shrink(run: Path, runs: int, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """`kraftwerk shrink RUN --max-runs RUNS -q`'s summary (a run budget: the same result on any machine)."""
    capsys.readouterr()
    assert run_shrink(argparse.Namespace(run_dir=str(run), max_runs=runs, quiet=True)) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def regression_test_outcomes(minimal: Path, bug: str) -> tuple[int, int]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(minimal / "test_regression.py")]
    env = dict(os.environ)
    with_bug = subprocess.run(cmd, env={**env, "KRAFTWERK_BUGS": bug}, capture_output=True, text=True)
    without = subprocess.run(cmd, env={**env, "KRAFTWERK_BUGS": ""}, capture_output=True, text=True)
    return with_bug.returncode, without.returncode


@pytest.fixture(scope="module")
def hw_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return explore_queue(tmp_path_factory.mktemp("explore-queue"), "hw-from-leader")


def test_explore_stores_a_replayable_queue_run(hw_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test = json.loads((hw_run / "test.json").read_text())
    schedule = json.loads((hw_run / "schedule.json").read_text())
    assert test["workload"] == schedule["test"]["workload"] == "queue" and schedule["test"]["acks"] == "all"
    assert schedule["ops"] and {op["f"] for op in schedule["ops"]} == {"assign", "send", "poll"}
    assert json.loads((hw_run / "results.json").read_text())["valid"] is False
    assert list((hw_run / "logs" / "partitions").iterdir())
    capsys.readouterr()
    assert run_replay(build_parser().parse_args(["replay", str(hw_run), "--times", "2"])) == 1
    assert capsys.readouterr().err.count("identical to the stored run") == 2


@pytest.mark.slow
def test_shrink_a_queue_run_keeps_its_anomaly_class(hw_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = shrink(hw_run, 150, capsys)
    before, after = summary["before"], summary["after"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert after["operations"] < before["operations"] and after["fault-events"] <= before["fault-events"]
    assert summary["valid-without-bugs"] is not False
    minimal = hw_run / "minimal"
    doc = json.loads((minimal / "schedule.json").read_text())
    assert doc["test"]["workload"] == "queue" and len(doc["ops"]) == after["operations"]
    # the minimal schedule still fails, with an anomaly of the original class, and replays byte for byte
    original = set(json.loads((hw_run / "results.json").read_text())["anomaly-types"])
    shrunk = json.loads((minimal / "results.json").read_text())
    assert shrunk["valid"] is False and set(shrunk["anomaly-types"]) & original
    assert run_replay(build_parser().parse_args(["replay", str(minimal), "--times", "1"])) == 1
    # the regression test fails while the bug is on and passes once it is off
    assert regression_test_outcomes(minimal, "hw-from-leader") == (1, 0)


@pytest.mark.slow
def test_shrink_reaches_the_targets_for_no_truncate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bug the partition-log comparison catches (committed-divergence), not the history checker."""
    run = explore_queue(tmp_path, "no-truncate")
    summary = shrink(run, 400, capsys)
    after = summary["after"]
    assert isinstance(after, dict)
    assert after["fault-events"] <= 5 and after["operations"] <= 50
    assert run_replay(build_parser().parse_args(["replay", str(run / "minimal"), "--times", "1"])) == 1
    assert regression_test_outcomes(run / "minimal", "no-truncate") == (1, 0)


def test_build_keeps_queue_ops_without_a_node() -> None:
    ops = [
        {"at": 1, "client": 4, "f": "assign", "key": None, "value": ["t0-1"]},
        {"at": 2, "client": 4, "f": "poll", "key": "t0-1", "value": None},
        {"at": 3, "client": 9, "f": "send", "key": "t0-0", "value": 7},
    ]
    spec, plan = build((TestSpec(workload="queue"), SimPlan()), [], ops, 3, 5.0)
    assert [o["client"] for o in plan.ops or []] == [0, 0, 1] and spec.concurrency == 2
    assert all("node" not in o for o in plan.ops or [])


def test_failing_key_from_queue_and_partition_log_anomalies() -> None:
    queue = {"queue": {"anomalies": {"lost-write": {"count": 1, "examples": [{"key": "t0-2", "offset": 3}]}}}}
    assert failing_key(queue) == "t0-2"
    logs = {"partition-logs": {"anomalies": {"committed-divergence": [{"partition": "t0-1", "offset": 0}]}}}
    assert failing_key(logs) == "t0-1"
    assert failing_key({"linearizable": {"failure": {"key": "r3"}}}) == "r3"
    assert failing_key({}) is None


def test_a_queue_schedule_without_ops_still_runs() -> None:
    """Shrink's "drop every operation" candidate: the final drain alone runs, finds no anomaly, and the run is
    unknown (it tested nothing: no operation in the main phase), never invalid."""
    doc = {
        "format": 2,
        "workload": "queue",
        "seed": 3,
        "nodes": 3,
        "concurrency": 1,
        "time-limit": 2,
        "nemesis": [],
        "ops": [],
    }
    checked = simulate(*from_schedule(doc))
    assert checked.valid == "unknown" and not checked.anomalies
    assert checked.results["stats"]["error"] == "no client operation in the main phase"
    assert checked.results["queue"]["valid"] is True and checked.results["epochs"]["valid"] is True
