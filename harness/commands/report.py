"""`kraftwerk report RUN_DIR`: (re)build the report of a stored run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.verdict import EXIT_BAD_INPUT

HELP = "(re)build a run's report.html: verdict, checkers, latency and rate plots, timelines"
DESCRIPTION = "Build RUN_DIR/report.html, latency.png, rate.png and timelines/ from the run's files."
EPILOG = "Exit code: 0 written, 254 not a run directory, 255 internal error."


RUN_FILES = ("test.json", "history.jsonl", "results.json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (store/<test>/<time>/, or store/latest)")


def run(args: argparse.Namespace) -> int:
    """Write RUN_DIR/report.html and print its path; 254 when RUN_DIR is not a run directory."""
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"kraftwerk report: {run_dir} is not a directory", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not any((run_dir / f).is_file() for f in RUN_FILES):
        print(f"kraftwerk report: {run_dir} is not a run directory (none of {', '.join(RUN_FILES)})", file=sys.stderr)
        return EXIT_BAD_INPUT
    from harness.store.report import write_report

    print(write_report(run_dir))
    return 0
