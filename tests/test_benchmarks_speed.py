"""benchmarks/speed.py measures what it says: a simulated test's speed per CPU second and the verdict's delay,
this tree beside a baseline tree (here: a second checkout of the same commit, so both must agree roughly)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def test_speed_rows_for_this_tree_and_a_baseline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "speed.py"), "--rows", "sim-register,verdict", "--repeat", "1"]
        + ["--base", "HEAD", "--work", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("| ")}
    speeds = [float(x) for x in re.findall(r"\*\*(\d+)×\*\*", rows["sim-register"])]
    assert len(speeds) == 2 and all(s > 5 for s in speeds), rows["sim-register"]  # simulated s per CPU s
    delays = [float(x) for x in re.findall(r"\*\*([\d.]+) s\*\*", rows["verdict"])]
    assert len(delays) == 2 and all(0 < d < 30 for d in delays), rows["verdict"]
    assert "load average" in done.stdout and "base = " in done.stdout
    for base in tmp_path.glob("base-*"):
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=True)
