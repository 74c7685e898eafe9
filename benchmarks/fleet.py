"""Simulated runs per second on one process, on local[N] and on a Spark cluster; analyze on the cluster.

Every mode runs the same TestSpecs (register workload, 5 nodes, the default nemeses, --time-limit
simulated seconds each, seeds --seed…) through `harness.tools.fleet.run_fleet`, storing every run, and
reports runs per second and simulated seconds per wall second (the wall time includes starting
Spark and its executors: what a user waits for). The cluster is `kraftwerk spark up --workers W`
on this machine's containers unless --master names one. Then `kraftwerk analyze` reads the
cluster's store on the same cluster.

Usage: .venv/bin/python benchmarks/fleet.py [--runs 100] [--time-limit 10] [--local 2] [--workers 2]
       [--master spark://HOST:PORT] [--analyze-runs 1000] [--modes one,local,cluster,analyze]
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the project, before benchmarks/checkers.py

from harness.core.spec import TestSpec  # noqa: E402
from harness.tools.fleet import run_fleet  # noqa: E402


def specs(first: int, count: int, time_limit: float) -> list[TestSpec]:
    return [TestSpec(seed=first + i, time_limit=time_limit, name="fleet-bench") for i in range(count)]


def measure(label: str, runs: list[TestSpec], store: Path, master: str | None) -> tuple[str, float, float, int]:
    started = time.monotonic()
    rows = run_fleet(runs, str(store), master=master, keep="all")
    wall = time.monotonic() - started
    simulated = sum(r.sim_seconds for r in rows)
    print(f"{label}: {len(rows)} runs in {wall:.1f} s", file=sys.stderr, flush=True)
    return label, len(rows) / wall, simulated / wall, sum(1 for r in rows if r.invalid)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--local", type=int, default=2, help="N of local[N] (default 2)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--master", default=None, help="an existing cluster (default: spark up on containers)")
    p.add_argument("--analyze-runs", type=int, default=1000)
    p.add_argument("--modes", default="one,local,cluster,analyze")
    args = p.parse_args()
    modes = set(args.modes.split(","))
    work = Path(tempfile.mkdtemp(prefix="kraftwerk-fleet-bench-", dir="/tmp"))
    rows = []
    name = "kwspark-bench"
    master = args.master
    started_cluster = False
    try:
        if "one" in modes:
            rows.append(measure("1 process", specs(args.seed, args.runs, args.time_limit), work / "one", None))
        if "local" in modes:
            runs = specs(args.seed, args.runs, args.time_limit)
            rows.append(measure(f"local[{args.local}]", runs, work / "local", f"local[{args.local}]"))
        if modes & {"cluster", "analyze"} and master is None:
            from harness.tools.spark_cluster import up

            t = time.monotonic()
            master = up(args.workers, work / "cluster", name=name).master_url
            started_cluster = True
            print(f"spark up --workers {args.workers}: {time.monotonic() - t:.1f} s", file=sys.stderr)
        if "cluster" in modes:
            runs = specs(args.seed, args.runs, args.time_limit)
            label = f"{args.workers}-worker cluster"
            rows.append(measure(label, runs, work / "cluster" / "runs", master))
        analyzed = None
        if "analyze" in modes:
            from checkers.pipeline.job import analyze

            store = work / "cluster" / "analyze-store"
            measure("analyze store", specs(10_000, args.analyze_runs, args.time_limit), store, master)
            t = time.monotonic()
            result = analyze(store, work / "cluster" / "analysis", master=master)
            analyzed = (result.analysed, time.monotonic() - t, result.ops)
    finally:
        if started_cluster:
            from harness.tools.spark_cluster import down

            down(name)
    load = os.getloadavg()[0]
    print(f"\n{platform.node()}, {os.cpu_count()} cores, load {load:.1f} at the end\n")
    print(f"{args.runs} runs of {args.time_limit:g} simulated seconds (register, 5 nodes, default nemeses)\n")
    print("| where | runs/s | simulated s per wall s | invalid |")
    print("|---|---|---|---|")
    for label, rps, speed, invalid in rows:
        print(f"| {label} | {rps:.2f} | {speed:.0f}× | {invalid} |")
    if analyzed is not None:
        runs, seconds, ops = analyzed
        print(f"\nanalyze on the cluster: {runs} runs ({ops:,} operations) in {seconds:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
