"""The run store: `store/<test-name>/<YYYYMMDDTHHMMSS.mmm>/` with `latest` links (docs/design.md "Store").

`RunDir` writes a run's files, for the simulator and real clusters alike (`harness.core.run.run_test`
hands it the run): history.jsonl (streamed as the run goes), events.jsonl, logs/<node>.jsonl,
logs/partitions/<partition>/<node>.jsonl, nodes/<node>/events.jsonl (unless the DB copied the node's own
file there), schedule.json, run.json, results.json and, for an invalid linearizability verdict,
timeline.html. test.json is the command's (it is written before the run starts).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from checkers.history import History


def _link(link: Path, target: Path) -> None:
    """Point `link` at `target` (relative), replacing an older link atomically."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.{threading.get_ident()}")  # two runs may start at once
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(target, link.parent))
    os.replace(tmp, link)


def new_run(store: str | os.PathLike[str], test_name: str, now: dt.datetime | None = None) -> Path:
    """Create a fresh run directory and point `store/latest` and `store/<test>/latest` at it."""
    if not test_name or "/" in test_name or test_name.startswith("."):
        raise ValueError(f"bad test name {test_name!r}")
    now = now or dt.datetime.now()
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}"
    base = Path(store) / test_name
    base.mkdir(parents=True, exist_ok=True)
    run = base / stamp
    n = 1
    while True:  # two runs in one millisecond (other processes and hosts may be making runs too)
        try:
            run.mkdir()
            break
        except FileExistsError:
            run = base / f"{stamp}-{n}"
            n += 1
    (run / "logs").mkdir()
    (run / "nodes").mkdir()
    _link(base / "latest", run)
    _link(Path(store) / "latest", run)
    return run


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, default=_default)
        fh.write("\n")


def write_jsonl(path: str | os.PathLike[str], rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, default=_default))
            fh.write("\n")


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


class Run(Protocol):
    """What the store writes of a run (`harness.core.run.Run` is one)."""

    schedule: dict[str, Any]  # schedule.json
    results: dict[str, Any]  # results.json, once judged

    @property
    def history(self) -> History: ...

    @property
    def names(self) -> Sequence[str]:
        """The nodes, n1 … nN."""
        ...

    @property
    def events(self) -> list[dict[str, Any]]: ...

    @property
    def logs(self) -> dict[str, list[dict[str, Any]]]: ...

    @property
    def partition_logs(self) -> dict[str, dict[str, list[dict[str, Any]]]]: ...

    def run_json(self) -> dict[str, Any]: ...


class RunDir:
    """The files of one run in `path`; `info` goes into results.json's "run" (the run directory, the
    command that runs the test again)."""

    def __init__(self, path: str | os.PathLike[str], info: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.info = dict(info or {})

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"

    def write(self, run: Run) -> None:
        """Every file of a run that was not streamed here as it ran (the history too)."""
        if not self.history.exists():
            from checkers.history import write_jsonl as write_history

            write_history(run.history, self.history)
        self.write_run(run)
        self.write_results(run)

    def write_run(self, run: Run) -> None:
        """What the run produced, but its verdict."""
        d = self.path
        (d / "logs").mkdir(parents=True, exist_ok=True)
        write_jsonl(d / "events.jsonl", run.events)
        for node, entries in run.logs.items():
            write_jsonl(d / "logs" / f"{node}.jsonl", entries)
        for tp, dumps in run.partition_logs.items():
            (d / "logs" / "partitions" / tp).mkdir(parents=True, exist_ok=True)
            for node, entries in dumps.items():
                write_jsonl(d / "logs" / "partitions" / tp / f"{node}.jsonl", entries)
        for node in run.names:
            own = d / "nodes" / node / "events.jsonl"
            if not own.exists():  # a real DB copies the node's own file
                own.parent.mkdir(parents=True, exist_ok=True)
                write_jsonl(own, [e for e in run.events if e.get("node") == node])
        write_json(d / "schedule.json", run.schedule)
        write_json(d / "run.json", run.run_json())

    def write_results(self, run: Run) -> None:
        """results.json (with `info` in its "run"), and the failing key's timeline.html."""
        results = run.results
        results.setdefault("run", {}).update(self.info)
        lin = results.get("linearizable", {})
        if lin.get("valid") is False:
            from checkers.linearizable.timeline import write_timeline

            lin["html"] = write_timeline(run.history, lin, str(self.path / "timeline.html"))
        write_json(self.path / "results.json", results)


def test_document(spec: Any, **extra: Any) -> dict[str, Any]:
    """What test.json records: the test (`TestSpec.to_json`: every option and the seed), the command line and
    the start time, and what a command adds (`extra`: a replay's source, an explore's attempts, …)."""
    return {**spec.to_json(), "argv": sys.argv, "start-time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}
