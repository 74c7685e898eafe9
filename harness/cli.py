"""The `kraftwerk` command line.

Exit codes follow Jepsen: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or
bad input, 255 the harness itself failed. Subcommands import their machinery
lazily so `kraftwerk check` starts fast.
"""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
import traceback
from collections.abc import Sequence

from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL


class UsageError(Exception):
    """A bad option or argument: exit 254 with the message."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only="check"`, just the check command (what `kraftwerk check` needs)."""
    parser = _Parser(
        prog="kraftwerk",
        description="Jepsen-style fault injection for a KRaft-style quorum and Kafka-style broker.",
        epilog="Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input, 255 internal error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser(
        "check",
        help="check recorded histories (JSONL, Jepsen EDN, Jepsen logs) or run directories",
        description=(
            "Check histories for linearizability (register, cas-register, kv-append, mutex, "
            "multi-register), Kafka queue anomalies (queue) or leader-per-epoch safety (epochs). "
            "Prints one JSON line per FILE on stdout and a human summary on stderr."
        ),
        epilog="Exit code: the worst verdict over all files (1 invalid > 2 unknown > 0 valid); 254 bad input.",
    )
    from harness.check_command import add_arguments as add_check_arguments

    add_check_arguments(check)
    if only == "check":
        return parser  # `kraftwerk check` starts without importing the other commands' machinery
    test = sub.add_parser(
        "test",
        help="run a chaos test: start a cluster, inject faults, record a history, check it",
        description=(
            "Run one chaos test. Nodes run on the chosen backend while clients run the workload and "
            "the nemesis injects faults; then everything is healed, recovered and read back, and the "
            "history is checked. The run is stored under --store (test.json, history.jsonl, "
            "events.jsonl, logs/, schedule.json, results.json)."
        ),
        epilog="Exit code: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 internal error.",
    )
    from harness.test_command import add_arguments

    add_arguments(test)
    from harness import explore, replay, shrink

    replay_p = sub.add_parser(
        "replay",
        help="drive a stored run again from its schedule (simulator: identical history; real cluster: reproduce)",
        description="Re-run a stored run from its schedule.json (every fault and client operation). On the "
        "simulator the new history must equal the stored one, byte for byte. On a real backend (the run's own, or "
        "--backend docker|netns|local|ssh, also for simulator runs such as RUN_DIR/minimal) the schedule is driven "
        "in real time on a fresh cluster up to --times N times; each attempt is stored as a normal run, and the "
        "output says in how many attempts the stored run's anomaly class came back.",
        epilog="Exit code, simulator: the replayed verdict (0/1/2); 255 if the history differs. Real cluster: 1 the "
        "anomaly class came back in some attempt, 0 every attempt was valid, 2 not reproduced but some attempt was "
        "unknown or invalid in another way. Both: 254 bad arguments or input, 255 the harness failed.",
    )
    replay.add_arguments(replay_p)
    shrink_p = sub.add_parser(
        "shrink",
        help="shrink a failing run to a minimal fault schedule (and write a regression test)",
        description="Search (with Hypothesis) for a smaller schedule — fewer faults, fewer operations, fewer "
        "nodes and clients — that still fails with the same anomaly class; writes RUN_DIR/minimal/.",
        epilog="Exit code: 1 when a minimal failing run was written; 2 if the run does not fail; 254 bad input.",
    )
    shrink.add_arguments(shrink_p)
    explore_p = sub.add_parser(
        "explore",
        help="search simulated schedules until one fails; print its seed and the replay/shrink commands",
        description="Run fresh seeded schedules in the simulator until one is invalid or the budget runs out.",
        epilog="Exit code: 1 an invalid run was found (its directory is printed); 0 none within the budget.",
    )
    explore.add_arguments(explore_p)
    suite = sub.add_parser(
        "suite",
        help="run a matrix of tests from a TOML suite file (nightly chaos, CI gate); JUnit output",
        description="Run every test of a suite file, in parallel, with a live table and a summary.",
        epilog="Exit code (worst of): 255 if any run crashed, else 1 if any failed, else 2 if any unknown, "
        "else 0; 254 bad suite file or options.",
    )
    from harness.suite import add_arguments as add_suite_arguments

    add_suite_arguments(suite)
    analyze = sub.add_parser(
        "analyze",
        help="re-check and roll up every stored run with the PySpark pipeline; writes the nightly report",
        description="Ingest the store's runs into Parquet, re-check them on Spark executors, compute roll-ups "
        "and write an HTML report with trend plots into --out. Runs analysed before are skipped.",
        epilog="Exit code: 0 done (even when runs are invalid or malformed: see the report), 254 bad arguments, "
        "255 the pipeline itself failed.",
    )
    from harness.nightly import add_arguments as add_analyze_arguments

    add_analyze_arguments(analyze)
    serve = sub.add_parser(
        "serve",
        help="browse the store in a web browser: runs, verdicts, files, nightly reports",
        description="Serve the store over HTTP (read only; nothing outside the store is reachable).",
    )
    from harness.serve import add_arguments as add_serve_arguments

    add_serve_arguments(serve)
    image = sub.add_parser(
        "image",
        help="build (or reuse) the docker node image",
        description="Build the kraftwerk node image (offline debootstrap base when no registry is reachable).",
    )
    from harness.image import add_arguments as add_image_arguments

    add_image_arguments(image)
    report = sub.add_parser(
        "report",
        help="(re)build a run's report.html: verdict, checkers, latency and rate plots, timelines",
        description="Build RUN_DIR/report.html, latency.png, rate.png and timelines/ from the run's files.",
        epilog="Exit code: 0 written, 254 not a run directory, 255 internal error.",
    )
    from harness.report.command import add_arguments as add_report_arguments

    add_report_arguments(report)
    cluster = sub.add_parser(
        "cluster",
        help="start, fault and stop a cluster left running (kafka-python and friends can use it)",
        description="Manage a cluster that stays up between commands: up, kill, start, down.",
        epilog="Exit code: 0 done, 254 bad options or input, 255 the cluster failed.",
    )
    from harness.cluster_command import add_arguments as add_cluster_arguments

    add_cluster_arguments(cluster)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kraftwerk` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: where is it stuck?
    parser = build_parser("check" if args_list[:1] == ["check"] else None)
    try:
        args = parser.parse_args(args_list)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        if args.command == "check":
            from harness.check_command import run_check

            return run_check(args)
        if args.command == "replay":
            from harness.replay import run_replay

            return run_replay(args)
        if args.command == "shrink":
            from harness.shrink import run_shrink

            return run_shrink(args)
        if args.command == "explore":
            from harness.explore import run_explore

            return run_explore(args)
        if args.command == "test":
            from harness.test_command import run_test

            return run_test(args)
        if args.command == "suite":
            from harness.suite import run_suite

            return run_suite(args)
        if args.command == "analyze":
            from harness.nightly import run_analyze

            return run_analyze(args)
        if args.command == "serve":
            from harness.serve import run_serve

            return run_serve(args)
        if args.command == "cluster":
            from harness.cluster_command import run_cluster

            return run_cluster(args)
        if args.command == "image":
            from harness.image import run as run_image

            return run_image(args)
        if args.command == "report":
            from harness.report.command import run_report

            return run_report(args)
        raise UsageError(f"kraftwerk: unknown command {args.command!r}")  # pragma: no cover
    except UsageError as e:
        print(str(e), file=sys.stderr)
        print("(see 'kraftwerk --help')", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kraftwerk: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # --help and friends
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_BAD_INPUT
    except Exception:  # noqa: BLE001 - the harness itself failed: say so, exit 255
        traceback.print_exc()
        print("kraftwerk: internal error (this is a bug in kraftwerk)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
