"""One run, one verdict: a stored run gets the same verdict from every command that judges it.

For each case a run is made with `kraftwerk test`; then `kraftwerk check RUN_DIR`, `kraftwerk analyze`
(the Spark pipeline) and `kraftwerk replay RUN_DIR` (on the simulator, where it can run the test) judge
the stored run again. All of them must give `test`'s verdict. The cases cover what used to disagree: a
queue test that allows the anomalies its weak settings cause, transactions (ww-deps), consumer groups,
a seeded bug of each workload, and etcd on docker; and a transactional run replayed on docker is judged
by the transactional checker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkers.pipeline.job import analyze, read_table
from checkers.verdict import exit_code
from harness.core.checks import judging

ROOT = Path(__file__).resolve().parent.parent
VERDICT_EXITS = {0: "valid", 1: "invalid", 2: "unknown"}

# name: (test options, the verdict `test` must give: the cases are not vacuous)
SIM_CASES: dict[str, tuple[list[str], str]] = {
    "register": (["--workload", "register", "--seed", "3", "--time-limit", "12"], "valid"),
    "queue-acks-1-allowed": (
        [
            "--workload",
            "queue",
            "--acks",
            "1",
            "--allow",
            "lost-write",
            "--allow",
            "inconsistent-offsets",
            "--allow",
            "nonmonotonic-send",
            "--allow",
            "unseen",
            "--nemesis",
            "partition,kill",
            "--time-limit",
            "30",
            "--seed",
            "1",
        ],
        "valid",
    ),
    "queue-txn": (["--workload", "queue", "--txn", "--seed", "4", "--time-limit", "20"], "valid"),
    "queue-subscribe": (
        ["--workload", "queue", "--sub-via", "subscribe", "--seed", "6", "--time-limit", "20"],
        "valid",
    ),
    "register-stale-read": (
        ["--workload", "register", "--bug", "stale-read", "--seed", "1", "--time-limit", "20"],
        "invalid",
    ),
    "queue-no-truncate": (
        ["--workload", "queue", "--bug", "no-truncate", "--nemesis", "partition,kill", "--seed", "2"]
        + ["--time-limit", "30"],
        "invalid",
    ),
}


def kraftwerk(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def make_run(store: Path, *options: str) -> tuple[int, Path]:
    """`kraftwerk test` into `store`: its exit code and run directory."""
    r = kraftwerk("test", "--store", str(store), *options)
    assert r.returncode in VERDICT_EXITS, r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("run directory "))
    return r.returncode, Path(line.removeprefix("run directory "))


def analyzed(spark: Any, store: Path, out: Path) -> dict[str, str]:
    """`kraftwerk analyze`'s verdict of every run in `store`, by run directory."""
    result = analyze(store, out, resolve=judging, spark=spark)
    assert result.errors == 0, read_table(spark, out, "errors").collect()
    return {row["run_dir"]: row["valid"] for row in read_table(spark, out, "verdicts").collect()}


@pytest.mark.slow
@pytest.mark.needs("java")
def test_every_command_gives_a_simulated_run_the_verdict_test_gave(tmp_path: Path, spark: Any) -> None:
    store = tmp_path / "store"
    runs = {name: make_run(store, "--backend", "sim", *options) for name, (options, _) in SIM_CASES.items()}
    for name, (code, _) in runs.items():
        assert VERDICT_EXITS[code] == SIM_CASES[name][1], f"{name}: `kraftwerk test` exited {code}"
    by_analyze = analyzed(spark, store, tmp_path / "analysis")
    disagreements = []
    for name, (code, run) in runs.items():
        check = kraftwerk("check", "-q", str(run))
        replay = kraftwerk("replay", str(run))
        assert "DIFFERS" not in replay.stderr, replay.stderr
        verdicts = {
            "test": VERDICT_EXITS[code],
            "check": VERDICT_EXITS.get(check.returncode, f"exit {check.returncode}"),
            "analyze": {"true": "valid", "false": "invalid"}.get(by_analyze[str(run.resolve())], "unknown"),
            "replay --backend sim": VERDICT_EXITS.get(replay.returncode, f"exit {replay.returncode}"),
        }
        if len(set(verdicts.values())) != 1:
            disagreements.append(f"{name}: {verdicts}")
        # what check printed is the result test stored, part by part
        stored = json.loads((run / "results.json").read_text())
        rechecked = json.loads(check.stdout)
        assert {k for k, v in stored.items() if isinstance(v, dict) and "valid" in v} == {
            k for k, v in rechecked.items() if isinstance(v, dict) and "valid" in v
        }
        assert rechecked["valid"] == stored["valid"] and exit_code(stored["valid"]) == code
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.needs("docker", "etcd")
def test_an_etcd_run_on_docker_gets_one_verdict(tmp_path: Path, spark: Any) -> None:
    """etcd: `test` on docker, `check` and `analyze` agree (the simulator cannot run etcd: replay refuses it)."""
    store = tmp_path / "store"
    code, run = make_run(
        store, "--db", "etcd", "--backend", "docker", "--nodes", "3", "--time-limit", "10", "--seed", "2"
    )
    assert code == 0
    assert kraftwerk("check", "-q", str(run)).returncode == code
    assert analyzed(spark, store, tmp_path / "analysis")[str(run.resolve())] == "true"
    refused = kraftwerk("replay", str(run), "--backend", "sim")
    assert refused.returncode == 254 and "--db etcd runs on --backend" in refused.stderr


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.needs("docker")
def test_a_txn_run_replayed_on_docker_is_judged_as_transactions(tmp_path: Path) -> None:
    """The replay carries every option of the stored run (--txn among them) to the real cluster, and its
    attempt is judged by the transactional checker, with the stored test's ww-deps."""
    code, run = make_run(
        tmp_path / "sim", "--backend", "sim", "--workload", "queue", "--txn", "--seed", "4", "--time-limit", "10"
    )
    assert code == 0
    r = kraftwerk("replay", str(run), "--backend", "docker", "--store", str(tmp_path / "docker"), "-q")
    assert r.returncode in (0, 1, 2), r.stderr
    (attempt,) = (tmp_path / "docker").glob("*/2*/results.json")
    results = json.loads(attempt.read_text())
    assert results["checking"] == {"model": "txn-queue", "allow": [], "ww-deps": True}
    assert results["queue"]["stats"]["txns"]["ok"] > 0  # the transactional checker's own statistics
    test = json.loads((attempt.parent / "test.json").read_text())
    assert test["txn"] is True and test["backend"] == "docker"
