"""`kraftwerk replay --backend docker`: a stale-read schedule found and shrunk in the simulator comes back
on real containers (benchmarks/real_replay.py measures every seeded bug)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "harness.cli", *args]
    return subprocess.run(cmd, cwd=realtest.ROOT, capture_output=True, text=True, timeout=timeout)


def test_minimal_stale_read_schedule_reproduces_on_docker(node_image: str, tmp_path: Path) -> None:  # noqa: F811
    sim = tmp_path / "sim"
    found = cli(
        "explore", "--bug", "stale-read", "--seed", "0", "--time-limit", "20", "--budget", "1m", "--store", str(sim)
    )
    assert found.returncode == 1, found.stderr[-2000:]
    run = realtest.latest(sim)
    # the smallest schedules hang on one interleaving; --robust 3 came back in 2 of 5 docker attempts
    # (benchmarks/RESULTS.md), so up to 8 attempts (stopping at the first) miss with about 2% odds.
    # A run budget, not wall time: the same minimal schedule however loaded the machine is (seed 0's run
    # shrinks to its fixpoint, 3 faults / 2 ops / 3 nodes / 2 clients, in 1,042 runs)
    shrunk = cli("shrink", str(run), "--max-runs", "1200", "--robust", "3", "-q")
    assert shrunk.returncode == 0, shrunk.stderr[-2000:]  # 0: a smaller failing schedule was written
    shrank = json.loads(shrunk.stdout.strip().splitlines()[-1])
    assert shrank["smaller"] is True and shrank["robust-reached"] is True and shrank["max-runs"] == 1200, shrank
    assert "budget-seconds" not in shrank, shrank
    real = str(tmp_path / "real")
    r = cli("replay", str(run / "minimal"), "--backend", "docker", "--times", "8", "--store", real)
    assert r.returncode == 1, r.stderr[-4000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["target"] == ["nonlinearizable"] and summary["reproduced"] == 1, summary
    assert "reproduced in 1 of" in r.stderr, r.stderr[-2000:]
    attempt = Path(summary["runs"][-1]["run"])
    assert json.loads((attempt / "results.json").read_text())["valid"] is False
    assert (attempt / "report.html").is_file(), sorted(p.name for p in attempt.iterdir())
    _, cluster = realtest.cluster_of(attempt)
    assert realtest.leftovers(cluster) == [], cluster
