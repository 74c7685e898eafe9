"""`kraftwerk test --db etcd` on docker and netns: 5 etcd members, the register workload, partitions, kills, pauses
and clock faults for 60 s (the members run under clocktrace, so the clock faults reach etcd). Linearizable reads
are valid; serializable reads (answered from one member's own state, which etcd documents may be stale) come back
invalid within three runs. A suite that mixes `db = "etcd"` with our nodes runs both and stores both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness.real import realtest
from tests.harness.real.backends.clusters import (
    need_root,
    node_image,  # noqa: F401 - fixture
)
from tests.requirements import need

pytestmark = [pytest.mark.slow, pytest.mark.nightly]  # minutes each: CI and `./run tests --nightly` run them

FAULTS = ("--nemesis", "partition,kill,pause,clock", "--nodes", "5", "--time-limit", "60")


def etcd_run(store: Path, backend: str, read: str, seed: int) -> tuple[int, dict[str, Any], Path]:
    r = realtest.kraftwerk_test(
        store, "--db", "etcd", "--etcd-read", read, "--backend", backend, *FAULTS, "--seed", str(seed), timeout=900
    )
    assert r.returncode in (0, 1), r.stderr[-3000:]
    run = realtest.latest(store)
    return r.returncode, realtest.results(run), run


def clock_faults_reached_etcd(res: dict[str, Any], run: Path) -> dict[str, Any]:
    """Every member ran under clocktrace; the offsets the nemesis set show in the members' logs, and the big ones
    in the wall clock etcd's own answers carried (the Date headers the status poller read). What was seen."""
    bumps = [
        (n, v["offset-ms"])
        for op in realtest.history_lines(run)
        if op.get("process") == "nemesis" and op.get("f") == "bump-clock" and isinstance(op.get("value"), dict)
        for n, v in op["value"].items()
        if isinstance(v, dict) and "offset-ms" in v
    ]
    logs = {n: (run / "nodes" / n / "etcd.log").read_text() for n in (f"n{i}" for i in range(1, 6))}
    for n, log in logs.items():
        assert "vDSO hidden" in log, n
    applied = [(n, ms) for n, ms in bumps if f"clock offset {ms / 1000:+.6f} s" in logs[n]]
    skews = res["run"]["collect-notes"]["clock-skew-s"]
    assert bumps and applied, (bumps, skews)
    if any(abs(ms) >= 5000 for _, ms in bumps):
        assert any(lo <= -3 or hi >= 3 for lo, hi in skews.values()), (bumps, skews)
    return {"bumps": bumps, "in-logs": applied, "skews": skews}


def check_valid_run(code: int, res: dict[str, Any], run: Path) -> None:
    assert code == 0 and res["valid"] is True, json.dumps({k: v for k, v in res.items() if k != "run"})[:3000]
    assert res["epochs"]["valid"] is True and res["epochs"]["stats"]["events"] > 5
    stats = res["run"]
    assert stats["recovered"] is True and stats["unread-keys"] == [] and stats["nemesis-errors"] == []
    assert res["stats"]["by-f"]["cas"]["ok"] > 0 and res["stats"]["by-f"]["read"]["ok"] > 0
    schedule = json.loads((run / "schedule.json").read_text())
    assert {"start-partition", "kill", "pause", "bump-clock"} <= {e["f"] for e in schedule["nemesis"]}
    for n in range(1, 6):
        log = (run / "nodes" / f"n{n}" / "etcd.log").read_text()
        assert '"msg":"starting an etcd server"' in log
    test = json.loads((run / "test.json").read_text())
    assert test["db"] == "etcd"
    clock_faults_reached_etcd(res, run)
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []


def serializable_goes_stale(store: Path, backend: str) -> list[str]:
    """Up to three serializable runs; the verdicts seen (stops at the first invalid one)."""
    seen = []
    for seed in (1, 2, 3):
        code, res, run = etcd_run(store, backend, "serializable", seed)
        clock_faults_reached_etcd(res, run)
        seen.append(f"seed {seed}: {res['valid']} {res.get('anomaly-types') or ''}")
        if code == 1:
            assert res["linearizable"]["valid"] is False  # a stale read, not some other finding
            assert res["epochs"]["valid"] is True
            break
    return seen


@pytest.mark.docker
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_etcd_on_docker_linearizable_reads_are_valid(node_image: str, tmp_path: Path, seed: int) -> None:  # noqa: F811
    check_valid_run(*etcd_run(tmp_path, "docker", "linearizable", seed))


@pytest.mark.docker
def test_etcd_on_docker_serializable_reads_go_stale(node_image: str, tmp_path: Path) -> None:  # noqa: F811
    seen = serializable_goes_stale(tmp_path, "docker")
    assert any("False" in s for s in seen), seen


def test_etcd_on_netns_linearizable_valid_serializable_stale(tmp_path: Path) -> None:
    need_root()
    check_valid_run(*etcd_run(tmp_path / "lin", "netns", "linearizable", 1))
    seen = serializable_goes_stale(tmp_path / "ser", "netns")
    assert any("False" in s for s in seen), seen


def test_suite_mixes_etcd_and_our_nodes(tmp_path: Path) -> None:
    """One suite, two systems: short runs of etcd and of our nodes on the local backend, both stored and
    judged; the shipped suites/etcd.toml plans etcd and our nodes with the same run shape."""
    from harness.tools.suite import load_suite

    need("etcd")
    shipped = load_suite(Path(__file__).resolve().parents[2] / "suites" / "etcd.toml")
    etcd = [r for r in shipped.runs if "--db" in r.argv]
    ours = [r for r in shipped.runs if "--db" not in r.argv]
    assert len(etcd) == 6 and len(ours) == 3
    assert {r.argv[r.argv.index("--nemesis") + 1] for r in shipped.runs} == {"partition,kill,pause,clock"}

    suite = tmp_path / "mixed.toml"
    suite.write_text(
        '[suite]\nname = "mixed"\nparallel = 1\nseeds = [4]\n'
        '[defaults]\nworkloads = ["register"]\nbackends = ["local"]\nnemeses = ["kill,pause"]\nnodes = 3\n'
        "time-limit = 10\n"
        '[[matrix]]\nname = "etcd"\ndb = "etcd"\n'
        '[[matrix]]\nname = "ours"\n'
    )
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "suite", str(suite), "--store", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    tests = {p.parent.parent.name: json.loads(p.read_text()) for p in (tmp_path / "s").glob("*/2*/test.json")}
    assert tests["etcd"]["db"] == "etcd" and tests["ours"]["db"] == "kraftwerk"
    for name in ("etcd", "ours"):
        res = json.loads(next((tmp_path / "s" / name).glob("2*/results.json")).read_text())
        assert res["valid"] is True and res["stats"]["ok"] > 20
