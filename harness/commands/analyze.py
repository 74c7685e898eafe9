"""`kraftwerk analyze STORE_DIR`: re-check and roll up every stored run (PySpark); the nightly report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_VALID
from harness.core.argtypes import master_problem
from harness.store.report.analysis import write_report

HELP = "re-check and roll up every stored run with the PySpark pipeline; writes the nightly report"
DESCRIPTION = (
    "Ingest the store's runs into Parquet, re-check them on Spark executors, compute roll-ups "
    "and write an HTML report with trend plots into --out. Runs analysed before are skipped."
)
EPILOG = (
    "Exit code: 0 done (even when runs are invalid or malformed: see the report), 254 bad arguments, "
    "255 the pipeline itself failed."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE_DIR", help="the run store to analyse")
    p.add_argument("--out", required=True, metavar="DIR", help="where tables, roll-ups, plots and report.html go")
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master: local, local[N], local[*] (default) or spark://HOST:PORT",
    )
    p.add_argument("--since", default=None, metavar="DATE", help="only runs dated on or after DATE (YYYY-MM-DD)")
    p.add_argument(
        "--check-time-limit",
        type=float,
        default=None,
        metavar="S",
        help="checker budget per (run, key); past it the key is unknown (default: each run's own, as its test "
        "judged it)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print only the final line")


def run(args: argparse.Namespace) -> int:
    from checkers.pipeline.discover import parse_date

    say = (lambda *_: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    store = Path(args.store)
    if not store.is_dir():
        print(f"kraftwerk analyze: {store}: not a directory", file=sys.stderr)
        return EXIT_BAD_INPUT
    since = None
    if args.since is not None:
        try:
            since = parse_date(args.since)
        except ValueError as e:
            print(f"kraftwerk analyze: --since: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if problem := master_problem("analyze", args.master):
        print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.check_time_limit is not None and not args.check_time_limit > 0:
        print("kraftwerk analyze: --check-time-limit must be positive", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"kraftwerk analyze: cannot create --out {out}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from checkers.pipeline.job import analyze
    from harness.core.checks import judging

    try:
        result = analyze(
            store,
            out,
            resolve=judging,
            master=args.master,
            since=since,
            check_time_limit=args.check_time_limit,
            log=say,
        )
    except ValueError as e:  # a bad manifest in --out
        print(f"kraftwerk analyze: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = write_report(result.rollups, out, store=str(store.resolve()), batch=result.batch, new_runs=result.analysed)
    totals = result.rollups.get("totals", [{}])[0]
    say(
        f"analysed {result.analysed} new run(s) ({result.ops} operations) in {result.seconds:.1f} s; "
        f"{result.skipped} skipped as analysed before; {result.errors} malformed"
    )
    print(
        f"kraftwerk analyze: {totals.get('runs', 0)} runs checked: {totals.get('valid', 0)} valid, "
        f"{totals.get('invalid', 0)} invalid, {totals.get('unknown', 0)} unknown, {totals.get('errors', 0)} malformed; "
        f"report {report}",
        file=sys.stderr,
    )
    return EXIT_VALID if report else EXIT_INTERNAL
