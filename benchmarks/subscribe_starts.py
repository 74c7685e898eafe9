"""Where rebalanced consumers start (issue 17, item 5): `--sub-via subscribe` simulator runs, checked.

Runs ``kraftwerk test --workload queue --backend sim --sub-via subscribe --nodes 5`` (every nemesis:
partition, kill, pause, clock) for each seed, optionally with seeded bugs, and prints one JSON line
per seed: the verdict, the bad anomaly types, how many assignment starts the polls that joined
recorded (``assigned``), how many the checker found past every commit in effect
(``start-past-commit``) and before every one (``start-before-commit``, re-delivery), and the run's
wall time; then a summary line.

Usage: .venv/bin/python benchmarks/subscribe_starts.py --seeds 1-20 [--bug NAME]… [--time-limit 30]
"""

from __future__ import annotations

import argparse
import json
import time

from harness.core.spec import TestSpec
from harness.sim.runs import simulate


def run(seed: int, time_limit: float, bugs: tuple[str, ...]) -> dict:
    started = time.monotonic()
    spec = TestSpec.of(seed=seed, time_limit=time_limit, workload="queue", nodes=5, sub_via="subscribe", bugs=bugs)
    verdict = simulate(spec, check_time_limit=60).results
    q = verdict["queue"]
    below = q.get("start-before-commit", {})
    return {
        "seed": seed,
        "valid": verdict["valid"],
        "bad": q.get("bad-anomaly-types"),
        "starts": q["stats"].get("assignment-starts", 0),
        "start-past-commit": q["anomalies"].get("start-past-commit", {}).get("count", 0),
        "start-before-commit": below.get("count", 0),
        "unjudged-starts": below.get("unjudged-starts", 0),
        "s": round(time.monotonic() - started, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-20", help="a range A-B")
    ap.add_argument("--bug", action="append", default=[])
    ap.add_argument("--time-limit", type=float, default=30.0)
    args = ap.parse_args()
    first, _, last = args.seeds.partition("-")
    rows = []
    for seed in range(int(first), int(last or first) + 1):
        rows.append(run(seed, args.time_limit, tuple(args.bug)))
        print(json.dumps(rows[-1]), flush=True)
    summary = {
        "runs": len(rows),
        "valid": sum(r["valid"] is True for r in rows),
        "with-start-past-commit": sum(r["start-past-commit"] > 0 for r in rows),
        "with-start-before-commit": sum(r["start-before-commit"] > 0 for r in rows),
        "starts": sum(r["starts"] for r in rows),
        "unjudged-starts": sum(r["unjudged-starts"] for r in rows),
        "s": round(sum(r["s"] for r in rows), 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
