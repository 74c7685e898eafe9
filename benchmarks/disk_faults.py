"""Disk faults in the simulator: false alarms over clean seeds, and how often skip-crc is caught.

Usage: .venv/bin/python benchmarks/disk_faults.py [clean|bug] [--seeds N] [--time-limit S]
           [--workload register|queue] [--nemesis disk,...] [--first SEED]

- clean: N clean seeds with the given nemeses (one line per seed, then a summary; expected: no invalid);
- bug: N seeds with --bug skip-crc; the share caught, by which checker, and the simulated seconds to the
  first detection.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # benchmarks/checkers.py must not shadow checkers/

from harness.core.spec import TestSpec  # noqa: E402
from harness.sim.runs import simulate  # noqa: E402


def one(seed: int, workload: str, nemeses: list[str], time_limit: float, bugs: list[str]) -> dict:
    spec = TestSpec(seed=seed, time_limit=time_limit, workload=workload, nemeses=tuple(nemeses), bugs=tuple(bugs))
    checked = simulate(replace(spec, check_time_limit=60.0))
    result, verdict = checked.sim, checked.results
    flips = sum(
        1
        for op in result.recorder.ops
        if op.process == "nemesis" and op.f == "start-disk"
        for what in op.value.values()
        if what.get("fault") == "corrupt" and "file" in what
    )
    return {"seed": seed, "valid": verdict["valid"], "anomalies": verdict.get("anomaly-types", []), "flips": flips}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["clean", "bug"])
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--time-limit", type=float, default=20.0)
    p.add_argument("--workload", default="register", choices=["register", "queue"])
    p.add_argument("--nemesis", default="disk")
    args = p.parse_args()
    nemeses = args.nemesis.split(",")
    bugs = ["skip-crc"] if args.mode == "bug" else []
    started = time.monotonic()
    rows = []
    for seed in range(args.first, args.first + args.seeds):
        row = one(seed, args.workload, nemeses, args.time_limit, bugs)
        rows.append(row)
        print(json.dumps(row), flush=True)
    invalid = [r for r in rows if r["valid"] is False]
    unknown = [r for r in rows if r["valid"] not in (True, False)]
    kinds = Counter(k for r in invalid for k in r["anomalies"])
    print(
        json.dumps(
            {
                "mode": args.mode,
                "workload": args.workload,
                "nemeses": nemeses,
                "seeds": args.seeds,
                "time-limit": args.time_limit,
                "invalid": len(invalid),
                "unknown": len(unknown),
                "runs-with-a-flip": sum(1 for r in rows if r["flips"]),
                "anomalies": dict(kinds),
                "wall-seconds": round(time.monotonic() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
