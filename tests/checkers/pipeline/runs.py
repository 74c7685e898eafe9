"""Helpers for the pipeline tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def kraftwerk_test(store: Path, *args: str) -> Path:
    """Run `kraftwerk test` (sim) into `store`; return the run directory."""
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1, 2), r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("run directory "))
    return Path(line[len("run directory ") :])
