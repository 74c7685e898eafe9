"""Explore → shrink → replay for every seeded bug (issue "Reproduce failures from seeds and shrink them").

For each bug: how long `explore` takes to find an invalid run (target ≤ 2 min), the schedule's size
before and after `shrink` (target ≤ 5 fault events and ≤ 50 operations), and whether the minimal
schedule replays byte-identically. The quorum bugs run on the register workload, the broker bugs
(and lazy-flush once more) on the queue workload.

Usage: .venv/bin/python benchmarks/shrink.py [--budget 5m] [--max-runs N] [--bugs a,queue:b,…]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.commands.explore import run as run_explore  # noqa: E402
from harness.commands.replay import run as run_replay  # noqa: E402
from harness.commands.shrink import run as run_shrink  # noqa: E402

BUGS = [
    "forget-vote",
    "restart-as-leader",
    "vote-ignores-log",
    "stale-read",
    "commit-old-epoch",
    "lazy-flush",
    "queue:hw-from-leader",
    "queue:no-truncate",
    "queue:stale-leader-produce",
    "queue:lazy-flush",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default=None, help="wall time per shrink (default 5m without --max-runs)")
    parser.add_argument("--max-runs", default=None, help="simulator runs per shrink (machine-independent)")
    parser.add_argument("--bugs", default=",".join(BUGS))
    args = parser.parse_args()
    print(f"machine: {platform.node()} — {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    budget = " and ".join(
        [f"{args.max_runs} runs"] * (args.max_runs is not None)
        + [args.budget or "5m"] * (args.budget is not None or args.max_runs is None)
    )
    print(f"shrink budget {budget} per bug; explore: 30 s runs, seeds from 0, budget 2m\n")
    print(
        "| bug | workload | explore: attempts / seconds | before: faults / ops / nodes / clients | "
        "after: faults / ops / nodes / clients | shrink runs / seconds | replay identical |"
    )
    print("|---|---|---|---|---|---|---|")
    for entry in args.bugs.split(","):
        workload, _, bug = entry.rpartition(":")
        workload = workload or "register"
        with tempfile.TemporaryDirectory() as store:
            t = time.monotonic()
            err = io.StringIO()
            with redirect_stderr(err), redirect_stdout(io.StringIO()):
                code = run_explore(
                    argparse.Namespace(
                        workload=workload,
                        budget="2m",
                        bug=[bug],
                        nemesis="partition,kill,pause,clock",
                        nodes=5,
                        concurrency=10,
                        time_limit=30.0,
                        seed=0,
                        store=store,
                    )
                )
            explore_s = time.monotonic() - t
            attempts = err.getvalue().count("attempt ")
            if code != 1:
                missed = f"not found in {attempts} / {explore_s:.0f} s"
                print(f"| {bug} | {workload} | {missed} | — | — | — | — |", flush=True)
                continue
            run = (Path(store) / "latest").resolve()
            out = io.StringIO()
            with redirect_stderr(io.StringIO()), redirect_stdout(out):
                run_shrink(argparse.Namespace(run_dir=str(run), budget=args.budget, max_runs=args.max_runs, quiet=True))
            s = json.loads(out.getvalue().strip().splitlines()[-1])
            with redirect_stderr(err2 := io.StringIO()), redirect_stdout(io.StringIO()):
                run_replay(argparse.Namespace(run_dir=str(run / "minimal"), times=1))
            same = "yes" if "identical to the stored run" in err2.getvalue() else "NO"
            b, a = s["before"], s["after"]
            print(
                f"| {bug} | {workload} | {attempts} / {explore_s:.0f} s | "
                f"{b['fault-events']} / {b['operations']} / {b['nodes']} / {b['clients']} | "
                f"{a['fault-events']} / {a['operations']} / {a['nodes']} / {a['clients']} | "
                f"{s['runs']} / {s['seconds']:.0f} s | {same} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
