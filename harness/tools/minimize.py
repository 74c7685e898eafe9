"""`kraftwerk shrink RUN_DIR`: reproduce a failing run, shrink it, and write RUN_DIR/minimal/.

The stored run (its test, with any options the command line gave) is driven again from its schedule; if it
fails, the `Shrinker` (harness.tools.shrink) searches for a smaller schedule that fails the same way. The
smallest is checked to replay byte for byte and written as a run of its own — test.json, schedule.json, the
history, the verdict, a report — with a regression test beside it that fails while the bug is present.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from checkers.verdict import EXIT_BAD_INPUT, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.runs import simulate, store_run
from harness.tools.shrink import REGRESSION_TEST, Shrinker, as_stored


@dataclass(frozen=True)
class Budget:
    """How long the search may go on, and what it keeps (see `kraftwerk shrink --help`)."""

    seconds: float | None = None  # wall time
    max_runs: int | None = None  # simulator runs
    robust: int = 1
    robust_min: int = 1
    observable: bool = False


def minimize(
    run_dir: Path,
    test: dict,
    stored: TestSpec,
    plan: SimPlan,
    limits: Budget,
    say: Callable[[str], None],
    status: Callable[[str], None] | None = None,
) -> int:
    """Shrink the stored run `stored` (test.json `test`, schedule `plan`) of `run_dir` into `run_dir/minimal`:
    0 a smaller failing schedule was written, 1 nothing smaller fails the same way (the original is written),
    2 the run does not fail, 254 it fails only by simulator invariants under `observable`, 255 the minimal
    schedule does not replay identically."""
    budget, max_runs, robust, robust_min = limits.seconds, limits.max_runs, limits.robust, limits.robust_min
    observable = limits.observable
    started = time.monotonic()
    say(f"reproducing {run_dir} …")
    original = simulate(stored, plan)
    if original.valid is not False:
        print(
            f"kraftwerk shrink: the run does not fail when replayed (verdict {original.valid}); nothing to shrink",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    if observable and not original.observable:
        print(
            f"kraftwerk shrink: --observable: the run's anomalies ({', '.join(sorted(original.anomalies))}) are all "
            "simulator invariants, which a real cluster cannot check; find a run with `kraftwerk explore --observable`",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    shrinker = Shrinker(
        original,
        budget,
        say,
        robust=robust,
        observable=observable,
        robust_min=robust_min,
        max_runs=max_runs,
        status=status,
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
    # the regression test asserts the run has no anomaly once the bug is gone: check that it has none
    clean = simulate(replace(best.spec, bugs=()), best.plan).valid if best.spec.bugs else None
    if best.spec.bugs and clean is False:
        say("warning: the minimal schedule is invalid without the seeded bugs too")
    out = run_dir / "minimal"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    out.mkdir()
    minimal = replace(best.spec, name=f"{stored.name}-minimal")
    meta = {
        **test,
        **minimal.to_json(),
        "minimal-of": str(run_dir),
        "shrink": {
            "before": dict(zip(("fault-events", "operations", "nodes", "clients"), before)),
            "after": dict(zip(("fault-events", "operations", "nodes", "clients"), after)),
            "smaller": best is not original and after != before,
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
    if not meta["shrink"]["smaller"]:
        say("no smaller schedule fails the same way: the minimal run is the original one")
        return EXIT_INVALID
    return EXIT_VALID
