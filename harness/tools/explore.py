"""`kraftwerk explore`: search simulated schedules until one fails; or run exactly N seeds, here or on Spark.

`search` runs fresh seeded schedules (faults and operations drawn from the seed) in the deterministic simulator,
seed after seed, until one is invalid (with `observable`: invalid by an anomaly a real cluster's checkers can
report too, not only by the simulator's invariants) or the budget runs out; the invalid run is stored like a
`kraftwerk test` run and its seed and the replay/shrink commands are printed. `fleet` runs exactly N seeds
(`harness.tools.fleet`: in this process, or as Spark tasks on a master), stores them and reports every invalid
one.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import replace

from harness.core.live import LiveLine
from harness.core.spec import TestSpec, seed_after
from harness.sim.runs import simulate, store_run
from harness.store.runs import new_run, test_document


def search(spec: TestSpec, store: str, budget: float, observable: bool = False, quiet: bool = False) -> int:
    """Seed after seed from `spec.seed` until an invalid run (1, its directory printed) or the budget (0). Unless
    `quiet`, a live line on stderr (harness.core.live) shows attempts, runs per second, simulated time and the
    budget left, and each invalid run is named."""
    start = time.monotonic()
    deadline = start + budget
    attempt = 0
    simulated = 0.0
    with LiveLine(quiet) as live:
        while time.monotonic() < deadline:
            attempt += 1
            seed = spec.seed
            checked = simulate(spec)
            simulated += float(checked.sim.stats.get("virtual-seconds", 0.0))
            hidden = checked.valid is False and observable and not checked.observable
            if hidden:
                live.say(
                    f"attempt {attempt}: seed {seed}: INVALID, but by only simulator invariants "
                    f"({', '.join(sorted(checked.anomalies))}); going on"
                )
            elapsed = time.monotonic() - start
            live.status(
                f"explore: attempt {attempt} (seed {seed}) · {attempt / elapsed:.2f} runs/s · {simulated:,.0f} s "
                f"simulated in {elapsed:,.1f} s · {max(0.0, deadline - time.monotonic()):,.0f} s of budget left"
            )
            if checked.valid is False and not hidden:
                run_dir = new_run(store, spec.name)
                test = test_document(spec, **{"explore-attempts": attempt})
                store_run(run_dir, checked, test)
                anomalies = ", ".join(sorted(checked.anomalies))
                for line in (
                    f"found an invalid run after {attempt} attempt(s): seed {seed}, anomalies: {anomalies}",
                    f"stored in {run_dir}",
                    f"replay: kraftwerk replay {shlex.quote(str(run_dir))}",
                    f"shrink: kraftwerk shrink {shlex.quote(str(run_dir))}",
                ):
                    print(line, file=sys.stderr, flush=True)
                print(str(run_dir))
                return 1
            spec = replace(spec, seed=seed_after(seed))
    print(
        f"no invalid run in {attempt} attempt(s) within the budget ({simulated:,.0f} s simulated)",
        file=sys.stderr,
    )
    return 0


def fleet(
    spec: TestSpec,
    runs: int,
    store: str,
    master: str | None = None,
    keep: str = "all",
    observable: bool = False,
    quiet: bool = False,
) -> int:
    """Run `runs` seeds from `spec.seed` (here, or as Spark tasks on `master`) and report every invalid one (1 if
    any, else 0); `keep` "invalid" stores only those. Unless `quiet`, progress on stderr: a bar on a terminal,
    else a line every 5 s."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.tools.fleet import RunRow, run_fleet

    console = Console(stderr=True, highlight=False, soft_wrap=True)  # a log keeps each line whole
    seeds = [seed_after(spec.seed, i) for i in range(runs)]
    where = f"on {master}" if master else "in this process"
    if not quiet:
        console.print(f"explore: {runs} simulated runs {where}, seeds {seeds[0]}…, store {store}")
    started = time.monotonic()
    columns = (
        TextColumn("runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} runs/s · {task.fields[invalid]} invalid"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False, disable=quiet or not console.is_terminal) as bar:
        task = bar.add_task("runs", total=runs, rate="0.0", invalid=0)
        last_report = [0.0]

        def progress(rows: list[RunRow]) -> None:
            elapsed = max(1e-9, time.monotonic() - started)
            bad = sum(1 for r in rows if _counts(r, observable))
            bar.update(task, completed=len(rows), rate=f"{len(rows) / elapsed:.1f}", invalid=bad)
            if not quiet and not console.is_terminal and time.monotonic() - last_report[0] >= 5:
                last_report[0] = time.monotonic()
                console.print(f"{len(rows)}/{runs} runs, {len(rows) / elapsed:.1f} runs/s, {bad} invalid")

        specs = [replace(spec, seed=seed) for seed in seeds]
        rows = run_fleet(specs, store, master=master, keep=keep, progress=progress)
    seconds = time.monotonic() - started
    invalid = sorted((r for r in rows if _counts(r, observable)), key=lambda r: r.seed)
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
