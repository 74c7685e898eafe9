"""Checker speed: whole `kraftwerk check` processes on the shared corpus, plus checker throughput.

Figures (issue "Histories and checkers"):
- all non-empty etcd logs (cas-register), one `kraftwerk check` process — target ≤ 0.5 s wall;
- c50-ok + c50-bad (kv-append), one `kraftwerk check` process — target ≤ 0.4 s wall;
- peak memory of those processes (with their forked workers) — target ≤ 1 GiB;
- the whole Knossos corpus, for reference;
- queue and epoch checker throughput on large synthetic inputs (ops/s, events/s).

Usage: .venv/bin/python benchmarks/checkers.py [--repeat N]
Prints a Markdown table; copy it into benchmarks/RESULTS.md with the machine line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("KRAFTWERK_SHARED", ROOT.parent / "shared"))
H = SHARED / "data" / "histories"
KRAFTWERK = Path(sys.executable).parent / "kraftwerk"


def run_check(files: list[str], model: str) -> tuple[float, float, list[dict]]:
    """Wall seconds, peak RSS (MiB) of the process tree, and the JSON results."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    proc = subprocess.run(
        [str(KRAFTWERK), "check", *files, "--model", model, "--quiet"], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kraftwerk check failed ({proc.returncode}): {proc.stderr[-2000:]}")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    return wall, max(peak, before) / 1024.0, results


def bench_process(name: str, files: list[str], model: str, repeat: int) -> dict:
    walls = []
    peak = 0.0
    results: list[dict] = []
    for _ in range(repeat):
        wall, rss, results = run_check(files, model)
        walls.append(wall)
        peak = max(peak, rss)
    verdicts = {"valid": 0, "invalid": 0, "unknown": 0}
    for r in results:
        verdicts[{True: "valid", False: "invalid"}.get(r["valid"], "unknown")] += 1
    return {
        "name": name,
        "files": len(files),
        "min": min(walls),
        "median": statistics.median(walls),
        "peak_mb": peak,
        "verdicts": verdicts,
    }


def bench_queue(n_sends: int) -> tuple[float, int]:
    from checkers.history import History, Op
    from checkers.queue import check_queue

    rnd = random.Random(1)
    ops: list[Op] = []
    logs: dict[str, list[int]] = {f"t0-{k}": [] for k in range(8)}
    for v in range(n_sends):
        key = f"t0-{rnd.randrange(8)}"
        p = v % 16
        ops.append(Op(len(ops), "invoke", p, "send", v, key=key, line=len(ops) + 1))
        logs[key].append(v)
        ops.append(Op(len(ops), "ok", p, "send", [len(logs[key]) - 1, v], key=key, line=len(ops) + 1))
    for k, log in enumerate(logs.values()):
        key = f"t0-{k}"
        ops.append(Op(len(ops), "invoke", 100 + k, "poll", None, key=key, line=len(ops) + 1))
        ops.append(Op(len(ops), "ok", 100 + k, "poll", [[o, v] for o, v in enumerate(log)], key=key, line=len(ops) + 1))
    history = History(ops, "bench")
    history.operations()
    started = time.perf_counter()
    result = check_queue(history)
    elapsed = time.perf_counter() - started
    assert result["valid"] is True, result.get("anomaly-types")
    return elapsed, len(ops)


def bench_epochs(n: int) -> tuple[float, int]:
    from checkers.epochs import check_events

    events = []
    for i in range(n // 3):
        e = i // 50 + 1
        lead = f"n{e % 3 + 1}"
        events.append({"node": lead, "type": "state", "epoch": e, "role": "leader", "leader": lead, "voted_for": lead})
        events.append({"node": "n4", "type": "state", "epoch": e, "role": "follower", "leader": lead})
        events.append({"node": "n4", "type": "hw", "epoch": e, "hw": i})
    started = time.perf_counter()
    result = check_events(events)
    elapsed = time.perf_counter() - started
    assert result["valid"] is True
    return elapsed, len(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    etcd = sorted(str(p) for p in (H / "porcupine/test_data/jepsen").glob("etcd_*.log") if p.stat().st_size > 0)
    kv = H / "porcupine/test_data/kv"
    knossos = sorted(str(p) for p in (H / "knossos/data/cas-register").rglob("*.edn"))
    rows = [
        bench_process(f"etcd corpus ({len(etcd)} logs, cas-register)", etcd, "cas-register", args.repeat),
        bench_process(
            "c50-ok + c50-bad (kv-append)", [str(kv / "c50-ok.txt"), str(kv / "c50-bad.txt")], "kv-append", args.repeat
        ),
        bench_process(f"knossos cas-register corpus ({len(knossos)} files)", knossos, "cas-register", args.repeat),
    ]
    print(
        f"machine: {platform.node()} — {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}"
    )
    print()
    print("| figure | files | wall min (s) | wall median (s) | peak RSS (MiB) | verdicts |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        v = ", ".join(f"{n} {k}" for k, n in r["verdicts"].items() if n)
        print(f"| {r['name']} | {r['files']} | {r['min']:.3f} | {r['median']:.3f} | {r['peak_mb']:.0f} | {v} |")
    q_s, q_n = bench_queue(500_000)
    e_s, e_n = bench_epochs(600_000)
    print()
    print("| checker throughput (in process) | size | seconds | rate |")
    print("|---|---|---|---|")
    print(f"| queue checker, valid history | {q_n:,} ops | {q_s:.2f} | {q_n / q_s:,.0f} ops/s |")
    print(f"| epoch checker, valid stream | {e_n:,} events | {e_s:.2f} | {e_n / e_s:,.0f} events/s |")


if __name__ == "__main__":
    main()
