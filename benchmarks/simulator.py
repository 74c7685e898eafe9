"""Simulator figures (issue "The quorum"):

- speed: simulated seconds per wall second, 5 nodes, 10 clients, all nemeses (target ≥ 100×);
- election: time from a leader kill to a new leader, p50/p99 over ≥ 20 kills (target p50 ≤ 2 × election timeout);
- bugs: per seeded bug, in how many of N seeds a run is invalid, and by which checker;
- queue-bugs: the same for the queue workload (broker bugs, and acks=1 losing writes);
- txn: the queue workload's --txn, valid runs without a bug and caught ones with each `--bug` given;
- digests: whether trees give the same history, node events and invariants for 28 seed/workload/bug runs;
- cost: CPU cost of a fixed set of runs (seeds × register/queue), as callgrind instruction counts
  (load-independent) and best-of-N CPU seconds, for this tree and optionally other trees
  (`--tree DIR`, e.g. a `git worktree` of an older commit) side by side, with each run's history digest.

Usage: .venv/bin/python benchmarks/simulator.py [speed|election|bugs|queue-bugs|cost|all] [--seeds N] [--time-limit S]
       .venv/bin/python benchmarks/simulator.py txn --seeds 20 --time-limit 30 [--nemesis partition,kill] [--bug NAME]…
       .venv/bin/python benchmarks/simulator.py cost --seeds 3 --time-limit 20 --tree /tmp/old [--no-callgrind]
       .venv/bin/python benchmarks/simulator.py digests --time-limit 15 --tree /tmp/before
Prints Markdown tables for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.spec import TestSpec  # noqa: E402
from harness.sim.cluster import RAFT_CONFIG, SimPlan  # noqa: E402
from harness.sim.engine import MS, SECOND  # noqa: E402
from harness.sim.runs import simulate  # noqa: E402
from harness.sim.runtime import SimRuntime  # noqa: E402

BUGS = ["forget-vote", "restart-as-leader", "vote-ignores-log", "stale-read", "commit-old-epoch", "lazy-flush"]


def speed(seeds: int, time_limit: float, best_of: int = 1) -> None:
    rows = []
    for seed in range(seeds):
        runs = [SimRuntime(TestSpec(seed=seed, time_limit=time_limit)).run().stats for _ in range(best_of)]
        rows.append(min(runs, key=lambda s: s["wall-seconds"]))  # the same run each time: keep the fastest
    speeds = [s["virtual-seconds"] / s["wall-seconds"] for s in rows]
    print(f"### Simulator speed ({seeds} seeds, 5 nodes, 10 clients, all nemeses, {time_limit:g} s main phase)\n")
    print("| seed | simulated s | wall s | speed-up | operations | events |")
    print("|---|---|---|---|---|---|")
    for s, sp in zip(rows, speeds):
        cells = [s["seed"], s["virtual-seconds"], s["wall-seconds"], f"{sp:.0f}×", s["operations"], s["events"]]
        print("| " + " | ".join(map(str, cells)) + " |")
    print(f"\nmedian speed-up **{statistics.median(speeds):.0f}×** (min {min(speeds):.0f}×, max {max(speeds):.0f}×)\n")


def election(kills: int, seed: int = 1) -> None:
    interval = 8.0
    schedule = []
    for k in range(kills):
        at = int((4 + k * interval) * SECOND)
        schedule.append({"at": at, "package": "kill", "f": "kill", "value": "leader"})
        schedule.append({"at": at + 3 * SECOND, "package": "kill", "f": "start", "value": None})
    spec = TestSpec(seed=seed, time_limit=4 + kills * interval, nemeses=("kill",))
    sim = SimRuntime(spec, SimPlan(schedule=schedule))
    samples: list[float] = []
    pending: dict[str, int] = {}  # killed leader's name -> (kill time, epoch)
    kill_state: list[tuple[int, int]] = []
    orig_nemesis = sim._fault
    orig_event = sim.node_event

    def nemesis(event: dict) -> None:
        if event["f"] == "kill":
            leader = sim.leader()
            if leader is not None and leader.core is not None:
                kill_state.append((sim.sched.now, leader.core.raft.epoch))
        orig_nemesis(event)

    def node_event(node, data) -> None:  # type: ignore[no-untyped-def]
        if data.get("type") == "state" and data.get("role") == "leader" and kill_state:
            killed_at, epoch = kill_state[-1]
            if data["epoch"] > epoch:
                samples.append((sim.sched.now - killed_at) / MS)
                kill_state.clear()
        orig_event(node, data)

    sim._fault = nemesis  # type: ignore[method-assign]
    sim.node_event = node_event  # type: ignore[method-assign]
    del pending
    sim.run()
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(round(0.99 * (len(samples) - 1))))]
    timeout = RAFT_CONFIG.election_timeout_ms
    print(f"### Leader election after a leader kill (simulator, {len(samples)} kills, 5 nodes)\n")
    print(f"election timeout {timeout} ms, fetch timeout {RAFT_CONFIG.fetch_timeout_ms} ms\n")
    print("| kills | p50 (ms) | p99 (ms) | min (ms) | max (ms) | target p50 ≤ 2 × election timeout |")
    print("|---|---|---|---|---|---|")
    verdict = "met" if p50 <= 2 * timeout else "NOT met"
    print(f"| {len(samples)} | {p50:.0f} | {p99:.0f} | {samples[0]:.0f} | {samples[-1]:.0f} | {verdict} |\n")


def bugs(seeds: int, time_limit: float) -> None:
    print(f"### Seeded bug detection ({seeds} seeds each, all nemeses, {time_limit:g} s main phase)\n")
    print("| bug | invalid runs | rate | first seed caught | caught by | mean check s |")
    print("|---|---|---|---|---|---|")
    for bug in [*BUGS, None]:
        caught = 0
        first = None
        by: dict[str, int] = {}
        check_s = []
        for seed in range(seeds):
            v = simulate(TestSpec(seed=seed, time_limit=time_limit, bugs=(bug,) if bug else ())).results
            check_s.append(v["run"]["check-seconds"])
            if v["valid"] is False:
                caught += 1
                first = seed if first is None else first
                for name in ("linearizable", "epochs", "invariants"):
                    if v[name].get("valid") is False:
                        by[name] = by.get(name, 0) + 1
        who = ", ".join(f"{k} {n}" for k, n in sorted(by.items())) or "—"
        print(
            f"| {bug or '(none: clean runs)'} | {caught}/{seeds} | {caught / seeds:.0%} | "
            f"{first if first is not None else '—'} | {who} | {statistics.mean(check_s):.2f} |",
            flush=True,
        )
    print()


QUEUE_CASES = [
    ("acks=1 (expected: lost writes)", {"acks": "1"}),
    ("hw-from-leader", {"bugs": ("hw-from-leader",)}),
    ("no-truncate", {"bugs": ["no-truncate"]}),
    ("stale-leader-produce", {"bugs": ["stale-leader-produce"]}),
    ("lazy-flush", {"bugs": ["lazy-flush"]}),
    ("dedup-window-1", {"bugs": ["dedup-window-1"]}),
    ("(none: safe profile)", {}),
]


def queue_bugs(seeds: int, time_limit: float) -> None:
    print(f"### Queue workload: detection ({seeds} seeds each, all nemeses, {time_limit:g} s main phase)\n")
    print("| case | invalid runs | rate | first seed caught | anomaly types seen |")
    print("|---|---|---|---|---|")
    for label, kw in QUEUE_CASES:
        caught = 0
        first = None
        seen: dict[str, int] = {}
        for seed in range(seeds):
            v = simulate(TestSpec.of(seed=seed, time_limit=time_limit, workload="queue", **kw)).results
            if v["valid"] is False:
                caught += 1
                first = seed if first is None else first
                for t in v.get("anomaly-types", []):
                    seen[t] = seen.get(t, 0) + 1
        types = ", ".join(f"{k} {n}" for k, n in sorted(seen.items())) or "—"
        print(
            f"| {label} | {caught}/{seeds} | {caught / seeds:.0%} | {first if first is not None else '—'} | {types} |",
            flush=True,
        )
    print()


def txn(
    seeds: int, time_limit: float, bugs: list[str], nemesis: str, clean: bool = True, skip: tuple[int, ...] = ()
) -> None:
    """The queue workload's --txn: valid runs without a bug, invalid ones with each transaction bug."""
    nemeses = tuple(n for n in nemesis.split(",") if n)
    print(f"### Queue workload --txn ({seeds} seeds each, nemesis {nemesis or 'none'}, {time_limit:g} s main phase)\n")
    print(
        "| case | valid | invalid | unknown | first seed caught | anomaly types seen (runs) "
        "| committed txns (median) | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for bug in ["", *bugs] if clean else bugs:
        verdicts = {True: 0, False: 0, "unknown": 0}
        first = None
        seen: dict[str, int] = {}
        committed: list[int] = []
        t0 = time.monotonic()
        for seed in range(seeds):
            if seed in skip:
                continue
            spec = TestSpec.of(
                seed=seed,
                time_limit=time_limit,
                workload="queue",
                txn=True,
                nemeses=nemeses,
                bugs=(bug,) if bug else (),
            )
            v = simulate(spec).results
            verdicts[v["valid"]] += 1
            print(
                f"  {bug or '(none)'} seed {seed}: {v['valid']} ({time.monotonic() - t0:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            committed.append(v.get("queue", {}).get("stats", {}).get("committed", 0))
            if v["valid"] is False:
                first = seed if first is None else first
                for t in v.get("anomaly-types", []):
                    seen[t] = seen.get(t, 0) + 1
        types = ", ".join(f"{k} {n}" for k, n in sorted(seen.items())) or "—"
        runs = seeds - len([s for s in skip if 0 <= s < seeds])
        print(
            f"| {bug or '(none)'} | {verdicts[True]}/{runs} | {verdicts[False]}/{runs} | {verdicts['unknown']} | "
            f"{first if first is not None else '—'} | {types} | {statistics.median(committed):g} | "
            f"{time.monotonic() - t0:.0f} |",
            flush=True,
        )
    print()


# Run in the tree under test (cwd and PYTHONPATH = that tree), so it must use only the API every
# compared commit has: Simulation of SimOptions (before the simulator took the TestSpec) or of a TestSpec.
# argv: JSON list of [seed, workload], time limit, repeats.
_COST_CHILD = """
import json, sys, time
try:  # a tree whose phases run over a Runtime port (harness.sim.runtime), or one with Simulation.run()
    from harness.sim.runtime import SimRuntime as Simulation
except ImportError:
    from harness.sim.cluster import Simulation
try:
    from harness.sim.cluster import SimOptions
except ImportError:
    from harness.core.spec import TestSpec as SimOptions
cases, limit, repeats = json.loads(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
out = []
for seed, workload in cases:
    best = None
    for _ in range(repeats):
        t = time.process_time()
        stats = Simulation(SimOptions(seed=seed, workload=workload, time_limit=limit)).run().stats
        cpu = time.process_time() - t
        best = cpu if best is None else min(best, cpu)
    out.append({"seed": seed, "workload": workload, "cpu": best, "operations": stats["operations"],
                "events": stats["events"], "digest": stats.get("history-sha256", "")})
print("COST " + json.dumps(out))
"""


def _cost_child(tree: Path, cases: list[list[Any]], limit: float, repeats: int, valgrind: list[str]) -> tuple[Any, int]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [*valgrind, sys.executable, "-c", _COST_CHILD, json.dumps(cases), str(limit), str(repeats)]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COST "))
    return json.loads(line[5:]), int(found.group(1)) if found else 0


def cost(trees: list[Path], seeds: int, time_limit: float, repeats: int, callgrind: bool) -> None:
    """Per tree: callgrind instructions of the whole set of runs (minus the same process doing only the
    imports), per-run best-of-`repeats` CPU seconds and runs/s. Each run's history digest is printed so a
    change that should not alter histories can be checked on the same table."""
    cases = [[seed, workload] for workload in ("register", "queue") for seed in range(seeds)]
    if callgrind and shutil.which("valgrind") is None:
        sys.exit("cost: valgrind is not installed (apt-get install valgrind), or pass --no-callgrind")
    what = f"{len(cases)} runs: seeds 0–{seeds - 1} × register, queue; {time_limit:g} s main phase"
    print(f"### Simulator CPU cost ({what})\n")
    print(f"| tree | commit | instructions (runs only) | per run | CPU s (sum of best-of-{repeats}) | runs/s |")
    print("|---|---|---|---|---|---|")
    per_run: dict[str, list[Any]] = {}
    for tree in trees:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=tree, capture_output=True, text=True
        ).stdout.strip()
        instructions = "—"
        per = "—"
        if callgrind:
            with tempfile.TemporaryDirectory(prefix="simcost-") as tmp:
                vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p"]
                _, imports = _cost_child(tree, [], time_limit, 1, vg)
                _, total = _cost_child(tree, cases, time_limit, 1, vg)
            instructions = f"{total - imports:,}"
            per = f"{(total - imports) // len(cases):,}"
        rows, _ = _cost_child(tree, cases, time_limit, repeats, [])
        cpu = sum(r["cpu"] for r in rows)
        per_run[f"{tree.name} {commit}"] = rows
        print(f"| {tree} | {commit} | {instructions} | {per} | {cpu:.2f} | {len(rows) / cpu:.2f} |", flush=True)
    print("\n| run | " + " | ".join(per_run) + " |")
    print("|---|" + "---|" * len(per_run))
    for i, (seed, workload) in enumerate(cases):
        cells = [f"{r[i]['cpu']:.2f} s, {r[i]['operations']} ops, {r[i]['digest'][:12]}" for r in per_run.values()]
        print(f"| {workload} seed {seed} | " + " | ".join(cells) + " |")
    print()


# The same cases in every tree compared: (seed, workload, bugs); each run's history, events and invariants
# digests. Like _COST_CHILD, it runs in trees from before and after the simulator took the TestSpec.
_DIGEST_CHILD = """
import hashlib, json, sys
try:  # a tree whose phases run over a Runtime port (harness.sim.runtime), or one with Simulation.run()
    from harness.sim.runtime import SimRuntime as Simulation
except ImportError:
    from harness.sim.cluster import Simulation
try:
    from harness.sim.cluster import SimOptions
except ImportError:  # a tree whose simulator takes the TestSpec (bugs as a tuple)
    from harness.core.spec import TestSpec
    SimOptions = lambda bugs, **kw: TestSpec(bugs=tuple(bugs), **kw)
cases, limit = json.loads(sys.argv[1]), float(sys.argv[2])
for seed, workload, bugs in cases:
    r = Simulation(SimOptions(seed=seed, workload=workload, time_limit=limit, bugs=bugs)).run()
    dump = lambda x: hashlib.sha256(json.dumps(x, sort_keys=True, default=str).encode()).hexdigest()[:16]
    print("DIGEST " + json.dumps([seed, workload, bugs, r.stats["history-sha256"][:16], dump(r.events),
                                  dump(r.invariants), r.stats["operations"]]), flush=True)
"""
DIGEST_CASES = [
    *(
        (seed, "register", bugs)
        for seed in range(4)
        for bugs in ([], ["forget-vote"], ["stale-read"], ["vote-ignores-log"])
    ),
    *((seed, "queue", bugs) for seed in range(3) for bugs in ([], ["hw-from-leader"], ["lazy-flush"], ["no-truncate"])),
]


def digests(trees: list[Path], time_limit: float) -> bool:
    """Do the trees give the same history (and node events, and invariant verdicts) for the same seed?"""
    rows: dict[Path, list[list[Any]]] = {}
    for tree in trees:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, "-c", _DIGEST_CHILD, json.dumps(DIGEST_CASES), str(time_limit)]
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=True).stdout
        rows[tree] = [json.loads(x[7:]) for x in out.splitlines() if x.startswith("DIGEST ")]
    first = rows[trees[0]]
    same = all(r == first for r in rows.values())
    print(f"### Same seed, same history? ({len(DIGEST_CASES)} runs, {time_limit:g} s main phase)\n")
    print(
        "| seed | workload | bugs | history sha256 | events | invariants | operations | "
        + " | ".join(map(str, trees))
        + " |"
    )
    print("|---|---|---|---|---|---|---|" + "---|" * len(trees))
    for i, (seed, workload, bugs, history, events, invariants, ops) in enumerate(first):
        marks = ["same" if rows[t][i] == first[i] else f"DIFFERS ({rows[t][i][3]})" for t in trees]
        print(
            f"| {seed} | {workload} | {', '.join(bugs) or '—'} | {history} | {events} | {invariants} | {ops} | "
            + " | ".join(marks)
            + " |"
        )
    print(f"\n**{'identical' if same else 'NOT identical'}** across {len(trees)} trees\n")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ["speed", "election", "bugs", "queue-bugs", "txn", "cost", "digests", "all"]
    parser.add_argument("what", nargs="?", default="all", choices=what)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--best-of", type=int, default=1, help="speed: time each seed N times, keep the fastest")
    parser.add_argument("--tree", action="append", default=[], help="cost: also measure this source tree (repeatable)")
    parser.add_argument("--repeats", type=int, default=3, help="cost: CPU seconds are the best of N runs")
    parser.add_argument("--no-callgrind", action="store_true", help="cost: CPU seconds only")
    parser.add_argument("--bug", action="append", default=[], help="txn: also run with this seeded bug (repeatable)")
    parser.add_argument("--nemesis", default="partition,kill", help="txn: the nemeses (default partition,kill)")
    parser.add_argument("--no-clean", action="store_true", help="txn: only the --bug cases, not the clean one")
    parser.add_argument("--skip-seed", type=int, action="append", default=[], help="txn: leave this seed out")
    args = parser.parse_args()
    print(f"machine: {platform.node()} — {os.cpu_count()} cores, Python {platform.python_version()}\n")
    if args.what in ("speed", "all"):
        speed(min(args.seeds, 10), args.time_limit, args.best_of)
    if args.what in ("election", "all"):
        election(args.kills)
    if args.what in ("bugs", "all"):
        bugs(args.seeds, args.time_limit)
    if args.what in ("queue-bugs", "all"):
        queue_bugs(args.seeds, args.time_limit)
    if args.what == "txn":
        txn(args.seeds, args.time_limit, args.bug, args.nemesis, not args.no_clean, tuple(args.skip_seed))
    if args.what in ("cost", "digests"):
        root = Path(__file__).resolve().parent.parent
        trees = [Path(t).resolve() for t in args.tree] + [root]
        if args.what == "cost":
            cost(trees, min(args.seeds, 10), args.time_limit, args.repeats, not args.no_callgrind)
        elif not digests(trees, args.time_limit):
            sys.exit(1)


if __name__ == "__main__":
    main()
