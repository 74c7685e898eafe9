"""`kraftwerk explore`: search simulated schedules until one fails (harness.tools.explore)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from checkers.verdict import EXIT_BAD_INPUT
from harness.core.argtypes import master_problem, positive_int
from harness.core.spec import SpecError
from harness.core.spec import add_arguments as add_test_arguments
from harness.core.spec import from_args as spec_from_args
from harness.tools.explore import fleet, search
from harness.tools.shrink import parse_budget

HELP = "search simulated schedules until one fails; print its seed and the replay/shrink commands"
DESCRIPTION = "Run fresh seeded schedules in the simulator until one is invalid or the budget runs out."
EPILOG = "Exit code: 1 an invalid run was found (its directory is printed); 0 none within the budget."


def run(args: argparse.Namespace) -> int:
    """Simulate the test of these options from seed after seed until one is invalid."""
    try:
        budget = parse_budget(args.budget)
        spec = spec_from_args(args)
        if spec.backend != "sim":
            raise SpecError(f"--backend {spec.backend}: explore searches schedules in the simulator (--backend sim)")
        if not args.name:
            spec = replace(spec, name=f"explore-{spec.workload}")
    except (ValueError, SpecError) as e:
        print(f"kraftwerk explore: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.master is not None and args.runs is None:
        print("kraftwerk explore: --master needs --runs N (how many seeds to spread over the cluster)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.master is not None and (problem := master_problem("explore", args.master)):
        print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.runs is not None:
        return fleet(
            spec,
            args.runs,
            args.store,
            master=args.master,
            keep=args.keep,
            observable=args.observable,
            quiet=args.quiet,
        )
    return search(spec, args.store, budget, observable=args.observable, quiet=args.quiet)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", default="10m", help="how long to search, e.g. 2m (default 10m)")
    p.add_argument("--store", default="store", metavar="DIR", help="where runs are stored (default ./store)")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (attempts or runs done, runs/s, simulated time, budget left): only what was found",
    )
    p.add_argument(
        "--observable",
        action="store_true",
        help="stop only at a run whose anomalies a real cluster's checkers report too (not only simulator "
        "invariants), so it can be replayed on docker/netns",
    )
    p.add_argument(
        "--runs",
        type=positive_int,
        default=None,
        metavar="N",
        help="run exactly N seeds (seed, seed+1, …) and report every invalid one, instead of searching "
        "until the first within --budget",
    )
    p.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="with --runs: run them as Spark tasks on local[N] or spark://HOST:PORT (see `kraftwerk spark up`); "
        "the store must be a path every Spark host sees",
    )
    p.add_argument(
        "--keep",
        choices=("all", "invalid"),
        default="all",
        help="with --runs: store every run (default, so `kraftwerk analyze` sees them) or only invalid ones",
    )
    # the test options of `kraftwerk test` (its first seed; 30 s runs by default: many short schedules)
    add_test_arguments(
        p, title="test options (as kraftwerk test's; --seed is the first seed)", default_overrides={"time_limit": 30.0}
    )
