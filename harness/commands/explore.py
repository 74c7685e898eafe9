"""`kraftwerk explore`: search simulated schedules until one fails, then say how to replay and shrink it.

Each attempt is a fresh seeded schedule (faults and operations drawn from the
seed) in the deterministic simulator; the first invalid run is stored like a
`kraftwerk test` run, and its seed and the replay/shrink commands are printed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import replace

from checkers.verdict import EXIT_BAD_INPUT
from harness.argtypes import non_negative_int
from harness.shrink import parse_budget
from harness.simrun import simulate, store_run
from harness.spec import SpecError, TestSpec
from harness.store import new_run

HELP = "search simulated schedules until one fails; print its seed and the replay/shrink commands"
DESCRIPTION = "Run fresh seeded schedules in the simulator until one is invalid or the budget runs out."
EPILOG = "Exit code: 1 an invalid run was found (its directory is printed); 0 none within the budget."


def run(args: argparse.Namespace) -> int:
    """Simulate the test of these options from seed after seed until one is invalid."""
    try:
        budget = parse_budget(args.budget)
        spec = TestSpec.from_options(
            workload=args.workload,
            backend="sim",
            nemesis=args.nemesis,
            nodes=args.nodes,
            concurrency=args.concurrency,
            time_limit=args.time_limit,
            seed=args.seed,
            bug=args.bug,
            fsync_delay=getattr(args, "fsync_delay", 0),
            name=f"explore-{args.workload}",
        )
    except (ValueError, SpecError) as e:
        print(f"kraftwerk explore: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    deadline = time.monotonic() + budget
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        seed = spec.seed
        checked = simulate(spec)
        label = {True: "valid", False: "INVALID"}.get(checked.valid, "unknown")  # type: ignore[call-overload]
        hidden = checked.valid is False and getattr(args, "observable", False) and not checked.observable
        if hidden:
            label += f" (only simulator invariants: {', '.join(sorted(checked.anomalies))}; going on)"
        print(f"attempt {attempt}: seed {seed}: {label}", file=sys.stderr, flush=True)
        if checked.valid is False and not hidden:
            run_dir = new_run(args.store, spec.name)
            # the workload's own settings as the simulator ran them (queue: acks, partitions, …)
            test = {**spec.to_json(), **checked.sim.workload_options, "argv": sys.argv, "explore-attempts": attempt}
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
        spec = replace(spec, seed=(seed + 1) % 2**31)
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
