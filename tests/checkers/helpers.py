"""Small builders for histories in tests."""

from __future__ import annotations

from typing import Any

from checkers.history import History, from_dicts


def h(*rows: tuple[Any, ...], key: Any = None) -> History:
    """Rows of (process, type, f, value[, key]) in history order → a validated History."""
    objs = []
    for i, row in enumerate(rows):
        process, typ, f, value = row[:4]
        obj: dict[str, Any] = {"index": i, "time": i * 10, "process": process, "type": typ, "f": f, "value": value}
        k = row[4] if len(row) > 4 else key
        if k is not None:
            obj["key"] = k
        objs.append(obj)
    return from_dicts(objs)
