"""Finding runs in a store and reading their small files (test.json, results.json) on the driver.

A run directory is any directory holding `test.json` or `history.jsonl` (symlinks such as
`latest` are not followed, so each run is seen once). Its id is its path relative to the store.
Problems become `errors` rows, never exceptions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.pipeline.checks import RunChecks, valid_text
from checkers.pipeline.config import config_label
from checkers.registry import Checking, stored_observations

_STAMP = re.compile(r"^(\d{4})(\d{2})(\d{2})T\d{6}")
_GLOB_CHARS = set("{}[]*?\\")
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass
class RunInfo:
    """One run directory as found on disk: the `runs` table row, its files, and any problems."""

    run_id: str
    run_dir: str
    date: str
    workload: str
    row: dict[str, Any] = field(default_factory=dict)
    history: str | None = None
    events: str | None = None
    logs: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (stage, message)
    checks: RunChecks | None = None  # how its test judges it (None: test.json could not say)

    @property
    def split_keys(self) -> bool:
        return self.checks is not None and self.checks.checking.split_keys


def parse_date(text: str) -> str:
    """`YYYY-MM-DD` (or `YYYYMMDD`) → `YYYY-MM-DD`; ValueError otherwise."""
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return dt.datetime.strptime(text, fmt).date().isoformat()
        except ValueError:
            continue
    raise ValueError(f"expected a date as YYYY-MM-DD, got {text!r}")


def _run_date(run_dir: Path, test: dict[str, Any] | None) -> str:
    m = _STAMP.match(run_dir.name)
    if m:
        return f"{m.group(1)}-{m.group(2)}-{m.group(3)}"
    start = (test or {}).get("start-time")
    if isinstance(start, str) and len(start) >= 10:
        try:
            return parse_date(start[:10])
        except ValueError:
            pass
    try:
        return dt.date.fromtimestamp(run_dir.stat().st_mtime).isoformat()
    except OSError:
        return "1970-01-01"


def _read_json(path: Path) -> Any:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES} bytes")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


Resolve = Callable[[dict[str, Any]], tuple[Checking, float, dict[str, Any]]]
"""test.json → (how its workload's history is judged, its checker budget in seconds, its configuration): the
harness's TestSpec, given to the pipeline by `kraftwerk analyze` (checkers do not import the harness)."""


def inspect_run(store: Path, run_dir: Path, resolve: Resolve) -> RunInfo:
    """Read one run directory's metadata; never raises for bad content."""
    run_id = run_dir.relative_to(store).as_posix()
    info = RunInfo(run_id=run_id, run_dir=str(run_dir), date="1970-01-01", workload="unknown")
    test: dict[str, Any] | None = None
    try:
        loaded = _read_json(run_dir / "test.json")
        if not isinstance(loaded, dict):
            raise ValueError("not a JSON object")
        test = loaded
    except FileNotFoundError:
        info.errors.append(("test.json", "test.json is missing"))
    except (OSError, ValueError) as e:
        info.errors.append(("test.json", f"test.json is malformed: {e}"))
    info.date = _run_date(run_dir, test)
    workload = (test or {}).get("workload")
    config: dict[str, Any] | None = None
    if test is not None:
        if not isinstance(workload, str) or not workload:
            info.errors.append(("test.json", "test.json has no workload"))
        else:
            try:
                checking, budget, config = resolve(test)
                observed, main = stored_observations(run_dir)
            except (InputError, ValueError) as e:
                info.errors.append(("test.json", f"not a test this kraftwerk judges: {e}"))
            else:
                info.workload = workload
                info.checks = RunChecks(
                    checking,
                    budget,
                    str(run_dir.resolve()),
                    (int(main[0]), int(main[1])) if main else None,
                    dict(observed) if observed is not None else None,
                )
    results: dict[str, Any] | None = None
    results_path = run_dir / "results.json"
    if results_path.exists():
        try:
            loaded = _read_json(results_path)
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
            results = loaded
        except (OSError, ValueError) as e:
            info.errors.append(("results.json", f"results.json is malformed: {e}"))
    history = run_dir / "history.jsonl"
    if history.is_file():
        info.history = str(history.resolve())
    else:
        info.errors.append(("history.jsonl", "history.jsonl is missing"))
    events = run_dir / "events.jsonl"
    if events.is_file():
        info.events = str(events.resolve())
    logs_dir = run_dir / "logs"
    if logs_dir.is_dir():
        info.logs = sorted(str(p.resolve()) for p in logs_dir.glob("*.jsonl") if p.is_file())
    for path in [info.history, info.events, *info.logs]:
        if path and _GLOB_CHARS & set(path):
            info.errors.append(("path", f"path has characters Spark treats as a glob: {path}"))
            break
    t = test or {}
    r = results or {}
    nemesis = t.get("nemesis")
    info.row = {
        "run_id": run_id,
        "run_dir": str(run_dir.resolve()),
        "test_name": t.get("name") if isinstance(t.get("name"), str) else run_dir.parent.name,
        "config": config_label(config) if config is not None else config_label(t) if test is not None else None,
        "backend": t.get("backend") if isinstance(t.get("backend"), str) else None,
        "nemesis": ",".join(map(str, nemesis)) if isinstance(nemesis, list) else None,
        "nodes": _int(t.get("nodes")),
        "concurrency": _int(t.get("concurrency")),
        "time_limit": _float(t.get("time-limit")),
        "seed": _int(t.get("seed")),
        "bugs": [str(b) for b in t.get("bugs", [])] if isinstance(t.get("bugs"), list) else [],
        "start_time": t.get("start-time") if isinstance(t.get("start-time"), str) else None,
        "recorded_valid": valid_text(r["valid"]) if "valid" in r else None,
        "recorded_anomalies": [str(a) for a in r.get("anomaly-types", []) or []],
        "allow": [str(a) for a in t.get("allow", [])] if isinstance(t.get("allow"), list) else [],
        "reproduce": (r.get("run") or {}).get("reproduce") if isinstance(r.get("run"), dict) else None,
        "has_results": results is not None,
        "has_timeline": (run_dir / "timeline.html").is_file(),
        "options_json": json.dumps({k: v for k, v in t.items() if k != "argv"}, sort_keys=True, default=str),
        "status": "error" if info.errors else "ok",
        "date": info.date,
        "workload": info.workload,
    }
    return info


def discover(
    store: str | os.PathLike[str], resolve: Resolve, since: str | None = None, exclude: list[str] | None = None
) -> list[RunInfo]:
    """Every run directory under `store` (dated on or after `since`, if given), sorted by run id."""
    root = Path(store).resolve()
    skip = {str(Path(e).resolve()) for e in exclude or []}
    found: list[RunInfo] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if dirpath in skip:
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not Path(dirpath, d).is_symlink())
        if "test.json" in filenames or "history.jsonl" in filenames:
            dirnames[:] = []  # a run's own subdirectories (logs/, nodes/) are part of it
            info = inspect_run(root, Path(dirpath), resolve)
            if since is None or info.date >= since:
                found.append(info)
    return sorted(found, key=lambda i: i.run_id)
