"""Reading a run's JSON-lines files in Python as Spark's JSON reader reads them with an explicit schema.

The schemas are `schemas.HISTORY_JSON`, `EVENTS_JSON` and `LOG_JSON`: a string column keeps a JSON string's
text and the compact JSON of any other value; a long column takes integers; a double column takes numbers. A
line that is not a JSON object, or whose field does not fit its column, is malformed (every field null, its
text, cut to 300 characters, in `malformed`). Blank lines are skipped, as Spark skips them.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import types as T

from checkers.pipeline.schemas import CORRUPT, EVENTS_JSON, HISTORY_JSON, LOG_JSON

MALFORMED_CHARS = 300
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class _Misfit(Exception):
    """A field whose JSON value does not fit its column."""


def _as_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _as_long(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and _LONG_MIN <= value <= _LONG_MAX:
        return value
    raise _Misfit


def _as_double(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _Misfit


def _converters(schema: T.StructType) -> list[tuple[str, Any]]:
    kinds = {T.StringType(): _as_string, T.LongType(): _as_long, T.DoubleType(): _as_double}
    return [(f.name, kinds[f.dataType]) for f in schema.fields if f.name != CORRUPT]


HISTORY = _converters(HISTORY_JSON)
EVENTS = _converters(EVENTS_JSON)
LOG = _converters(LOG_JSON)


def read_jsonl(path: str, columns: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one JSON-lines file: a dict per non-blank line with every column and `malformed` (None when
    the line was read)."""
    rows: list[dict[str, Any]] = []
    names = [name for name, _ in columns]
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        for raw in fh:
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise _Misfit
                row = {name: convert(obj.get(name)) for name, convert in columns}
                row["malformed"] = None
            except (ValueError, _Misfit, RecursionError):
                row = dict.fromkeys(names)
                row["malformed"] = line[:MALFORMED_CHARS]
            rows.append(row)
    return rows
