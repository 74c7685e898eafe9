"""`kraftwerk shrink RUN_DIR`: shrink a failing run to a minimal fault schedule and write a regression test."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from checkers.errors import InputError
from checkers.verdict import EXIT_BAD_INPUT, EXIT_UNKNOWN
from harness.core.spec import TestSpec
from harness.sim.runs import from_schedule, load_run, simulate, store_run
from harness.tools.shrink import REGRESSION_TEST, Shrinker, as_stored, parse_budget, parse_max_runs, parse_robust

HELP = "shrink a failing run to a minimal fault schedule (and write a regression test)"
DESCRIPTION = (
    "Search (with Hypothesis) for a smaller schedule — fewer faults, fewer operations, fewer "
    "nodes and clients — that still fails with the same anomaly class; writes RUN_DIR/minimal/."
)
EPILOG = (
    "Budget: --max-runs N bounds the search by simulator runs, so the same run shrinks to the same minimal "
    "schedule on any machine; --budget by wall time (default 5m when --max-runs is not given); given both, "
    "whichever ends first. Exit code: 1 when a minimal failing run was written; 2 if the run does not fail; "
    "254 bad input."
)
DEFAULT_BUDGET = "5m"


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    say = (lambda *_: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        max_runs = getattr(args, "max_runs", None)
        max_runs = parse_max_runs(max_runs) if max_runs is not None else None
        given = getattr(args, "budget", None)
        # a run budget alone keeps the result independent of the machine's speed: no wall-time limit then
        budget = (
            parse_budget(given) if given is not None else None if max_runs is not None else parse_budget(DEFAULT_BUDGET)
        )
        robust_min, robust = parse_robust(getattr(args, "robust", 1))
        test, schedule = load_run(run_dir)
        spec = TestSpec.from_json(test)
        stored, plan = from_schedule(schedule)
    except (InputError, ValueError) as e:
        print(f"kraftwerk shrink: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    started = time.monotonic()
    say(f"reproducing {run_dir} …")
    original = simulate(stored, plan)
    if original.valid is not False:
        print(
            f"kraftwerk shrink: the run does not fail when replayed (verdict {original.valid}); nothing to shrink",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    observable = bool(getattr(args, "observable", False))
    if observable and not original.observable:
        print(
            f"kraftwerk shrink: --observable: the run's anomalies ({', '.join(sorted(original.anomalies))}) are all "
            "simulator invariants, which a real cluster cannot check; find a run with `kraftwerk explore --observable`",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    shrinker = Shrinker(
        original, budget, say, robust=robust, observable=observable, robust_min=robust_min, max_runs=max_runs
    )
    say(f"anomaly class: {', '.join(sorted(shrinker.target))}")
    before = shrinker.size(original)
    best = shrinker.run()
    after = shrinker.size(best)
    wanted = f"all {robust}" if robust_min == robust else f"{robust_min} of {robust}"
    if robust > 1 and best is original:
        say(f"warning: no schedule failed the same way under {wanted} timings; kept the original run")
    hits = shrinker.timings_failing(as_stored(best)) if robust > 1 else None
    if hits is not None:
        say(f"the minimal schedule fails the same way under {hits} of its {robust} timings ({wanted} asked)")
    # the minimal schedule must replay byte for byte
    again = simulate(best.spec, best.plan)
    if again.digest != best.digest:
        print(
            "kraftwerk shrink: the minimal schedule does not replay identically (determinism broken)", file=sys.stderr
        )
        return 255
    # the regression test asserts the run is valid once the bug is gone: check that it is
    clean = simulate(replace(best.spec, bugs=()), best.plan).valid if best.spec.bugs else None
    if best.spec.bugs and clean is not True:
        say(f"warning: the minimal schedule is not valid without the seeded bugs either (verdict {clean})")
    out = run_dir / "minimal"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    out.mkdir()
    minimal = replace(
        spec,
        name=f"{spec.name}-minimal",
        nodes=best.spec.nodes,
        concurrency=best.spec.concurrency,
        time_limit=best.spec.time_limit,
        nemeses=best.spec.nemeses,
    )
    meta = {
        **test,
        **minimal.to_json(),
        "minimal-of": str(run_dir),
        "shrink": {
            "before": dict(zip(("fault-events", "operations", "nodes", "clients"), before)),
            "after": dict(zip(("fault-events", "operations", "nodes", "clients"), after)),
            "runs": shrinker.runs,
            **({"max-runs": max_runs} if max_runs is not None else {}),
            **({"budget-seconds": budget} if budget is not None else {}),
            "seconds": round(time.monotonic() - started, 1),
            "anomaly-class": sorted(shrinker.target),
            "observable": observable,
            "robust": robust,
            "robust-min": robust_min,
            "robust-reached": robust == 1 or shrinker.best is not original,
            **({"robust-hits": hits} if hits is not None else {}),
            "valid-without-bugs": clean,
        },
    }
    store_run(out, best, meta)
    try:  # report.html, plots and timelines, as every stored run has
        from harness.store.report import write_report

        write_report(out)
    except Exception as e:  # noqa: BLE001 - the report never changes the outcome
        say(f"warning: could not write the minimal run's report: {e}")
    bugs = ",".join(best.spec.bugs) or "NAME"
    (out / "test_regression.py").write_text(
        REGRESSION_TEST.format(
            source=run_dir, anomalies=", ".join(sorted(best.anomalies)), bugs=bugs, name=out / "test_regression.py"
        )
    )
    print(json.dumps({"minimal": str(out), **meta["shrink"]}))
    say(
        f"shrunk from {before[0]} fault events / {before[1]} operations / {before[2]} nodes / {before[3]} clients "
        f"to {after[0]} / {after[1]} / {after[2]} / {after[3]} in {shrinker.runs} runs "
        f"({meta['shrink']['seconds']} s); written to {out}"
    )
    say(f"replay: kraftwerk replay {out}")
    say(f"regression test: KRAFTWERK_BUGS={bugs} pytest {out / 'test_regression.py'}")
    return 1


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
