"""benchmarks/checkers.py says so and exits 2 when Porcupine's test binary is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_without_porcupine_it_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PORCUPINE_TEST"}
    for extra in ([], ["--porcupine", str(tmp_path / "porcupine.test")]):
        proc = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "checkers.py"), *extra],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert proc.returncode == 2
        assert "Porcupine's test binary is not there" in proc.stderr
        assert "go test -c" in proc.stderr
