"""`kraftwerk explore`: search simulated schedules until one fails, then say how to replay and shrink it.

Each attempt is a fresh seeded schedule (faults and operations drawn from the
seed) in the deterministic simulator; the first invalid run is stored like a
`kraftwerk test` run, and its seed and the replay/shrink commands are printed.

With `--runs N` it runs exactly N seeds instead (all of them, not stopping at the
first invalid one), stores them, and prints every invalid seed; with `--master`
those runs are Spark tasks on that cluster (`harness.tools.fleet`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import replace

from checkers.verdict import EXIT_BAD_INPUT
from harness.core.argtypes import master_problem, non_negative_int, positive_int
from harness.core.spec import SpecError, TestSpec
from harness.sim.runs import simulate, store_run
from harness.store.runs import new_run
from harness.tools.shrink import parse_budget

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
    # callers that build the namespace themselves (tests, older scripts) may leave the fleet options out
    for name, default in (("master", None), ("runs", None), ("keep", "all")):
        if not hasattr(args, name):
            setattr(args, name, default)
    if args.master is not None and args.runs is None:
        print("kraftwerk explore: --master needs --runs N (how many seeds to spread over the cluster)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.master is not None and (problem := master_problem("explore", args.master)):
        print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.runs is not None:
        return _fleet(args, spec)
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


def _fleet(args: argparse.Namespace, spec: TestSpec) -> int:
    """`--runs N`: run N seeds (here, or as Spark tasks on --master) and report every invalid one."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.tools.fleet import RunRow, run_fleet

    console = Console(stderr=True, highlight=False)
    seeds = [(spec.seed + i) % 2**31 for i in range(args.runs)]
    where = f"on {args.master}" if args.master else "in this process"
    console.print(f"explore: {args.runs} simulated runs {where}, seeds {seeds[0]}…, store {args.store}")
    started = time.monotonic()
    columns = (
        TextColumn("runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} runs/s · {task.fields[invalid]} invalid"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal) as bar:
        task = bar.add_task("runs", total=args.runs, rate="0.0", invalid=0)
        last_report = [0.0]

        def progress(rows: list[RunRow]) -> None:
            elapsed = max(1e-9, time.monotonic() - started)
            bad = sum(1 for r in rows if _counts(r, args.observable))
            bar.update(task, completed=len(rows), rate=f"{len(rows) / elapsed:.1f}", invalid=bad)
            if not console.is_terminal and time.monotonic() - last_report[0] >= 5:
                last_report[0] = time.monotonic()
                console.print(f"{len(rows)}/{args.runs} runs, {len(rows) / elapsed:.1f} runs/s, {bad} invalid")

        specs = [replace(spec, seed=seed) for seed in seeds]
        rows = run_fleet(specs, args.store, master=args.master, keep=args.keep, progress=progress)
    seconds = time.monotonic() - started
    invalid = sorted((r for r in rows if _counts(r, args.observable)), key=lambda r: r.seed)
    simulated = sum(r.sim_seconds for r in rows)
    console.print(
        f"{len(rows)} runs in {seconds:.1f} s: {len(rows) / seconds:.2f} runs/s, "
        f"{simulated / seconds:.0f} simulated seconds per second; {len(invalid)} invalid"
    )
    for r in invalid:
        console.print(f"INVALID seed {r.seed} ({', '.join(r.anomalies)}) on {r.host}: {r.run_dir}")
        if r.run_dir:
            console.print(f"  replay: kraftwerk replay {shlex.quote(r.run_dir)}")
            console.print(f"  shrink: kraftwerk shrink {shlex.quote(r.run_dir)}")
            print(r.run_dir)
    return 1 if invalid else 0


def _counts(row: object, observable: bool) -> bool:
    return bool(getattr(row, "invalid", False)) and (not observable or bool(getattr(row, "observable", ())))


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
