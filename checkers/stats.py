"""Operation statistics: ok/fail/info counts, overall and per `f` (Jepsen's stats checker)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkers.history import History, Operation


def count(operations: Iterable[Operation]) -> dict[str, Any]:
    """Counts per f of these operations. `valid` is false when some f never succeeded (as Jepsen's stats
    checker), naming them under `never-ok`."""
    by_f: dict[str, dict[str, int]] = {}
    total = {"count": 0, "ok": 0, "fail": 0, "info": 0}
    for op in operations:
        row = by_f.setdefault(op.f, {"count": 0, "ok": 0, "fail": 0, "info": 0})
        t = op.type
        row["count"] += 1
        row[t] += 1
        total["count"] += 1
        total[t] += 1
    never_ok = sorted(f for f, row in by_f.items() if row["ok"] == 0)
    out: dict[str, Any] = {"valid": not never_ok, **total, "by-f": by_f}
    if never_ok:
        out["never-ok"] = never_ok
    return out


def stats(history: History) -> dict[str, Any]:
    """Counts per f over the whole history, and the number of nemesis events."""
    out = count(history.operations())
    nemesis = history.nemesis()
    if nemesis:
        out["nemesis-events"] = len(nemesis)
    return out
