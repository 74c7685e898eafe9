"""Everything a report needs, read from the files of one run directory (and nothing else)."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.history import History, from_dicts, read_jsonl
from harness.store.report.faults import Interval, fault_intervals


@dataclass
class Run:
    """One stored run: its options, its results, its history and the faults it saw."""

    dir: Path
    test: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] | None = None
    history: History | None = None
    intervals: list[Interval] = field(default_factory=list)
    stray_stops: int = 0
    end: float = 0.0  # seconds: the time of the last op
    problems: list[str] = field(default_factory=list)

    @property
    def workload(self) -> str:
        """The workload's name (from test.json, else "?")."""
        return str(self.test.get("workload") or "?")

    @property
    def part(self) -> str:
        """How its history is judged: "queue" (per partition, the queue checkers) or "linearizable" (per key),
        as its test says (checkers.registry), else guessed from the results or the ops."""
        checking = (self.results or {}).get("checking")
        if isinstance(checking, dict) and checking.get("model"):
            from checkers.registry import Checking

            try:
                return Checking(str(checking["model"])).part
            except ValueError:
                pass
        if self.test:
            from harness.core.spec import SpecError, TestSpec

            try:
                return TestSpec.from_json(self.test).checking().part
            except SpecError:
                pass
        if self.results and "queue" in self.results:
            return "queue"
        fs = {op.f for op in self.history} if self.history else set()
        return "queue" if fs & {"send", "poll", "txn"} else "linearizable"

    def op_counts(self) -> dict[str, dict[str, int]]:
        """{f: {count, ok, fail, info}} over client operations (results.json's stats when present)."""
        by_f = ((self.results or {}).get("stats") or {}).get("by-f")
        if isinstance(by_f, dict) and by_f:
            return by_f
        counts: dict[str, Counter[str]] = {}
        for op in self.history.operations() if self.history else []:
            c = counts.setdefault(op.f, Counter())
            c["count"] += 1
            c[op.type] += 1
        return {
            f: {"count": c["count"], "ok": c["ok"], "fail": c["fail"], "info": c["info"]} for f, c in counts.items()
        }


def _json(path: Path, problems: list[str]) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        problems.append(f"{path.name} is missing")
    except (OSError, ValueError) as e:
        problems.append(f"{path.name} is unreadable: {e}")
    return None


def _lenient_history(path: Path, problems: list[str]) -> History | None:
    """A history with undecodable lines (a run killed mid-line) and unpaired completions dropped."""
    objs = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for text in fh:
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            if isinstance(obj, dict):
                objs.append(obj)
    try:
        return from_dicts(objs, os.fspath(path))
    except InputError as e:
        problems.append(f"history.jsonl could not be read even leniently: {e}")
        return None


def load_run(run_dir: str | os.PathLike[str]) -> Run:
    """Read a run directory. Missing or broken files become `problems`, never exceptions."""
    run = Run(Path(run_dir))
    test = _json(run.dir / "test.json", run.problems)
    run.test = test if isinstance(test, dict) else {}
    results = _json(run.dir / "results.json", run.problems)
    run.results = results if isinstance(results, dict) else None
    path = run.dir / "history.jsonl"
    if not path.exists():
        run.problems.append("history.jsonl is missing")
    else:
        try:
            run.history = read_jsonl(path)
        except InputError as e:
            run.problems.append(f"history.jsonl: {e}")
            run.history = _lenient_history(path, run.problems)
    if run.history is not None:
        times = [op.time for op in run.history if op.time is not None]
        run.end = max(times, default=0) / 1e9
        run.intervals, run.stray_stops = fault_intervals(run.history, run.end)
    return run
