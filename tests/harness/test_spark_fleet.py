"""Simulated runs as Spark tasks (`explore --runs N --master …`) and a Spark cluster on containers.

The fleet gives every seed the verdict the same seed gets in one process; `kraftwerk spark up`
starts a master and workers on their own containers, `explore` runs 200 seeds there with a
seeded bug it must find, `analyze` reads the store on the same cluster, and `spark down` leaves
nothing behind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.commands.explore import run as run_explore
from harness.core.spec import TestSpec
from harness.tools.fleet import run_fleet, run_one
from tests.requirements import need

ROOT = Path(__file__).resolve().parents[2]


def explore_args(store: Path, **kw: object) -> argparse.Namespace:
    """`kraftwerk explore --bug stale-read --time-limit 5 --seed 100 --store STORE`, as the CLI parses it, with
    some values replaced (runs, master, keep, observable)."""
    words = ["explore", "--budget", "10m", "--bug", "stale-read", "--time-limit", "5", "--seed", "100"]
    args = build_parser().parse_args([*words, "--store", str(store)])
    for name, value in kw.items():
        setattr(args, name, value)
    return args


def test_master_needs_runs_and_a_known_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_explore(explore_args(tmp_path, master="local[2]")) == 254
    assert "--master needs --runs" in capsys.readouterr().err
    assert run_explore(explore_args(tmp_path, runs=2, master="yarn")) == 254
    assert "--master 'yarn'" in capsys.readouterr().err


def test_runs_in_one_process_report_every_invalid_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_explore(explore_args(tmp_path, runs=4))
    err = capsys.readouterr().err
    assert "4 runs in" in err
    stored = sorted((tmp_path / "explore-register").iterdir())
    assert len([d for d in stored if d.name != "latest"]) == 4  # --keep all
    invalid = [line for line in err.splitlines() if line.startswith("INVALID seed")]
    assert code == (1 if invalid else 0)
    for line in err.splitlines():  # each path on the line that names it, however long (a log is not wrapped)
        if line.startswith(("INVALID seed", "  replay:", "  shrink:")):
            assert str(tmp_path / "explore-register") in line
    assert not (tmp_path / ".fleet").exists()  # the progress rows are gone with the batch


def test_runs_with_quiet_print_no_progress_only_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_explore(explore_args(tmp_path, runs=2, quiet=True))
    err = capsys.readouterr().err
    assert "simulated runs in this process" not in err
    assert "2 runs in" in err
    run_explore(explore_args(tmp_path, runs=2, seed=200))
    assert "explore: 2 simulated runs in this process" in capsys.readouterr().err  # without -q: progress


def test_a_task_run_again_stores_each_run_once(tmp_path: Path) -> None:
    """Spark runs a task again when an attempt failed or its executor was lost: a run the lost
    attempt finished is not stored twice, and one it left half-written is replaced."""
    doc = TestSpec(seed=7, time_limit=2.0, name="again").to_json()
    store = str(tmp_path)
    first = run_one(0, doc, store, "all", "b1")
    assert run_one(0, doc, store, "all", "b1") == first
    half = tmp_path / "again" / "half-written"
    half.mkdir()
    (tmp_path / ".fleet" / "b1" / "1.claim").write_text(str(half))  # an attempt died after new_run
    second = run_one(1, doc, store, "all", "b1")
    assert not half.exists() and second.run_dir is not None and Path(second.run_dir).is_dir()
    runs = [d for d in (tmp_path / "again").iterdir() if d.name != "latest"]
    assert sorted(map(str, runs)) == sorted([first.run_dir, second.run_dir])


@pytest.mark.slow
@pytest.mark.spark
def test_a_local_spark_fleet_gives_each_seed_its_one_process_verdict(tmp_path: Path) -> None:
    spec = TestSpec(seed=0, time_limit=5.0, bugs=("stale-read",), name="fleet")
    specs = [TestSpec(**{**spec.__dict__, "seed": s}) for s in range(100, 106)]
    here = run_fleet(specs, str(tmp_path / "one"), keep="invalid")
    spark = run_fleet(specs, str(tmp_path / "spark"), master="local[2]", keep="invalid")
    assert [(r.seed, r.valid, r.anomalies) for r in here] == [(r.seed, r.valid, r.anomalies) for r in spark]
    assert any(r.invalid for r in spark)
    for r in spark:  # invalid runs are stored, valid ones are not (--keep invalid)
        assert (r.run_dir is not None) == r.invalid
        if r.run_dir:
            assert json.loads((Path(r.run_dir) / "results.json").read_text())["valid"] is False


def _kraftwerk(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # as a user's shell would start it: not with the Spark settings a local session in this process exported
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON")}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def _leftovers(name: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=org.kraftwerk.spark={name}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    nets = subprocess.run(
        ["docker", "network", "ls", "--filter", f"label=org.kraftwerk.spark={name}", "--format", "{{.Name}}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    return out + nets


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.spark
@pytest.mark.nightly
def test_explore_and_analyze_on_a_two_worker_cluster_of_containers(tmp_path: Path) -> None:
    need("docker", "docker-cli", "java")
    name = f"kwspark-test-{uuid.uuid4().hex[:6]}"
    store = tmp_path / "store"
    up = _kraftwerk("spark", "up", "--workers", "2", "--store", str(store), "--name", name)
    try:
        assert up.returncode == 0, up.stderr
        master = up.stdout.strip().splitlines()[-1]
        assert master.startswith("spark://")
        found = _kraftwerk(
            "explore",
            "--runs",
            "200",
            "--master",
            master,
            "--bug",
            "stale-read",
            "--time-limit",
            "5",
            "--seed",
            "100",
            "--store",
            str(store),
        )
        assert found.returncode == 1, found.stderr[-3000:]  # the seeded bug was found
        assert "200 runs in" in found.stderr
        invalid = [line for line in found.stderr.splitlines() if line.startswith("INVALID seed")]
        assert invalid and "kwspark-test" in invalid[0]  # found on a worker container
        runs = [d for d in (store / "explore-register").iterdir() if d.name != "latest"]
        assert len(runs) == 200
        out = store / "analysis"
        analysed = _kraftwerk("analyze", str(store), "--out", str(out), "--master", master, timeout=1800)
        assert analysed.returncode == 0, analysed.stderr[-3000:]
        assert "200 runs checked" in analysed.stderr + analysed.stdout and (out / "report.html").exists()
    finally:
        down = _kraftwerk("spark", "down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert _leftovers(name) == []
    assert not (store / ".spark").exists()  # the cluster's config, written into the store by `spark up`


def test_a_cluster_driver_never_binds_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loopback SPARK_LOCAL_IP (a local session's, here or in a parent process) would leave executors on
    other hosts unable to call back: the driver takes the address of its route to the master instead."""
    from checkers.pipeline import job
    from checkers.pipeline.job import driver_address

    monkeypatch.setattr(job, "_LOOPBACK_SET_HERE", False)  # as in a process that opened no local session
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    assert driver_address("local[2]") == "127.0.0.1"
    assert not driver_address("spark://192.0.2.1:7077").startswith("127.")  # TEST-NET-1: routed, never sent to
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    assert driver_address("spark://192.0.2.1:7077") == "10.1.2.3"  # a user's choice stands


def test_the_shipped_packages_zip_is_removed_when_the_driver_exits(tmp_path: Path) -> None:
    """Every cluster session zips kraftwerk's packages for its executors; a nightly driver must not leave
    one temporary directory per session behind. The zip lives until the process exits (executors
    fetch it as they start), then goes."""
    program = (
        "import sys, zipfile\n"
        "from checkers.pipeline.job import ship_packages\n"
        "class Context:\n"
        "    def addPyFile(self, path): self.added = path\n"
        "class Session:\n"
        "    sparkContext = Context()\n"
        "session = Session()\n"
        "path = ship_packages(session)\n"
        "assert session.sparkContext.added == str(path)\n"
        "assert 'harness/tools/fleet.py' in zipfile.ZipFile(path).namelist()\n"
        "print(path)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    shipped = Path(done.stdout.strip())
    assert shipped.parent.parent == tmp_path  # it was made where we look
    assert not shipped.parent.exists()


def test_two_attempts_of_one_task_at_once_store_its_run_once(tmp_path: Path) -> None:
    """A lost executor's attempt may still run beside its replacement: both simulate, the first to finish keeps
    its run, the other removes its own (the CI failure of 2026-11-28: 201 runs stored for 200)."""
    from concurrent.futures import ThreadPoolExecutor

    doc = TestSpec(seed=7, time_limit=2.0, name="twice").to_json()
    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(lambda _: run_one(0, doc, str(tmp_path), "all", "b1"), range(2)))
    assert rows[0] == rows[1]
    runs = [d for d in (tmp_path / "twice").iterdir() if d.name != "latest"]
    assert [str(d) for d in runs] == [rows[0].run_dir]
    assert sorted(p.name for p in (tmp_path / ".fleet" / "b1").iterdir()) == ["0.json"]
