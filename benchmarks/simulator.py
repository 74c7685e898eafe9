"""Simulator figures (issue "The quorum"):

- speed: simulated seconds per wall second, 5 nodes, 10 clients, all nemeses (target ≥ 100×);
- election: time from a leader kill to a new leader, p50/p99 over ≥ 20 kills (target p50 ≤ 2 × election timeout);
- bugs: per seeded bug, in how many of N seeds a run is invalid, and by which checker;
- queue-bugs: the same for the queue workload (broker bugs, and acks=1 losing writes).

Usage: .venv/bin/python benchmarks/simulator.py [speed|election|bugs|queue-bugs|all] [--seeds N] [--time-limit S]
Prints Markdown tables for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.checks import check_run  # noqa: E402
from harness.sim.cluster import SimOptions, Simulation  # noqa: E402
from harness.sim.engine import MS, SECOND  # noqa: E402

BUGS = ["forget-vote", "restart-as-leader", "vote-ignores-log", "stale-read", "commit-old-epoch", "lazy-flush"]


def speed(seeds: int, time_limit: float, best_of: int = 1) -> None:
    rows = []
    for seed in range(seeds):
        runs = [Simulation(SimOptions(seed=seed, time_limit=time_limit)).run().stats for _ in range(best_of)]
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
    opts = SimOptions(seed=seed, time_limit=4 + kills * interval, schedule=schedule, nemeses=["kill"])
    sim = Simulation(opts)
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
    timeout = opts.election_timeout_ms
    print(f"### Leader election after a leader kill (simulator, {len(samples)} kills, 5 nodes)\n")
    print(f"election timeout {timeout} ms, fetch timeout {opts.fetch_timeout_ms} ms\n")
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
            r = Simulation(SimOptions(seed=seed, time_limit=time_limit, bugs=[bug] if bug else [])).run()
            t = time.perf_counter()
            v = check_run(r.recorder.history(), r.events, r.logs, r.invariants, "cas-register", 120)
            check_s.append(time.perf_counter() - t)
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
    ("acks=1 (expected: lost writes)", {"acks": 1}),
    ("hw-from-leader", {"bugs": ["hw-from-leader"]}),
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
            sim = Simulation(SimOptions(seed=seed, time_limit=time_limit, workload="queue", **kw))
            r = sim.run()
            v = check_run(
                r.recorder.history(), r.events, r.logs, r.invariants, "queue", 120, partition_logs=sim.partition_dumps
            )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", default="all", choices=["speed", "election", "bugs", "queue-bugs", "all"])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--best-of", type=int, default=1, help="speed: time each seed N times, keep the fastest")
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


if __name__ == "__main__":
    main()
