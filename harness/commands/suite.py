"""`kraftwerk suite SUITE.toml`: run a matrix of tests in parallel, with a live table, a summary and JUnit output."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_VALID
from harness.core.argtypes import master_problem
from harness.tools.suite import (
    _STYLE,
    QUICK_TIME_LIMIT,
    Runner,
    SuiteError,
    _counts,
    exit_code_test_all,
    junit_xml,
    live_table,
    load_suite,
    summary_tables,
)

HELP = "run a matrix of tests from a TOML suite file (nightly chaos, CI gate); JUnit output"
DESCRIPTION = "Run every test of a suite file, in parallel, with a live table and a summary."
EPILOG = (
    "Exit code (worst of): 255 if any run crashed, else 1 if any failed, else 2 if any unknown, "
    "else 0; 254 bad suite file or options."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suite", metavar="SUITE.toml", help="the suite file")
    p.add_argument("--junit", metavar="FILE", default=None, help="write a JUnit XML report (one testcase per run)")
    p.add_argument(
        "--parallel", type=int, default=None, metavar="N", help="runs at once (default: the suite's, else CPUs)"
    )
    p.add_argument(
        "--store", default=None, metavar="DIR", help="where runs are stored (default: the suite's, else ./store)"
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs the suite would start, and exit")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no live table (nor, when stderr is not a terminal, a line per run): only the summary",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"the suite scaled down, to check that it still parses and runs: every combination once (its first "
        f"seed), at most {QUICK_TIME_LIMIT} s of main phase each, seeded bugs not required to be caught",
    )
    p.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="run the suite's simulated runs as Spark tasks on local[N] or spark://HOST:PORT (see `kraftwerk "
        "spark up`); the store must be a path every Spark host sees. Real-backend runs stay on this machine.",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        suite = load_suite(args.suite, quick=args.quick)
    except SuiteError as e:
        print(f"kraftwerk suite: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.master is not None and (problem := master_problem("suite", args.master)):
        print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.parallel is not None and args.parallel < 1:
        print(f"kraftwerk suite: --parallel must be positive, got {args.parallel}", file=sys.stderr)
        return EXIT_BAD_INPUT
    parallel = args.parallel or suite.parallel or os.cpu_count() or 1
    store = args.store or suite.store or "store"
    if args.dry_run:
        for p in suite.runs:
            extra = f"  (expect {p.expect})" if p.expect != "valid" else ""
            extra += f"  (skip: {p.skip})" if p.skip else ""
            print(f"{p.reproduce}{extra}")
        print(f"{len(suite.runs)} runs", file=sys.stderr)
        return EXIT_VALID
    try:
        Path(store).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"kraftwerk suite: cannot use --store {store}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    err.print(f"kraftwerk suite {suite.name}: {len(suite.runs)} runs, {parallel} at a time, store {store}")
    started = dt.datetime.now()
    t0 = time.monotonic()
    runner = Runner(suite.runs, store, parallel, master=args.master)
    worker = threading.Thread(target=runner.run, name="suite-runner", daemon=True)
    worker.start()
    interrupted = False
    try:
        _watch(runner, err, suite.name, quiet=getattr(args, "quiet", False))
    except KeyboardInterrupt:
        interrupted = True
        err.print("[yellow]interrupted: killing running tests[/yellow]")
        runner.interrupt()
        runner.done.wait()
    seconds = time.monotonic() - t0
    for o in runner.outcomes:
        if not o.finished:
            o.status, o.message = "skipped", "suite interrupted"
    out = Console(highlight=False, soft_wrap=False, width=max(160, Console().width))
    for table in summary_tables(runner.outcomes):
        out.print(table)
    counts = _counts(runner.outcomes)
    out.print(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['unknown']} unknown, "
        f"{counts['crashed']} crashed, {counts['skipped']} skipped in {seconds:.1f} s"
    )
    if args.junit:
        try:
            Path(args.junit).parent.mkdir(parents=True, exist_ok=True)
            junit_xml(suite, runner.outcomes, started, seconds).write(
                args.junit, encoding="utf-8", xml_declaration=True
            )
            err.print(f"JUnit report: {args.junit}")
        except OSError as e:
            print(f"kraftwerk suite: cannot write --junit {args.junit}: {e}", file=sys.stderr)
            return EXIT_INTERNAL
    if interrupted:
        return 130
    return exit_code_test_all(o.status for o in runner.outcomes)


def _watch(runner: Runner, console: Any, title: str, quiet: bool = False) -> None:
    """Show progress until the runner is done: a live table on a terminal, one line per run otherwise, nothing
    if `quiet`."""
    if quiet:
        while not runner.done.wait(0.25):
            pass
        return
    if console.is_terminal:
        from rich.live import Live

        with Live(live_table(runner.outcomes, title), console=console, refresh_per_second=4, transient=False) as live:
            while not runner.done.wait(0.25):
                live.update(live_table(runner.outcomes, title))
            live.update(live_table(runner.outcomes, title))
        return
    reported: set[int] = set()
    total = len(runner.outcomes)
    while True:
        finished = runner.done.wait(0.2)
        for o in runner.outcomes:
            if o.finished and o.planned.index not in reported:
                reported.add(o.planned.index)
                console.print(
                    f"[{len(reported)}/{total}] {o.planned.config} seed {o.planned.seed}: "
                    f"[{_STYLE[o.status]}]{o.status}[/] ({o.seconds:.1f}s) {o.message}"
                )
        if finished:
            return
