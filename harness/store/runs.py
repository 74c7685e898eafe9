"""The run store: `store/<test-name>/<YYYYMMDDTHHMMSS.mmm>/` with `latest` links (docs/design.md "Store")."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any


def _link(link: Path, target: Path) -> None:
    """Point `link` at `target` (relative), replacing an older link atomically."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
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
