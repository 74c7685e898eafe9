"""The queue workload on real clusters: ops/s and verdicts per case (prints a table; RESULTS.md is not touched).

    python benchmarks/real_queue.py [--backends docker,netns] [--seeds 1,2,3,4] [--time-limit 30]
                                    [--cases acks-all,acks-1,acks-1-fast,hw-from-leader,no-truncate,…]

Each case is `kraftwerk test --workload queue --backend B --seed S …` (5 nodes, 10 clients, topic
of 3 partitions, RF 3, min ISR 2), once per seed:

* acks-all: `--nemesis partition,kill` every ~5 s — Kafka's safe profile, must stay valid;
* acks-1: `--acks 1 --nemesis kill --interval 2` — leader kills lose acknowledged writes;
* acks-1-fast: the same with `--interval 1`;
* hw-from-leader: acks=all, `--bug hw-from-leader --nemesis kill --interval 2`;
* no-truncate, stale-leader-produce: acks=all, `--bug B` with the default faults every ~5 s.

Reported per run: exit code, verdict, queue anomaly counts, ops/s of the main phase, wall
seconds, and the load average when it started.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "acks-all": ["--nemesis", "partition,kill"],
    "acks-1": ["--acks", "1", "--nemesis", "kill", "--interval", "2"],
    "acks-1-fast": ["--acks", "1", "--nemesis", "kill", "--interval", "1"],
    "hw-from-leader": ["--bug", "hw-from-leader", "--nemesis", "kill", "--interval", "2"],
    "no-truncate": ["--bug", "no-truncate"],
    "stale-leader-produce": ["--bug", "stale-leader-produce"],
}


def run_once(backend: str, case: str, seed: int, time_limit: float, store: Path) -> dict:
    load = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "harness.cli", "test", "--workload", "queue", "--backend", backend]
    cmd += ["--time-limit", str(time_limit), "--seed", str(seed), "--store", str(store), "-q", *CASES[case]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=time_limit * 4 + 600)
    row = {"backend": backend, "case": case, "seed": seed, "exit": proc.returncode, "load": round(load, 1)}
    latest = store / "latest" / "results.json"
    if latest.exists():
        res = json.loads(latest.read_text())
        anomalies = res.get("queue", {}).get("anomalies", {})
        row.update(
            valid=res["valid"],
            anomalies={k: v.get("count") for k, v in anomalies.items()},
            ops_per_s=res["run"]["ops-per-second"],
            wall_s=res["run"]["wall-seconds"],
        )
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="docker,netns")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--seeds", default="1,2,3,4")
    p.add_argument("--time-limit", type=float, default=30.0)
    args = p.parse_args()
    print("| backend | case | seed | exit | valid | queue anomalies | ops/s | wall s | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kw-real-queue-") as tmp:
        for backend in args.backends.split(","):
            for case in args.cases.split(","):
                for seed in (int(s) for s in args.seeds.split(",")):
                    store = Path(tmp) / f"{backend}-{case}-{seed}"
                    r = run_once(backend, case, seed, args.time_limit, store)
                    print(
                        f"| {r['backend']} | {r['case']} | {r['seed']} | {r['exit']} | {r.get('valid', '—')} | "
                        f"{r.get('anomalies') or '—'} | {r.get('ops_per_s', '—')} | {r.get('wall_s', '—')} | "
                        f"{r['load']} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
