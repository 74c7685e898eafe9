"""Simulator → docker: does a schedule found and shrunk in the simulator reproduce on real containers?

For each seeded bug (quorum bugs on the register workload, broker bugs on the queue workload):
`explore` in the simulator until a run fails, `shrink` it (short budget),
then `kraftwerk replay RUN_DIR/minimal --backend docker --times 5` (stopping at the first attempt that
shows the same anomaly class, unless --all); when the minimal schedule does not reproduce, the
original (unshrunk) failing schedule is replayed the same way. Prints a markdown table; every
attempt is stored under --store, and the replay outputs go to --store/<bug>-*.log.

Usage: .venv/bin/python benchmarks/real_replay.py [--bugs a,b] [--times 5] [--all] [--shrink-budget 400s]
       [--shrink-max-runs N] [--fsync-delay MS] [--observable] [--robust K|M/K] [--no-original]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.commands.explore import run as run_explore  # noqa: E402
from harness.commands.shrink import run as run_shrink  # noqa: E402

QUORUM_BUGS = ["forget-vote", "restart-as-leader", "vote-ignores-log", "stale-read", "commit-old-epoch", "lazy-flush"]
BROKER_BUGS = ["hw-from-leader", "no-truncate", "stale-leader-produce"]  # explored on the queue workload
BUGS = QUORUM_BUGS + BROKER_BUGS


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def replay(run: Path, store: Path, log: Path, times: int, every: bool, fsync_delay: int = 0) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "harness.cli", "replay", str(run), "--backend", "docker", "--times", str(times)]
    cmd += ["--store", str(store)] + (["--all"] if every else [])
    cmd += ["--fsync-delay", str(fsync_delay)] if fsync_delay else []
    t = time.monotonic()
    with open(log, "w") as err:
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    lines = r.stdout.strip().splitlines()
    out = json.loads(lines[-1]) if lines else {"reproduced": 0, "attempts": 0, "runs": []}
    out["exit"] = r.returncode
    out["seconds"] = time.monotonic() - t
    return out


def describe(r: dict[str, Any]) -> str:
    if not r.get("attempts"):
        return f"harness failure (exit {r['exit']})"
    runs = r["runs"]
    seen = sorted({a for x in runs if x["reproduced"] for a in x["anomalies"]})
    other = sorted({a for x in runs if not x["reproduced"] for a in x["anomalies"]})
    text = f"{r['reproduced']} of {r['attempts']}"
    if r["reproduced"] and r["attempts"] < r["times"]:
        text += f" (stopped at the first; ≤ {r['times']})"
    if seen:
        text += f": {', '.join(seen)}"
    if other:
        text += f"; other attempts: {', '.join(other)}"
    return text + f" [{r['seconds']:.0f} s]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bugs", default=",".join(BUGS))
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--all", action="store_true", help="run every attempt (default: stop at the first hit)")
    parser.add_argument(
        "--no-original", action="store_true", help="do not replay the original schedule when the minimal one fails"
    )
    parser.add_argument(
        "--shrink-budget", default="400s", help="shrink --budget: a wall-time cap (default 400s; 0 for none)"
    )
    parser.add_argument(
        "--shrink-max-runs",
        default="600",
        metavar="N",
        help="shrink --max-runs N (default 600): a run budget, so the same minimal schedule on any machine "
        "unless the --shrink-budget cap ends the shrink first (the table says so)",
    )
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per explored run (default 20)")
    parser.add_argument("--store", default="/tmp/kraftwerk-real-replay")
    parser.add_argument("--robust", default="1", metavar="K|M/K", help="shrink --robust K or M/K (default 1)")
    parser.add_argument(
        "--observable", action="store_true", help="explore and shrink with --observable (no invariant-only runs)"
    )
    parser.add_argument(
        "--fsync-delay", type=int, default=0, metavar="MS", help="a slow disk, in the simulator and on docker"
    )
    args = parser.parse_args()
    store = Path(args.store)
    store.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.node()} — {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"load at start: {uptime()}")
    print(
        f"explore: {args.time_limit:g} s runs from seed 0 (budget 2m); shrink budget {args.shrink_budget}"
        + (f", --max-runs {args.shrink_max_runs}" if args.shrink_max_runs else "")
        + "; "
        f"docker replays: up to {args.times} attempts"
        + (f", --fsync-delay {args.fsync_delay}" if args.fsync_delay else "")
        + (", explore/shrink --observable" if args.observable else "")
        + (f", shrink --robust {args.robust}" if str(args.robust) != "1" else "")
        + (" (all)\n" if args.all else ", stopping at the first reproduction\n")
    )
    print(
        "| bug | simulator anomaly class | minimal: faults / ops / nodes / clients / seconds "
        "| simulator timings failing (shrink: runs / s) | minimal on docker | original on docker |"
    )
    print("|---|---|---|---|---|---|")
    for bug in args.bugs.split(","):
        sim_store = store / "sim" / bug
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = run_explore(
                argparse.Namespace(
                    workload="queue" if bug in BROKER_BUGS else "register",
                    budget="2m",
                    bug=[bug],
                    nemesis="partition,kill,pause,clock",
                    nodes=5,
                    concurrency=10,
                    time_limit=args.time_limit,
                    seed=0,
                    store=str(sim_store),
                    observable=args.observable,
                    fsync_delay=args.fsync_delay,
                )
            )
        if code != 1:
            print(f"| {bug} | not found by explore | — | — | — | — |", flush=True)
            continue
        run = (sim_store / "latest").resolve()
        out = io.StringIO()
        with redirect_stderr(io.StringIO()), redirect_stdout(out):
            run_shrink(
                argparse.Namespace(
                    run_dir=str(run),
                    budget=None if str(args.shrink_budget) in ("0", "0s") else args.shrink_budget,
                    max_runs=args.shrink_max_runs,
                    quiet=True,
                    observable=args.observable,
                    robust=args.robust,
                )
            )
        s = json.loads(out.getvalue().strip().splitlines()[-1])
        a = s["after"]
        timings = f"{s['robust-hits']} of {s['robust']}" if "robust-hits" in s else "—"
        timings += f" ({s['runs']} runs / {s['seconds']:.0f} s"
        capped = args.shrink_max_runs and s["runs"] < int(args.shrink_max_runs) and "budget-seconds" in s
        timings += ", wall cap hit)" if capped and s["seconds"] >= s["budget-seconds"] else ")"
        minimal_on = replay(
            run / "minimal", store / "docker", store / f"{bug}-minimal.log", args.times, args.all, args.fsync_delay
        )
        original = "not needed"
        if args.no_original:
            original = "not tried"
        elif not minimal_on["reproduced"]:
            original = describe(
                replay(run, store / "docker", store / f"{bug}-original.log", args.times, args.all, args.fsync_delay)
            )
        print(
            f"| {bug} | {', '.join(s['anomaly-class'])} | {a['fault-events']} / {a['operations']} / {a['nodes']} / "
            f"{a['clients']} / {json.loads((run / 'minimal' / 'test.json').read_text())['time-limit']:.1f} | "
            f"{timings} | {describe(minimal_on)} | {original} |",
            flush=True,
        )
    print(f"\nload at end: {uptime()}")


if __name__ == "__main__":
    main()
