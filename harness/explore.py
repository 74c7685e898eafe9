"""`kraftwerk explore`: search simulated schedules until one fails, then say how to replay and shrink it.

Each attempt is a fresh seeded schedule (faults and operations drawn from the
seed) in the deterministic simulator; the first invalid run is stored like a
`kraftwerk test` run, and its seed and the replay/shrink commands are printed.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time

from checkers.verdict import EXIT_BAD_INPUT
from harness.argtypes import non_negative_int
from harness.nemesis.schedule import parse_nemeses
from harness.shrink import parse_budget
from harness.sim.cluster import SimOptions
from harness.simrun import simulate, store_run
from harness.store import new_run


def run_explore(args: argparse.Namespace) -> int:
    from harness.db.nodes import unknown_bugs

    try:
        budget = parse_budget(args.budget)
        nemeses = parse_nemeses(args.nemesis)
    except ValueError as e:
        print(f"kraftwerk explore: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    unknown = unknown_bugs(args.bug)
    if unknown:
        print(f"kraftwerk explore: --bug {', '.join(unknown)}: unknown", file=sys.stderr)
        return EXIT_BAD_INPUT
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    deadline = time.monotonic() + budget
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        opts = SimOptions(
            seed=seed,
            nodes=args.nodes,
            concurrency=args.concurrency,
            time_limit=args.time_limit,
            nemeses=nemeses,
            bugs=sorted(set(args.bug)),
            workload=args.workload,
            fsync_delay_ms=getattr(args, "fsync_delay", 0),
        )
        checked = simulate(opts)
        label = {True: "valid", False: "INVALID"}.get(checked.valid, "unknown")  # type: ignore[call-overload]
        hidden = checked.valid is False and getattr(args, "observable", False) and not checked.observable
        if hidden:
            label += f" (only simulator invariants: {', '.join(sorted(checked.anomalies))}; going on)"
        print(f"attempt {attempt}: seed {seed}: {label}", file=sys.stderr, flush=True)
        if checked.valid is False and not hidden:
            name = f"explore-{args.workload}"
            run_dir = new_run(args.store, name)
            test = {
                "name": name,
                "workload": args.workload,
                "backend": "sim",
                "nemesis": nemeses,
                "nodes": args.nodes,
                "concurrency": args.concurrency,
                "time-limit": args.time_limit,
                "interval": opts.interval,
                "seed": seed,
                "bugs": opts.bugs,
                "argv": sys.argv,
                "explore-attempts": attempt,
            }
            if opts.fsync_delay_ms:
                test["fsync-delay-ms"] = opts.fsync_delay_ms  # real replays use the same slow disk
            test.update(checked.sim.workload_options)  # the workload's own settings (queue: acks, partitions, …)
            store_run(run_dir, checked, test)
            anomalies = ", ".join(sorted(checked.anomalies))
            print(
                f"found an invalid run after {attempt} attempt(s): seed {seed}, anomalies: {anomalies}", file=sys.stderr
            )
            print(f"stored in {run_dir}", file=sys.stderr)
            print(f"replay: kraftwerk replay {shlex.quote(str(run_dir))}", file=sys.stderr)
            print(f"shrink: kraftwerk shrink {shlex.quote(str(run_dir))}", file=sys.stderr)
            print(str(run_dir))
            return 1
        seed = (seed + 1) % 2**31
    print(f"no invalid run in {attempt} attempt(s) within the budget", file=sys.stderr)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", default="register", choices=("register", "queue"))
    p.add_argument("--budget", default="10m", help="how long to search, e.g. 2m (default 10m)")
    p.add_argument("--bug", action="append", default=[], metavar="NAME", help="turn on a seeded bug (repeatable)")
    p.add_argument("--nemesis", default="partition,kill,pause,clock", metavar="LIST")
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--time-limit", type=float, default=30.0, metavar="S", help="seconds per attempt (default 30)")
    p.add_argument("--seed", type=int, default=None, help="first seed (default random)")
    p.add_argument("--store", default="store", metavar="DIR")
    p.add_argument(
        "--fsync-delay",
        type=non_negative_int,
        default=0,
        metavar="MS",
        help="simulate a slow disk: every fsync takes MS ms more (replays on real clusters use the same delay)",
    )
    p.add_argument(
        "--observable",
        action="store_true",
        help="stop only at a run whose anomalies a real cluster's checkers report too (not only simulator "
        "invariants), so it can be replayed on docker/netns",
    )
