"""`kraftwerk test`: run one chaos test, store everything, check it, exit with the verdict.

Both backends go through `harness.core.run.run_test` (the simulator as a `SimRuntime`, real clusters
as a `RealRuntime`). The run directory (docs/design.md "Store") gets test.json (every option and the seed,
written here) and what `harness.store.runs.RunDir` writes: history.jsonl (written as the run goes),
events.jsonl, logs/<node>.jsonl, schedule.json (the realised fault schedule), run.json (the phases'
times), results.json and, for an invalid linearizability verdict, timeline.html.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from checkers.verdict import EXIT_BAD_INPUT, EXIT_VALID, exit_code
from harness.core.argtypes import positive_int
from harness.core.spec import SpecError, TestSpec, seed_after
from harness.core.spec import add_arguments as add_test_arguments
from harness.core.spec import from_args as spec_from_args
from harness.real.run import run_real_test, runnable_problem
from harness.store.runs import RunDir, new_run, test_document, write_json
from harness.store.summary import print_verdict

HELP = "run a chaos test: start a cluster, inject faults, record a history, check it"
DESCRIPTION = (
    "Run one chaos test. Nodes run on the chosen backend while clients run the workload and "
    "the nemesis injects faults; then everything is healed, recovered and read back, and the "
    "history is checked. The run is stored under --store (test.json, history.jsonl, "
    "events.jsonl, logs/, schedule.json, results.json)."
)
EPILOG = (
    "With --test-count N the test runs N times, seeds --seed, --seed+1, …, and stops at the first run that is "
    "not valid (its seed and reproduce command are printed); the exit code is that run's, or 0. "
    "Exit code: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 internal error."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every test option (harness.core.spec), then where the run is stored and how much is printed."""
    add_test_arguments(p)
    p.add_argument("--store", default="store", metavar="DIR", help="where runs are stored (default ./store)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the final line")
    p.add_argument(
        "--test-count",
        type=positive_int,
        default=1,
        metavar="N",
        help="run the test N times with seeds --seed, --seed+1, …; stop at the first run that is not valid "
        "(as Jepsen's --test-count; default 1)",
    )


def build_spec(args: argparse.Namespace) -> TestSpec:
    """The TestSpec `kraftwerk test ARGS` runs; SpecError (exit 254) naming the first bad option,
    including faults this machine cannot inject (checked last, for real backends only)."""
    spec = spec_from_args(args)
    problem = runnable_problem(spec)
    if problem:
        raise SpecError(problem)
    return spec


def problem(args: argparse.Namespace) -> str | None:
    """Why `kraftwerk test` refuses these options (exit 254), or None."""
    try:
        build_spec(args)
    except SpecError as e:
        return str(e)
    return None


def reproduce_command(spec: TestSpec) -> str:
    """The command line that runs this exact test again (same seed, same options)."""
    return spec.reproduce()


def run(args: argparse.Namespace) -> int:
    """`kraftwerk test`: build the TestSpec, run it on its backend (--test-count times), store and check it."""
    try:
        spec = build_spec(args)
    except SpecError as e:
        print(f"kraftwerk test: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    count = args.test_count
    for i in range(count):
        one = replace(spec, seed=seed_after(spec.seed, i))
        if count > 1 and not args.quiet:
            print(f"kraftwerk test: run {i + 1} of {count}, seed {one.seed}", file=sys.stderr, flush=True)
        code = run_one(one, args)
        if code != EXIT_VALID:
            if count > 1:
                print(
                    f"kraftwerk test: run {i + 1} of {count} (seed {one.seed}) is not valid (exit {code}); "
                    f"stopped. Reproduce: {reproduce_command(one)}",
                    file=sys.stderr,
                )
            return code
    if count > 1:
        print(f"kraftwerk test: all {count} runs valid (seeds {spec.seed}…{seed_after(spec.seed, count - 1)})")
    return EXIT_VALID


def run_one(spec: TestSpec, args: argparse.Namespace) -> int:
    """One test: store it under ``args.store``, run it, print and return its verdict's exit code."""
    try:
        run_dir = new_run(args.store, spec.name)
    except (OSError, ValueError) as e:
        print(f"kraftwerk test: cannot create a run under --store {args.store}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    say = (lambda *_: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    replay = reproduce_command(spec)
    write_json(run_dir / "test.json", test_document(spec))
    say(
        f"kraftwerk test {spec.name}: seed {spec.seed}, {spec.nodes} nodes, {spec.concurrency} clients, "
        f"nemesis {','.join(spec.nemeses) or 'none'}{', bugs ' + ','.join(spec.bugs) if spec.bugs else ''}"
    )
    say(f"run directory {run_dir}")
    if spec.backend != "sim":
        return run_real_test(spec, run_dir, replay, quiet=args.quiet)
    from harness.core.run import run_test
    from harness.sim.runtime import SimRuntime

    run = run_test(spec, SimRuntime(spec, say=say), RunDir(run_dir, {"run-dir": str(run_dir), "reproduce": replay}))
    print_verdict(run.results, run_dir, replay)
    return exit_code(run.results["valid"])
