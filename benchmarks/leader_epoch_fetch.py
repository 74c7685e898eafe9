"""Consumer fetches fenced by leader epoch (KIP-320): verdicts, digests and fencing answers, simulator.

Runs ``kraftwerk test --workload queue --backend sim --nodes 5`` (every nemesis: partition, kill,
pause, clock) for each seed, in assign or subscribe mode, optionally with seeded bugs, and prints
one JSON line per run: the verdict, the bad anomaly types, the history's sha256 (same seed, same
code: same digest), how many completions carry each leadership error of a fetch
(offset_out_of_range, fenced_leader_epoch, unknown_leader_epoch, stale-metadata), and the wall
time; then a summary line. Run it on two trees to compare them (it imports only the harness).

Usage: .venv/bin/python -m benchmarks.leader_epoch_fetch --seeds 1-20 [--sub-via subscribe]
       [--time-limit 120] [--bug NAME]… [--nemesis none]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from harness.core.spec import TestSpec
from harness.nemesis.schedule import ALL, parse_nemeses
from harness.sim.runs import simulate

ERRORS = ("offset_out_of_range", "fenced_leader_epoch", "unknown_leader_epoch", "stale-metadata")


def run(seed: int, sub_via: str, time_limit: float, bugs: tuple[str, ...], nemeses: tuple[str, ...] = ALL) -> dict:
    started = time.monotonic()
    spec = TestSpec.of(
        seed=seed, time_limit=time_limit, workload="queue", nodes=5, sub_via=sub_via, bugs=bugs, nemeses=nemeses
    )
    checked = simulate(spec, check_time_limit=60)
    verdict, result = checked.results, checked.sim
    history = result.recorder.history()
    errors = Counter(op.error for op in history if op.type != "invoke" and op.error in ERRORS)
    return {
        "seed": seed,
        "valid": verdict["valid"],
        "bad": verdict["queue"].get("bad-anomaly-types"),
        "sha256": result.stats["history-sha256"][:16],
        "errors": dict(sorted(errors.items())),
        "s": round(time.monotonic() - started, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-20", help="a range A-B")
    ap.add_argument("--sub-via", default="assign", choices=("assign", "subscribe"))
    ap.add_argument("--bug", action="append", default=[])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--nemesis", default="all", help="as kraftwerk test's --nemesis (none: no faults)")
    args = ap.parse_args()
    first, _, last = args.seeds.partition("-")
    rows = []
    started = time.monotonic()
    for seed in range(int(first), int(last or first) + 1):
        row = run(seed, args.sub_via, args.time_limit, tuple(args.bug), tuple(parse_nemeses(args.nemesis)))
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {
        "runs": len(rows),
        "valid": sum(1 for r in rows if r["valid"] is True),
        "invalid": sum(1 for r in rows if r["valid"] is False),
        "errors": dict(sum((Counter(r["errors"]) for r in rows), Counter())),
        "s": round(time.monotonic() - started, 1),
    }
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()
