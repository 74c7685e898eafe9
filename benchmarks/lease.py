"""Leader leases in the simulator: in how many seeds a run is invalid, per nemesis set.

Usage: .venv/bin/python benchmarks/lease.py [--bug lease-wall-clock | --lease-reads] [--nemesis partition,clock]
                                            [--seeds N] [--first S] [--time-limit S] [--interval S]

Prints one line per seed (verdict, anomalies, seconds) and a summary line: invalid/seeds and the seeds caught.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project, before benchmarks/checkers.py

from harness.core.spec import TestSpec  # noqa: E402
from harness.sim.runs import simulate  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bug", action="append", default=[])
    p.add_argument("--lease-reads", action="store_true")
    p.add_argument("--nemesis", default="partition,clock")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--first", type=int, default=1)
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--interval", type=float, default=5.0)
    args = p.parse_args()
    caught = []
    started = time.perf_counter()
    for seed in range(args.first, args.first + args.seeds):
        t = time.perf_counter()
        spec = TestSpec.of(
            seed=seed,
            time_limit=args.time_limit,
            interval=args.interval,
            nemeses=tuple(args.nemesis.split(",")),
            bugs=tuple(args.bug),
            lease_reads=args.lease_reads,
        )
        checked = simulate(spec)
        if checked.valid is False:
            caught.append(seed)
        print(seed, checked.valid, sorted(checked.anomalies), f"{time.perf_counter() - t:.1f}s", flush=True)
    print(
        f"{len(caught)}/{args.seeds} invalid (seeds {caught}); bugs {args.bug or 'none'}, leases "
        f"{'on' if args.lease_reads or args.bug else 'off'}, nemesis {args.nemesis}, interval {args.interval:g} s, "
        f"{args.time_limit:g} s runs; {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
