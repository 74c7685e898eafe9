"""etcd beside our nodes under the register workload: ops/s and latency, same run shape, same session.

Each shape runs `kraftwerk test` (the very code path of the command: harness.real.run.run_real_test)
once per DB per seed, interleaved (ours, etcd, ours, etcd, …) so both see the same machine load:
5 nodes on --backend (default docker), 10 clients, the register workload, --seconds of main phase.
Shapes: `clean` (no faults, the test's default rate of 100 ops/s), `open` (no faults, rate 100000:
as fast as 10 clients with one operation in flight each can go) and `chaos` (partition, kill, pause
and clock faults, rate 100). Figures per run, from its history.jsonl: completed operations per second
of the main phase, ok operations per second, and the latency (invoke → completion) of ok operations,
p50/p95/p99 over all and p50 per f; info = operations whose outcome is unknown (timeouts).

    .venv/bin/python benchmarks/etcd_register.py [--backend docker] [--shapes clean,open,chaos]
        [--seconds 30] [--seeds 1] [--store /tmp/kraftwerk-etcd-bench]
    .venv/bin/python benchmarks/etcd_register.py --summarize STORE   # the same table from stored runs

`--clocktrace` compares etcd with etcd under clocktrace instead (etcd vs our nodes otherwise): the same
shape with every member run as under clock faults (harness.real.faults.clocktrace: each wall-clock read a
seccomp stop answered by the tracer) but no clock fault, so the difference is the tracer's cost.

    .venv/bin/python benchmarks/etcd_register.py --clocktrace --backend local --shapes clean,open

Prints a Markdown table; copy it into benchmarks/RESULTS.md with the machine line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.core.spec import TestSpec  # noqa: E402
from harness.real.run import run_real_test  # noqa: E402
from harness.store.runs import (  # noqa: E402
    new_run,
    test_document,  # noqa: E402
    write_json,
)

SHAPES: dict[str, dict[str, Any]] = {
    "clean": {"nemeses": (), "rate": 100.0},
    "open": {"nemeses": (), "rate": 100_000.0},
    "chaos": {"nemeses": ("partition", "kill", "pause", "clock"), "rate": 100.0},
}


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (nan for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def figures(run: Path) -> dict[str, Any]:
    """Throughput and latency of one stored run's main phase (operations invoked before it ended)."""
    results = json.loads((run / "results.json").read_text())
    test = json.loads((run / "test.json").read_text())
    main_ns = results["run"]["main-seconds"] * 1e9
    open_ops: dict[Any, dict[str, Any]] = {}
    lat: dict[str, list[float]] = {}
    counts = {"ok": 0, "fail": 0, "info": 0}
    for line in (run / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["process"] == "nemesis":
            continue
        if op["type"] == "invoke":
            open_ops[op["process"]] = op
            continue
        inv = open_ops.pop(op["process"], None)
        if inv is None or inv["time"] > main_ns:
            continue
        counts[op["type"]] += 1
        if op["type"] == "ok":
            lat.setdefault(op["f"], []).append((op["time"] - inv["time"]) / 1e6)
    counts["info"] += sum(1 for inv in open_ops.values() if inv["time"] <= main_ns)
    every = [x for xs in lat.values() for x in xs]
    seconds = results["run"]["main-seconds"]
    traced = test.get("db") == "etcd" and "vDSO hidden" in (run / "nodes" / "n1" / "etcd.log").read_text()
    return {
        "db": test.get("db", "kraftwerk")
        + ("/" + test["etcd"]["etcd-read"] if test.get("db") == "etcd" else "")
        + (" +clocktrace" if traced else ""),
        "nemesis": ",".join(test["nemesis"]) or "none",
        "rate": test.get("rate", 100.0),
        "seed": test["seed"],
        "ops/s": sum(counts.values()) / seconds,
        "ok/s": counts["ok"] / seconds,
        "p50": pct(every, 50),
        "p95": pct(every, 95),
        "p99": pct(every, 99),
        **{f"{f} p50": pct(lat.get(f, []), 50) for f in ("read", "write", "cas")},
        **counts,
        "valid": results["valid"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    cols = ["db", "nemesis", "rate", "seed", "ops/s", "ok/s", "p50", "p95", "p99", "read p50", "write p50"]
    cols += ["cas p50", "ok", "fail", "info", "valid"]
    out = ["| " + " | ".join(c if c in ("db", "nemesis", "rate", "seed") else c for c in cols) + " |"]
    out.append("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            if c == "rate":
                cells.append("open" if v >= 100_000 else f"{v:g}/s")
            elif isinstance(v, float):
                cells.append(f"{v:.1f}" if c.endswith("/s") else f"{v:.0f} ms" if not math.isnan(v) else "-")
            else:
                cells.append(str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


@contextlib.contextmanager
def members_under_clocktrace() -> Iterator[None]:
    """etcd members started as under clock faults (EtcdDB(clock=True)) whatever the nemeses."""
    from harness.real import run as runner

    make_db = runner.make_db

    def traced(*args: Any, **kwargs: Any) -> Any:
        db = make_db(*args, **kwargs)
        db.clock = True
        return db

    runner.make_db = traced
    try:
        yield
    finally:
        runner.make_db = make_db


def run_one(store: Path, db: str, shape: str, seconds: float, seed: int, backend: str) -> Path:
    traced = db == "etcd+clocktrace"
    spec = TestSpec(
        workload="register",
        backend=backend,
        db="etcd" if traced else db,
        nodes=5,
        concurrency=10,
        time_limit=seconds,
        seed=seed,
        name=f"bench-{shape}-{db.replace('+', '-')}",
        **SHAPES[shape],
    )
    run_dir = new_run(str(store), spec.name)
    write_json(run_dir / "test.json", test_document(spec))
    with members_under_clocktrace() if traced else contextlib.nullcontext():
        code = run_real_test(spec, run_dir, spec.reproduce(), quiet=True)
    if code not in (0, 1):
        raise SystemExit(f"{spec.name} seed {seed}: exit {code}")
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="docker", choices=("docker", "netns", "local"))
    ap.add_argument("--shapes", default="clean,open,chaos")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--store", default="/tmp/kraftwerk-etcd-bench")
    ap.add_argument("--clocktrace", action="store_true", help="etcd against etcd under clocktrace, not our nodes")
    ap.add_argument("--summarize", metavar="STORE", help="only print the table of the runs stored under STORE")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    if args.summarize:
        runs = sorted(p.parent for p in Path(args.summarize).glob("*/2*/results.json"))
    else:
        runs = []
        for shape in args.shapes.split(","):
            if shape not in SHAPES:
                raise SystemExit(f"--shapes: unknown {shape!r} (known: {', '.join(SHAPES)})")
            for seed in (int(s) for s in args.seeds.split(",")):
                for db in ("etcd", "etcd+clocktrace") if args.clocktrace else ("kraftwerk", "etcd"):
                    t = time.monotonic()
                    runs.append(run_one(Path(args.store), db, shape, args.seconds, seed, args.backend))
                    print(f"{shape} {db} seed {seed}: {time.monotonic() - t:.0f}s", file=sys.stderr)
    rows = [figures(r) for r in runs]
    rows.sort(key=lambda r: (r["nemesis"], r["rate"], r["db"], r["seed"]))
    print(table(rows))
    print(f"load after: {os.getloadavg()[0]:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
