"""How many real-cluster runs it takes to catch each seeded quorum bug (prints a table; RESULTS.md is not touched).

    python benchmarks/real_bugs.py [--backend docker|netns|local] [--bugs a,b] [--max-runs 5] [--time-limit 20]
                                   [--nemesis kill --interval 1] [--lose-unsynced] [--fsync-delay MS]

For each bug, `kraftwerk test --backend B --bug X --seed S` runs with seeds 1, 2, … until one is
invalid (exit 1) or --max-runs is reached. Reported per bug: runs until caught (or "not caught
in N"), the anomaly types of the catching run, and the wall time spent. A clean run (no bug) is
included as a control: it must never be invalid.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUORUM_BUGS = ("stale-read", "lazy-flush", "vote-ignores-log", "forget-vote", "restart-as-leader", "commit-old-epoch")


def run_once(backend: str, bug: str | None, seed: int, args: argparse.Namespace, store: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "test",
        "--backend",
        backend,
        "--workload",
        "register",
        "--nemesis",
        args.nemesis,
        "--nodes",
        str(args.nodes),
        "--concurrency",
        str(args.concurrency),
        "--time-limit",
        str(args.time_limit),
        "--interval",
        str(args.interval),
        "--seed",
        str(seed),
        "--store",
        str(store),
        "-q",
    ]
    if bug:
        cmd += ["--bug", bug]
    if args.lose_unsynced:
        cmd.append("--lose-unsynced")
    if args.fsync_delay:
        cmd += ["--fsync-delay", str(args.fsync_delay)]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.time_limit * 4 + 600)
    seconds = time.monotonic() - started
    results: dict = {}
    latest = store / "latest" / "results.json"
    if latest.exists():
        results = json.loads(latest.read_text())
    return {
        "exit": proc.returncode,
        "seconds": seconds,
        "anomalies": results.get("anomaly-types", []),
        "stderr": proc.stderr[-2000:],
        "run": results.get("run", {}),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="docker", choices=("docker", "netns", "local"))
    p.add_argument("--bugs", default=",".join(QUORUM_BUGS), help="comma-separated bug names")
    p.add_argument("--max-runs", type=int, default=5)
    p.add_argument("--time-limit", type=float, default=20.0)
    p.add_argument("--nemesis", default="partition,kill,pause,clock")
    p.add_argument("--interval", type=float, default=5.0, help="mean seconds between faults (kraftwerk's default 5)")
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--no-control", action="store_true", help="skip the clean control run")
    p.add_argument("--lose-unsynced", action="store_true", help="kraftwerk test --lose-unsynced (power-loss kills)")
    p.add_argument("--fsync-delay", type=int, default=0, metavar="MS", help="kraftwerk test --fsync-delay")
    p.add_argument("--store", default=None, help="keep the runs here (default: a temporary directory)")
    args = p.parse_args(argv)
    bugs: list[str | None] = [b for b in args.bugs.split(",") if b]
    if not args.no_control:
        bugs = [None, *bugs]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kraftwerk-real-bugs-") as tmp:
        store = Path(args.store) if args.store else Path(tmp)
        for bug in bugs:
            spent, caught, anomalies, errors = 0.0, None, [], 0
            runs = 1 if bug is None else args.max_runs
            for seed in range(1, runs + 1):
                r = run_once(args.backend, bug, seed, args, store / (bug or "clean"))
                spent += r["seconds"]
                print(
                    f"{bug or 'clean'} seed {seed}: exit {r['exit']} in {r['seconds']:.0f}s "
                    f"{','.join(r['anomalies'])} ops/s {r['run'].get('ops-per-second')}",
                    file=sys.stderr,
                    flush=True,
                )
                if r["exit"] not in (0, 1, 2):
                    errors += 1
                    print(r["stderr"], file=sys.stderr)
                if r["exit"] == 1:
                    caught, anomalies = seed, r["anomalies"]
                    break
            rows.append((bug or "(none: control)", caught, runs, anomalies, spent, errors))
    print(f"\nreal-cluster bug detection: backend {args.backend}, {args.nodes} nodes, {args.concurrency} clients, ")
    print(
        f"nemesis {args.nemesis} every ~{args.interval:g} s, --time-limit {args.time_limit:g} s per run, "
        f"at most {args.max_runs} runs per bug\n"
    )
    print(f"| {'bug':<20} | {'runs until invalid':<22} | {'anomalies':<36} | {'wall time':>9} |")
    print(f"|{'-' * 22}|{'-' * 24}|{'-' * 38}|{'-' * 11}|")
    for name, caught, runs, anomalies, spent, errors in rows:
        if name.startswith("(none"):
            found = "invalid!" if caught else "valid (as it must be)"
        else:
            found = str(caught) if caught else f"not caught in {runs}"
        if errors:
            found += f" ({errors} errored)"
        print(f"| {name:<20} | {found:<22} | {','.join(anomalies) or '-':<36} | {spent:8.0f}s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
