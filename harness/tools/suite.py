"""`kraftwerk suite SUITE.toml`: run a matrix of chaos tests (Jepsen's test-all), report, and gate CI.

A suite file (TOML) lists matrix entries; each expands to workloads × nemeses × backends × option
values × seeds, and every combination is one `kraftwerk test` run in a subprocess, stored in the run
store as usual. Runs go in parallel up to a limit, with a live table while they run and a summary at
the end; `--junit FILE` writes one testcase per run. The exit code follows Jepsen's test-all: 255 if
any run crashed, else 2 if any was unknown, else 1 if any failed, else 0. A run "fails" when its
verdict differs from the entry's `expect` (default "valid"; "invalid" asserts a seeded bug is caught;
"any" only records the verdict, for detection rates). An unknown verdict is never a pass.

Suite file::

    [suite]
    name = "smoke"            # default: the file's stem
    parallel = 2              # default: --parallel, else the number of CPUs
    timeout = 600             # wall seconds per run before it is killed and counted as crashed
    seeds = [1, 2, 3]         # or a count (seeds 1..N), or {count = N, start = S}, or {count = N, random = true}

    [defaults]                # any entry key, applied to every entry
    time-limit = 30

    [[matrix]]
    workloads = ["register"]  # each of these keys takes a value or a list of values
    backends = ["sim"]
    nemeses = ["partition", "kill,pause", "all", "none"]
    nodes = [3, 5]            # any `kraftwerk test` option; a list is one more matrix dimension
    bugs = ["stale-read"]     # one bug per element; "a,b" or ["a", "b"] as an element for several
    expect = "invalid"        # "valid" (default), "invalid", or "any" (measure only: both verdicts pass)
    skip = "reason"           # optional: report these runs as skipped
    name = "stale-read"       # optional: the test name in the store
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.pipeline.config import config_label
from checkers.verdict import EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from harness.core.spec import SEED_SPACE, SpecError, TestSpec

SUITE_KEYS = frozenset({"name", "description", "parallel", "timeout", "seeds", "store"})
# Entry keys that are not `kraftwerk test` options.
STRUCTURAL = frozenset({"name", "workloads", "nemeses", "backends", "seeds", "expect", "skip", "timeout"})
# `kraftwerk test` options the suite sets itself (or that are dimensions of their own).
MANAGED = frozenset({"workload", "nemesis", "backend", "seed", "store", "name", "quiet", "help"})
EXPECT = ("valid", "invalid", "any")
DEFAULT_TIMEOUT = 600.0
# `--quick`: every combination once (its first seed), at most this many seconds of main phase, and a seeded
# bug's `expect = "invalid"` relaxed to "any" (so short a run need not catch it): does the suite still run?
QUICK_TIME_LIMIT = 10
STATUSES = ("passed", "failed", "unknown", "crashed", "skipped")


class SuiteError(ValueError):
    """A suite file that cannot be run: exit 254 with the message."""


# -- planning --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """One run of the matrix."""

    index: int
    entry: int  # 1-based matrix entry
    config: str  # configuration label (JUnit classname)
    name: str  # test name in the store
    seed: int
    argv: tuple[str, ...]  # arguments after `kraftwerk test`, without --store
    expect: str = "valid"
    skip: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    spec: TestSpec | None = field(default=None, compare=False, repr=False)  # with this run's seed and name

    @property
    def reproduce(self) -> str:
        return shlex.join(["kraftwerk", "test", *self.argv])


@dataclass
class Suite:
    name: str
    path: str
    description: str
    parallel: int | None
    store: str | None
    runs: list[Planned]


def _test_parser() -> argparse.ArgumentParser:
    from harness.core.argtypes import Parser
    from harness.core.spec import add_arguments

    parser = Parser(prog="kraftwerk test", add_help=False)
    add_arguments(parser)  # every test option, as `kraftwerk test` has them
    return parser


def known_options(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.Action]:
    """`kraftwerk test` options a suite may set, by name without dashes (`time-limit`, `bug`, …).

    Derived from the test command's own parser, so an option added there is accepted here.
    """
    parser = parser or _test_parser()
    out: dict[str, argparse.Action] = {}
    for action in parser._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        if not longs:
            continue
        name = longs[0][2:]
        if name not in MANAGED:
            out[name] = action
    return out


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _seeds(value: Any, where: str) -> list[int]:
    if isinstance(value, bool):
        raise SuiteError(f"{where}: seeds must be a list of integers, a count or a table, got {value!r}")
    if isinstance(value, int):
        value = {"count": value}
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"count", "start", "random"})
        if unknown:
            raise SuiteError(f"{where}: unknown seeds key(s) {', '.join(unknown)} (known: count, start, random)")
        count = value.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise SuiteError(f"{where}: seeds count must be a positive integer, got {count!r}")
        if value.get("random"):
            rng = random.SystemRandom()
            return [rng.randrange(SEED_SPACE) for _ in range(count)]
        start = value.get("start", 1)
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise SuiteError(f"{where}: seeds start must be a non-negative integer, got {start!r}")
        return list(range(start, start + count))
    if isinstance(value, list) and value:
        for s in value:
            if not isinstance(s, int) or isinstance(s, bool) or s < 0:
                raise SuiteError(f"{where}: seeds must be non-negative integers, got {s!r}")
        if len(set(value)) != len(value):
            raise SuiteError(f"{where}: seeds repeat: {value}")
        return list(value)
    raise SuiteError(f"{where}: seeds must be a non-empty list of integers, a count or a table, got {value!r}")


def _option_values(name: str, action: argparse.Action, value: Any, where: str) -> list[list[str]]:
    """The argv fragments for each value of one option (a list of values is a matrix dimension)."""
    values = _as_list(value)
    if not values:
        raise SuiteError(f"{where}: option {name} has an empty list of values")
    out: list[list[str]] = []
    flag = f"--{name}"
    for v in values:
        if isinstance(action, argparse._AppendAction):
            items = v if isinstance(v, list) else [v]
            frag: list[str] = []
            for item in items:
                if not isinstance(item, str):
                    raise SuiteError(f"{where}: option {name} expects names, got {item!r}")
                for part in item.split(","):
                    if part.strip():
                        frag += [flag, part.strip()]
            out.append(frag)
        elif action.nargs == 0:  # a switch
            if not isinstance(v, bool):
                raise SuiteError(f"{where}: option {name} is a switch: use true or false, got {v!r}")
            out.append([flag] if v else [])
        else:
            if isinstance(v, (list, dict, bool)):
                raise SuiteError(f"{where}: option {name} takes a number or a string, got {v!r}")
            out.append([flag, str(v)])
    return out


def _test_name(workload: str, backend: str, nemeses: list[str], opts: list[str], defaults: dict[str, Any]) -> str:
    """A readable store name: workload-backend-nemeses plus the options that differ from the defaults."""
    parts = [workload, backend, "+".join(nemeses) or "none"]
    parser = _test_parser()
    args = parser.parse_args(opts)
    bugs = sorted(set(getattr(args, "bug", []) or []))
    for key, value in sorted(vars(args).items()):
        name = key.replace("_", "-")
        if name in MANAGED or name == "bug" or value == defaults.get(key):
            continue
        if isinstance(value, tuple):
            value = "+".join(value) or "none"
        parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    if bugs:
        parts.append("+".join(bugs))
    return "-".join(parts)


def load_suite(path: str | os.PathLike[str], quick: bool = False) -> Suite:
    """Read, validate and expand a suite file; raise SuiteError with a clear message on any problem.
    `quick`: the suite scaled down (`QUICK_TIME_LIMIT`, each combination once) to check that it still parses and
    runs."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{p}: no such suite file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(f"{p}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SuiteError(f"{p}: not valid TOML: {e}") from None
    unknown = sorted(set(doc) - {"suite", "defaults", "matrix"})
    if unknown:
        raise SuiteError(f"{p}: unknown top-level key(s) {', '.join(unknown)} (known: suite, defaults, matrix)")
    head = doc.get("suite", {})
    if not isinstance(head, dict):
        raise SuiteError(f"{p}: [suite] must be a table")
    unknown = sorted(set(head) - SUITE_KEYS)
    if unknown:
        raise SuiteError(f"{p}: unknown [suite] key(s) {', '.join(unknown)} (known: {', '.join(sorted(SUITE_KEYS))})")
    parallel = head.get("parallel")
    if parallel is not None and (not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1):
        raise SuiteError(f"{p}: [suite] parallel must be a positive integer, got {parallel!r}")
    timeout = head.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise SuiteError(f"{p}: [suite] timeout must be a positive number of seconds, got {timeout!r}")
    store = head.get("store")
    if store is not None and not isinstance(store, str):
        raise SuiteError(f"{p}: [suite] store must be a string")
    name = head.get("name", p.stem)
    if not isinstance(name, str) or not name:
        raise SuiteError(f"{p}: [suite] name must be a non-empty string")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise SuiteError(f"{p}: [defaults] must be a table")
    matrix = doc.get("matrix")
    if not isinstance(matrix, list) or not matrix or not all(isinstance(e, dict) for e in matrix):
        raise SuiteError(f"{p}: needs at least one [[matrix]] entry")

    parser = _test_parser()
    options = known_options(parser)
    arg_defaults = vars(parser.parse_args([]))
    suite_seeds = head.get("seeds", [1])
    runs: list[Planned] = []
    for number, raw in enumerate(matrix, 1):
        where = f"{p}: [[matrix]] entry {number}"
        entry = {**defaults, **raw}
        option_keys = [k for k in entry if k not in STRUCTURAL]
        unknown = sorted(k for k in option_keys if k not in options and k != "bugs")
        if unknown:
            known = ", ".join(sorted([*options, "bugs"]))
            raise SuiteError(
                f"{where}: unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(STRUCTURAL))}, {known})"
            )
        if "bugs" in entry and "bug" in entry:
            raise SuiteError(f"{where}: give bugs or bug, not both")
        expect = entry.get("expect", "valid")
        if expect not in EXPECT:
            raise SuiteError(f"{where}: expect must be one of {', '.join(EXPECT)}, got {expect!r}")
        if quick:
            expect = "any" if expect == "invalid" else expect
            limit = entry.get("time-limit", arg_defaults["time_limit"])
            entry["time-limit"] = [
                min(v, QUICK_TIME_LIMIT) if isinstance(v, (int, float)) else v for v in _as_list(limit)
            ]
        skip = entry.get("skip")
        if skip is not None and (not isinstance(skip, str) or not skip):
            raise SuiteError(f"{where}: skip must be a reason (a non-empty string)")
        run_timeout = entry.get("timeout", timeout)
        if isinstance(run_timeout, bool) or not isinstance(run_timeout, (int, float)) or run_timeout <= 0:
            raise SuiteError(f"{where}: timeout must be a positive number of seconds, got {run_timeout!r}")
        entry_name = entry.get("name") if "name" in raw else None
        if entry_name is not None and (not isinstance(entry_name, str) or not entry_name or "/" in entry_name):
            raise SuiteError(f"{where}: name must be a non-empty string without '/'")
        dims: list[tuple[str, list[list[str]]]] = []
        for key, flag in (("workloads", "--workload"), ("backends", "--backend"), ("nemeses", "--nemesis")):
            default = arg_defaults[flag[2:]]  # a list option's default is its value (a tuple): as typed, it is text
            values = _as_list(entry.get(key, [",".join(default) or "none" if isinstance(default, tuple) else default]))
            if not values or not all(isinstance(v, str) and v for v in values):
                raise SuiteError(f"{where}: {key} must be a non-empty list of strings")
            dims.append((key, [[flag, v] for v in values]))
        for key in option_keys:
            opt = "bug" if key == "bugs" else key
            dims.append((opt, _option_values(opt, options[opt], entry[key], where)))
        seeds = _seeds(entry.get("seeds", suite_seeds), where)[: 1 if quick else None]
        for combo in itertools.product(*(values for _, values in dims)):
            argv = [a for frag in combo for a in frag]
            opts = [a for frag in combo[3:] for a in frag]
            try:
                args = parser.parse_args(argv)
            except Exception as e:  # noqa: BLE001 - the parser's UsageError or argparse's own
                raise SuiteError(f"{where}: {shlex.join(argv)}: {e}") from None
            try:
                spec = _test_spec(args)
            except SpecError as e:
                raise SuiteError(f"{where}: {e}") from None
            config = config_label(spec.config())
            test_name = entry_name or _test_name(spec.workload, spec.backend, list(spec.nemeses), opts, arg_defaults)
            nemesis = ",".join(spec.nemeses) or "none"
            argv_norm = ["--workload", spec.workload, "--backend", spec.backend, "--nemesis", nemesis, *opts]
            for seed in seeds:
                runs.append(
                    Planned(
                        index=len(runs),
                        entry=number,
                        config=config,
                        name=test_name,
                        seed=seed,
                        argv=(*argv_norm, "--seed", str(seed)),
                        expect=expect,
                        skip=skip,
                        timeout=float(run_timeout),
                        spec=replace(spec, seed=seed, name=test_name),
                    )
                )
    if quick:  # a combination that two entries share runs once
        firsts = {run.config: run for run in reversed(runs)}
        runs = [replace(run, index=i) for i, run in enumerate(r for r in runs if firsts[r.config] is r)]
    description = head.get("description", "")
    return Suite(name=name, path=str(p), description=str(description), parallel=parallel, store=store, runs=runs)


def _test_spec(args: argparse.Namespace) -> TestSpec:
    """The TestSpec `kraftwerk test` would run for these options (SpecError, naming the option, if none)."""
    from harness.core.spec import from_args
    from harness.real.run import runnable_problem

    spec = from_args(args)
    problem = runnable_problem(spec)
    if problem:
        raise SpecError(problem)
    return spec


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What became of one planned run."""

    planned: Planned
    status: str = "queued"  # queued, running, passed, failed, unknown, crashed, skipped
    verdict: Any = None  # results.json "valid": True, False, "unknown" (None: no results)
    exit: int | None = None
    seconds: float = 0.0
    started: float | None = None
    run_dir: str | None = None
    anomalies: list[str] = field(default_factory=list)
    reproduce: str = ""
    message: str = ""
    output: str = ""

    @property
    def finished(self) -> bool:
        return self.status in STATUSES


def exit_code_test_all(statuses: Iterable[str]) -> int:
    """The suite's exit code, worst of: 255 if any run crashed, else 1 if any failed, else 2 if any
    was unknown, else 0 — the order the issue asks for (a finding outranks an inconclusive run).

    Jepsen's own test-all ranks unknown above invalid (docs/design.md "Exit codes"); for a CI gate a definite
    failure is the more useful signal.
    """
    seen = set(statuses)
    if "crashed" in seen:
        return EXIT_INTERNAL
    if "failed" in seen:
        return EXIT_INVALID
    if "unknown" in seen:
        return EXIT_UNKNOWN
    return EXIT_VALID


def _judge(outcome: Outcome) -> None:
    """Set status and message from the exit code and the run's results.json."""
    import json

    p = outcome.planned
    results: dict[str, Any] | None = None
    if outcome.run_dir:
        try:
            results = json.loads((Path(outcome.run_dir) / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            results = None
    if outcome.status == "crashed":
        return  # timed out or interrupted: message already set
    if results is None or outcome.exit not in (EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN):
        outcome.status = "crashed"
        tail = outcome.output.strip().splitlines()[-1:] or ["no output"]
        outcome.message = f"kraftwerk test exited {outcome.exit} without a verdict: {tail[0]}"
        return
    valid = results.get("valid")
    outcome.verdict = valid
    outcome.anomalies = list(results.get("anomaly-types", []))
    outcome.reproduce = results.get("run", {}).get("reproduce", p.reproduce)
    if p.expect == "any" and isinstance(valid, bool):
        outcome.status = "passed"
        outcome.message = (
            "valid" if valid else f"invalid ({', '.join(outcome.anomalies) or 'anomalies'}); any verdict is accepted"
        )
    elif valid is True:
        if p.expect == "valid":
            outcome.status, outcome.message = "passed", "valid"
        else:
            outcome.status, outcome.message = "failed", "valid, but invalid was expected: the seeded bug was not caught"
    elif valid is False:
        kinds = ", ".join(outcome.anomalies) or "anomalies"
        if p.expect == "invalid":
            outcome.status, outcome.message = "passed", f"invalid as expected ({kinds})"
        else:
            outcome.status, outcome.message = "failed", f"invalid: {kinds}"
    else:
        outcome.status = "unknown"
        causes = [
            str(part.get("cause") or part.get("error"))
            for part in results.values()
            if isinstance(part, dict) and part.get("valid") == "unknown" and (part.get("cause") or part.get("error"))
        ]
        outcome.message = "unknown" + (f": {'; '.join(causes)}" if causes else "")


class Runner:
    """Runs planned tests as `kraftwerk test` subprocesses, at most `parallel` at once; with a Spark
    `master`, the simulated runs go to that cluster as one fleet (`harness.tools.fleet`) instead."""

    def __init__(self, runs: Sequence[Planned], store: str, parallel: int, master: str | None = None) -> None:
        self.outcomes = [Outcome(p, reproduce=p.reproduce) for p in runs]
        self.store = store
        self.master = master
        self.parallel = max(1, parallel)
        self.lock = threading.Lock()
        self._name_locks: dict[str, threading.Lock] = {}
        self._procs: dict[int, subprocess.Popen[str]] = {}
        self._stopping = threading.Event()
        self.done = threading.Event()

    def _name_lock(self, name: str) -> threading.Lock:
        with self.lock:
            return self._name_locks.setdefault(name, threading.Lock())

    def _run_one(self, outcome: Outcome) -> None:
        p = outcome.planned
        if p.skip is not None:
            outcome.status, outcome.message = "skipped", p.skip
            return
        if self._stopping.is_set():
            outcome.status, outcome.message = "skipped", "suite interrupted"
            return
        cmd = [sys.executable, "-m", "harness.cli", "test", *p.argv, "--store", self.store, "--name", p.name]
        # Two runs of one test name must not create their run directories in the same millisecond:
        # hold the name's lock until the child has printed its run directory.
        name_lock = self._name_lock(p.name)
        name_lock.acquire()
        released = False
        lines: list[str] = []
        timer: threading.Timer | None = None
        try:
            outcome.started = time.monotonic()
            outcome.status = "running"
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            with self.lock:
                self._procs[p.index] = proc
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                _kill_group(proc)

            timer = threading.Timer(p.timeout, kill)
            timer.daemon = True
            timer.start()
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if len(lines) > 200:
                    del lines[:100]
                if line.startswith("run directory "):
                    outcome.run_dir = line[len("run directory ") :].strip()
                    if not released:
                        name_lock.release()
                        released = True
            outcome.exit = proc.wait()
            outcome.seconds = time.monotonic() - outcome.started
            outcome.output = "".join(lines[-40:])
            if timed_out.is_set():
                outcome.status, outcome.message = "crashed", f"timed out after {p.timeout:g} s and was killed"
            elif self._stopping.is_set() and outcome.exit not in (0, 1, 2):
                outcome.status, outcome.message = "crashed", "killed: suite interrupted"
            _judge(outcome)
        except OSError as e:
            outcome.status, outcome.message = "crashed", f"cannot start kraftwerk test: {e}"
        finally:
            if timer is not None:
                timer.cancel()
            if not released:
                name_lock.release()
            with self.lock:
                self._procs.pop(p.index, None)

    def run(self) -> None:
        try:
            fleet = [
                o
                for o in self.outcomes
                if self.master and o.planned.skip is None and o.planned.spec and o.planned.spec.backend == "sim"
            ]
            in_fleet = {id(o) for o in fleet}
            with ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="suite") as pool:
                if fleet:
                    pool.submit(self._run_fleet, fleet)
                for outcome in self.outcomes:
                    if id(outcome) not in in_fleet:
                        pool.submit(self._run_one, outcome)
        finally:
            self.done.set()

    def _run_fleet(self, outcomes: list[Outcome]) -> None:
        """The simulated runs as Spark tasks on `master`; their outcomes as the rows come in."""
        from harness.tools.fleet import RunRow, run_fleet

        started = time.monotonic()
        for o in outcomes:
            o.status, o.started = "running", started

        def settle(row: RunRow) -> None:
            o = outcomes[row.index]
            if o.finished:
                return
            o.run_dir, o.seconds = row.run_dir, row.wall_seconds
            o.exit = {True: EXIT_VALID, False: EXIT_INVALID}.get(row.valid, EXIT_UNKNOWN)  # type: ignore[call-overload]
            o.output = f"simulated on {row.host} in {row.wall_seconds:.1f} s"
            _judge(o)

        def progress(rows: list[RunRow]) -> None:
            for row in rows:
                settle(row)

        try:
            assert self.master is not None
            specs = [o.planned.spec for o in outcomes if o.planned.spec is not None]
            for row in run_fleet(specs, self.store, master=self.master, keep="all", progress=progress):
                settle(row)
        except Exception as e:  # noqa: BLE001 - the cluster failed: every run not settled crashed
            for o in outcomes:
                if not o.finished:
                    o.status, o.message = "crashed", f"the Spark fleet failed: {e}"

    def interrupt(self) -> None:
        """Stop: no new runs; kill the running ones (by their process group)."""
        self._stopping.set()
        with self.lock:
            procs = list(self._procs.values())
        for proc in procs:
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# -- presentation ----------------------------------------------------------------------------------

_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "unknown": "yellow",
    "crashed": "bold magenta",
    "skipped": "dim",
    "running": "cyan",
    "queued": "dim",
}


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    counts = {s: 0 for s in ("queued", "running", *STATUSES)}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    return counts


def live_table(outcomes: Sequence[Outcome], title: str, recent: int = 8) -> Any:
    """The table shown while a suite runs: counts, the running runs, recent and failing ones."""
    from rich.table import Table

    counts = _counts(outcomes)
    done = sum(counts[s] for s in STATUSES)
    caption = "  ".join(f"[{_STYLE[s]}]{s} {counts[s]}[/]" for s in ("running", *STATUSES) if counts[s])
    table = Table(title=f"{title}: {done}/{len(outcomes)} done", caption=caption, expand=False)
    for col in ("#", "configuration", "seed", "status", "time", "detail"):
        table.add_column(col, overflow="fold")
    now = time.monotonic()
    running = [o for o in outcomes if o.status == "running"]
    finished = [o for o in outcomes if o.finished and o.status != "skipped"]
    bad = [o for o in finished if o.status in ("failed", "crashed", "unknown")]
    shown = running + [o for o in finished[-recent:] if o not in bad] + bad[-recent:]
    for o in sorted(shown, key=lambda o: o.planned.index):
        secs = now - o.started if o.status == "running" and o.started else o.seconds
        table.add_row(
            str(o.planned.index + 1),
            o.planned.config,
            str(o.planned.seed),
            f"[{_STYLE[o.status]}]{o.status}[/]",
            f"{secs:.1f}s",
            o.message if o.status != "running" else (o.run_dir or ""),
        )
    return table


def summary_tables(outcomes: Sequence[Outcome]) -> list[Any]:
    """Per-configuration counts, then every run that did not pass with how to reproduce it."""
    from rich.table import Table

    per: dict[tuple[str, str], dict[str, Any]] = {}
    for o in outcomes:
        row = per.setdefault((o.planned.config, o.planned.expect), {s: 0 for s in STATUSES} | {"seconds": 0.0})
        row[o.status] = row.get(o.status, 0) + 1
        row["seconds"] += o.seconds
    table = Table(title="Suite summary")
    for col in ("configuration", "expect", "runs", *STATUSES, "wall s"):
        table.add_column(col, overflow="fold")
    for (config, expect), row in per.items():
        cells = [f"[{_STYLE[s]}]{row[s]}[/]" if row[s] else "0" for s in STATUSES]
        table.add_row(config, expect, str(sum(row[s] for s in STATUSES)), *cells, f"{row['seconds']:.1f}")
    out = [table]
    bad = [o for o in outcomes if o.status in ("failed", "unknown", "crashed")]
    if bad:
        t2 = Table(title="Runs that did not pass")
        for col in ("configuration", "seed", "status", "why", "run", "reproduce"):
            t2.add_column(col, overflow="fold")
        for o in bad:
            t2.add_row(
                o.planned.config,
                str(o.planned.seed),
                f"[{_STYLE[o.status]}]{o.status}[/]",
                o.message,
                o.run_dir or "-",
                o.reproduce,
            )
        out.append(t2)
    return out


# -- JUnit -----------------------------------------------------------------------------------------


def junit_xml(suite: Suite, outcomes: Sequence[Outcome], started: dt.datetime, seconds: float) -> ET.ElementTree:
    """JUnit XML in the common (Ant/Jenkins/GitLab) shape: one testcase per run.

    classname = configuration, name = `seed=N`; failed or unknown runs carry <failure> with the
    anomaly types and the reproduce command, crashed runs <error>, skipped runs <skipped>.
    """
    counts = _counts(outcomes)
    tests = len(outcomes)
    failures = counts["failed"] + counts["unknown"]
    errors = counts["crashed"]
    skipped = counts["skipped"]
    stamp = started.strftime("%Y-%m-%dT%H:%M:%S")
    root = ET.Element(
        "testsuites",
        name=f"kraftwerk suite {suite.name}",
        tests=str(tests),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{seconds:.3f}",
        timestamp=stamp,
    )
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite.name,
        tests=str(tests),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{seconds:.3f}",
        timestamp=stamp,
        hostname=socket.gethostname() or "localhost",
        id="0",
        package="kraftwerk",
    )
    props = ET.SubElement(ts, "properties")
    for key, value in (("suite-file", suite.path), ("description", suite.description), ("runs", str(tests))):
        ET.SubElement(props, "property", name=key, value=value)
    for o in outcomes:
        p = o.planned
        case = ET.SubElement(
            ts, "testcase", classname=p.config, name=f"seed={p.seed}", time=f"{o.seconds:.3f}", file=suite.path
        )
        detail = [f"configuration: {p.config}", f"seed: {p.seed}", f"expect: {p.expect}"]
        if o.anomalies:
            detail.append(f"anomaly types: {', '.join(o.anomalies)}")
        if o.run_dir:
            detail.append(f"run directory: {o.run_dir}")
            detail.append(f"results: {Path(o.run_dir) / 'results.json'}")
        detail.append(f"reproduce: {o.reproduce}")
        text = "\n".join(detail)
        if o.status == "failed":
            kind = "missed-bug" if o.verdict is True else "invalid"
            el = ET.SubElement(case, "failure", message=o.message, type=kind)
            el.text = text
        elif o.status == "unknown":
            el = ET.SubElement(case, "failure", message=o.message, type="unknown")
            el.text = text
        elif o.status == "crashed":
            el = ET.SubElement(case, "error", message=o.message, type="crashed")
            el.text = text + ("\n\n" + o.output[-4000:] if o.output else "")
        elif o.status == "skipped":
            ET.SubElement(case, "skipped", message=o.message or "skipped")
        out = ET.SubElement(case, "system-out")
        out.text = text
    ET.indent(root)
    return ET.ElementTree(root)


# -- the command -----------------------------------------------------------------------------------
