"""Reading a run's JSON-lines files in Python as Spark's JSON reader reads them with an explicit schema.

The schemas are `schemas.HISTORY_JSON`, `EVENTS_JSON` and `LOG_JSON`: a string column keeps a JSON string's
text and the JSON text of any other value (Spark keeps the file's text; this writes it as json.dumps does,
which is how kraftwerk writes its files, so the two agree on them); a long column takes integers; a double
column takes numbers. A line that is not a JSON object, or whose field does not fit its column, is
malformed (every field null, its text, cut to 300 characters, in `malformed`). Blank lines are skipped,
as Spark skips them. A missing file has no lines (Spark's ignoreMissingFiles).

`read_arrow` is the columnar fast path (pyarrow's JSON reader): it reads a file only when every line is an
object whose fields fit their columns exactly (then the values are the same), and gives None otherwise.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.json as pj
from pyspark.sql import types as T

from checkers.pipeline.schemas import CORRUPT, EVENTS_JSON, HISTORY_JSON, LOG_JSON

MALFORMED_CHARS = 300
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class _Misfit(Exception):
    """A field whose JSON value does not fit its column."""


def _as_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)  # what json.dumps gives, faster
    return json.dumps(value)


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


def _converters(schema: T.StructType) -> list[tuple[str, Any, type]]:
    """(column, its converter, the Python type a value already has when it fits as it is)."""
    kinds = {T.StringType(): (_as_string, str), T.LongType(): (_as_long, int), T.DoubleType(): (_as_double, float)}
    return [(f.name, *kinds[f.dataType]) for f in schema.fields if f.name != CORRUPT]


HISTORY = _converters(HISTORY_JSON)
EVENTS = _converters(EVENTS_JSON)
LOG = _converters(LOG_JSON)


_scan_object = json.JSONDecoder().scan_once  # json.loads' own scanner, without its per-call wrappers


def _loads(line: str) -> Any:
    """json.loads(line), faster for a line that is one object with nothing around it."""
    if line[:1] == "{" and line[-1:] == "}":
        try:
            obj, end = _scan_object(line, 0)
        except StopIteration:
            return json.loads(line)  # raises as json.loads does
        if end == len(line):
            return obj
    return json.loads(line)


def read_jsonl(
    path: str, columns: list[tuple[str, Any, type]], objects: list[dict[str, Any] | None] | None = None
) -> list[dict[str, Any]]:
    """The rows of one JSON-lines file: a dict per non-blank line with every column and `malformed` (None when
    the line was read). `objects`, if given, gets each row's line as decoded (None for a malformed line), so
    that a checker can take the values as the file has them without decoding them again."""
    rows: list[dict[str, Any]] = []
    names = [name for name, _, _ in columns]
    try:
        fh = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return rows
    with fh:
        for raw in fh:
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                obj = _loads(line)
                if not isinstance(obj, dict):
                    raise _Misfit
                row = {"malformed": None}
                for name, convert, fits in columns:
                    value = obj.get(name)
                    if value is None or (type(value) is fits and (fits is not int or _LONG_MIN <= value <= _LONG_MAX)):
                        row[name] = value  # fits as it is (a bool's type is not int)
                    else:
                        row[name] = convert(value)
            except (ValueError, _Misfit, RecursionError):
                row = dict.fromkeys(names)
                row["malformed"] = line[:MALFORMED_CHARS]
                obj = None
            rows.append(row)
            if objects is not None:
                objects.append(obj)
    return rows


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(T.StructType([f for f in schema.fields if f.name != CORRUPT]))


EVENTS_ARROW = _arrow_schema(EVENTS_JSON)
LOG_ARROW = _arrow_schema(LOG_JSON)


def read_arrow(path: str, schema: pa.Schema) -> pa.Table | None:
    """The file as an Arrow table with `schema` (other fields ignored), or None when a line is malformed or a
    value does not fit its column exactly (a string for a string column, an integer for a long column, a
    number for a double column): the caller then reads it with `read_jsonl`, which says which line."""
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        return pj.read_json(path, read_options=pj.ReadOptions(use_threads=False), parse_options=options)
    except (pa.ArrowInvalid, OSError):
        return None
