"""benchmarks/cputime.py counts the CPU of descendants nobody waits for (a driver's JVM, a daemon's workers)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the root starts a child that spins 1 CPU s, learns it is done, and exits without reaping it:
# `time` would report only the root's own fraction of a second
CHILD = (
    "import time\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 1.0: pass\n"
    "print('done', flush=True)\n"
    "time.sleep(1)\n"
)
ROOT_PROGRAM = (
    "import os, subprocess, sys\n"
    f"p = subprocess.Popen([sys.executable, '-c', {CHILD!r}], stdout=subprocess.PIPE, text=True)\n"
    "assert p.stdout.readline().strip() == 'done'\n"
    "os._exit(3)\n"
)


def test_a_child_the_command_never_waits_for_is_counted() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "cputime.py"),
            "--interval",
            "0.05",
            "--",
            sys.executable,
            "-c",
            ROOT_PROGRAM,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr  # the command's own exit code
    m = re.search(r"cputime: ([\d.]+) s wall, ([\d.]+) CPU s over (\d+) processes", done.stderr)
    assert m is not None, done.stderr
    assert int(m.group(3)) == 2
    assert float(m.group(2)) >= 0.5


def test_no_command_is_a_bad_option() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cputime.py")], capture_output=True, text=True)
    assert done.returncode == 254
    assert "give a command" in done.stderr
