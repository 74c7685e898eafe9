"""`kraftwerk shrink RUN_DIR`: shrink a failing run to a minimal fault schedule (harness.tools.minimize)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.errors import InputError
from checkers.verdict import EXIT_BAD_INPUT
from harness.core.live import LiveLine
from harness.core.spec import SpecError, given
from harness.core.spec import add_arguments as add_test_arguments
from harness.sim.runs import from_schedule, load_run
from harness.tools.minimize import Budget, minimize
from harness.tools.shrink import parse_budget, parse_max_runs, parse_robust

HELP = "shrink a failing run to a minimal fault schedule (and write a regression test)"
DESCRIPTION = (
    "Search (with Hypothesis) for a smaller schedule — fewer faults, fewer operations, fewer "
    "nodes and clients — that still fails with the same anomaly class; writes RUN_DIR/minimal/."
)
EPILOG = (
    "Budget: --max-runs N bounds the search by simulator runs, so the same run shrinks to the same minimal "
    "schedule on any machine; --budget by wall time (default 5m when --max-runs is not given); given both, "
    "whichever ends first. Any test option given replaces the stored run's (e.g. --bug NAME). Exit code: 0 a "
    "smaller failing schedule was written to RUN_DIR/minimal/; 1 the run fails but nothing smaller fails the "
    "same way (the original was written as the minimal run); 2 the run does not fail; 254 bad input; 255 the "
    "minimal schedule does not replay identically."
)
DEFAULT_BUDGET = "5m"


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    try:
        max_runs = getattr(args, "max_runs", None)
        max_runs = parse_max_runs(max_runs) if max_runs is not None else None
        wall = getattr(args, "budget", None)
        # a run budget alone keeps the result independent of the machine's speed: no wall-time limit then
        budget = (
            parse_budget(wall) if wall is not None else None if max_runs is not None else parse_budget(DEFAULT_BUDGET)
        )
        robust_min, robust = parse_robust(getattr(args, "robust", 1))
        test, schedule = load_run(run_dir)
        stored, plan = from_schedule(schedule, test=test)
        stored = stored.with_options(**given(args))
        if stored.backend != "sim":
            raise SpecError(f"--backend {stored.backend}: shrink searches schedules in the simulator (--backend sim)")
    except (InputError, ValueError) as e:
        print(f"kraftwerk shrink: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    limits = Budget(budget, max_runs, robust, robust_min, bool(getattr(args, "observable", False)))
    with LiveLine(args.quiet, every=2.0) as live:
        return minimize(run_dir, test, stored, plan, limits, live.say, status=live.status)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a stored failing simulator run")
    p.add_argument(
        "--max-runs",
        default=None,
        metavar="N",
        help="stop the search after N simulator runs (every timing --robust tries counts): the same run then "
        "shrinks to the same result on any machine, however loaded. Without --budget, no wall-time limit",
    )
    p.add_argument(
        "--budget",
        default=None,
        help="wall time for the search, e.g. 90s, 5m (default 5m when --max-runs is not given; with it, "
        "whichever ends first)",
    )
    p.add_argument(
        "--robust",
        default="1",
        metavar="K|M/K",
        help="keep only schedules that fail under K timings in the simulator (the run's seed and K-1 "
        "others: other message latencies and election timeouts, each fault landing 0-100 ms late), or under "
        "at least M of them (its own among them) with M/K, e.g. 2/8: the minimal schedule then depends less "
        "on one exact interleaving and comes back more often on a real cluster; up to K times slower (default 1, "
        "K at most 20)",
    )
    p.add_argument(
        "--observable",
        action="store_true",
        help="keep only schedules that fail with an anomaly a real cluster's checkers report too (a history, "
        "epoch or committed-log anomaly, not only a simulator invariant), for replay on docker/netns",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="only the final JSON line")
    add_test_arguments(p, defaults=False, title="test options (each one given replaces the stored run's)")
