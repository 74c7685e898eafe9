"""Reading and writing histories in every supported format.

- `jsonl`: our own `history.jsonl` (docs/formats.md "History");
- `edn`: Jepsen/Knossos EDN — one vector (or list) of op maps, or one map per line;
- `jepsen-log`: Jepsen text logs, `INFO  jepsen.util - 3\t:invoke\t:read\tnil`.

`load()` detects the format from the name and first bytes. `to_edn()` exports a
history as EDN so Knossos or Elle can cross-check our verdicts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from checkers import edn
from checkers.errors import InputError
from checkers.history import NEMESIS, TYPES, History, Op, parse_jsonl

FORMATS = ("auto", "jsonl", "edn", "jepsen-log")


def _plain(value: Any) -> Any:
    """EDN values as plain JSON-ish Python: keywords to strings, sets/tuples to lists."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return {str.__str__(k) if isinstance(k, str) else str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    return str(value)


_KNOWN = frozenset(("type", "process", "f", "value", "time", "key", "index", "error", "node"))


_SCALARS = (type(None), bool, int, float)


def _op_from_edn(obj: Any, source: str, line: int, position: int) -> Op:
    if type(obj) is dict and obj.keys() <= _KNOWN:  # the common shape, read by edn.read_flat_lines
        typ, process, f, time = obj.get("type"), obj.get("process"), obj.get("f"), obj.get("time")
        value, key, node, error = obj.get("value"), obj.get("key"), obj.get("node"), obj.get("error")
        if (
            type(typ) is str
            and typ in TYPES
            and type(process) is int
            and type(f) is str
            and (time is None or type(time) is int)
            and (type(value) is str or type(value) in _SCALARS)
            and (key is None or type(key) is str or type(key) is int)
            and node is None
            and error is None
        ):
            return Op(position, typ, process, f, value, time, key, None, None, line, None)
    return _op_from_edn_any(obj, source, line, position)


def _op_from_edn_any(obj: Any, source: str, line: int, position: int) -> Op:
    if not isinstance(obj, dict):
        raise InputError(f"expected an op map, got {type(obj).__name__}", source, line)
    typ = obj.get("type")
    if typ is None:
        raise InputError("op map without :type", source, line)
    if not isinstance(typ, str):
        raise InputError(f":type must be a keyword, got {typ!r}", source, line)
    typ = str.__str__(typ)
    if typ not in TYPES:
        raise InputError(f"unknown :type {typ!r}", source, line)
    process = obj.get("process")
    if isinstance(process, str):
        if process != NEMESIS:
            raise InputError(f"process must be an integer or :nemesis, got {process!r}", source, line)
        process = NEMESIS
    elif isinstance(process, bool) or not isinstance(process, int):
        raise InputError(f"process must be an integer or :nemesis, got {process!r}", source, line)
    f = obj.get("f")
    if f is None:
        raise InputError("op map without :f", source, line)
    time = obj.get("time")
    if time is not None and (isinstance(time, bool) or not isinstance(time, int)):
        raise InputError(f":time must be an integer, got {time!r}", source, line)
    key = obj.get("key")
    if key is not None:
        key = _plain(key)
        if isinstance(key, list):
            key = tuple(key)
    extra = {str.__str__(k): _plain(v) for k, v in obj.items() if k not in _KNOWN} or None
    node = obj.get("node")
    return Op(
        index=position,
        type=typ,
        process=process,
        f=str.__str__(f) if isinstance(f, str) else str(f),
        value=_plain(obj.get("value")),
        time=time,
        key=key,
        node=str(_plain(node)) if node is not None else None,
        error=_plain(obj.get("error")),
        line=line,
        extra=extra,
    )


def parse_edn(text: str, source: str = "<edn>") -> History:
    """Jepsen EDN history: a vector/list of op maps, or one op map per line."""
    elements = edn.read_flat_lines(text)  # Porcupine's kv files: one flat map per line, read directly
    if elements is None:
        elements = list(edn.read_elements(text, source))
    ops = [_op_from_edn(obj, source, line, i) for i, (obj, line) in enumerate(elements)]
    history = History(ops, source)
    history.operations()
    return history


_LOG_LINE = re.compile(r"\s*(\S+)\s+(:\S+)\s+(:\S+)(?:\s+(.*?))?\s*$")
_LOG_PREFIX = "jepsen.util - "
_INT = re.compile(r"[+-]?\d+")
_INT_PAIR = re.compile(r"\[\s*([+-]?\d+)[\s,]+([+-]?\d+)\s*\]")
_KEYWORD = re.compile(r":[A-Za-z_\-?!*+<>=][\w\-?!*.+<>=]*")


def _log_value(text: str, source: str) -> Any:
    """A Jepsen log value: the common shapes (nil, an integer, [a b], :keyword) directly, anything else as EDN."""
    if text == "nil":
        return None
    if _INT.fullmatch(text):
        return int(text)
    m = _INT_PAIR.fullmatch(text)
    if m is not None:
        return [int(m.group(1)), int(m.group(2))]
    if _KEYWORD.fullmatch(text):
        return text[1:]
    return _plain(edn.loads(text, source))


def parse_jepsen_log(lines: Iterable[str], source: str = "<log>") -> History:
    """Jepsen text log lines `INFO  jepsen.util - <process> <:type> <:f> <value>` (tabs or spaces).

    Lines that are not jepsen.util op lines (setup chatter, stack traces) are skipped.
    """
    ops: list[Op] = []
    for lineno, text in enumerate(lines, 1):
        at = text.find(_LOG_PREFIX)
        if at < 0:
            continue
        m = _LOG_LINE.match(text, at + len(_LOG_PREFIX))
        if m is None:
            continue  # jepsen.util also logs free-form messages
        proc_s, typ, f, value_s = m.groups()
        typ = typ[1:]
        if typ not in TYPES:
            continue
        if proc_s == ":nemesis":
            process: int | str = NEMESIS
        else:
            try:
                process = int(proc_s)
            except ValueError:
                raise InputError(f"process must be an integer or :nemesis, got {proc_s!r}", source, lineno) from None
        value: Any = None
        error: Any = None
        if value_s:
            try:
                value = _log_value(value_s, source)
            except InputError:
                value = value_s  # free text (e.g. an exception message)
        if isinstance(value, str) and value_s and value_s.startswith(":") and process != NEMESIS:
            # `:timed-out` and friends are error markers, not values
            error, value = value, None
        ops.append(Op(index=len(ops), type=typ, process=process, f=f[1:], value=value, error=error, line=lineno))
    history = History(ops, source)
    history.operations()
    return history


def detect(path: str, head: str) -> str:
    """Guess the format from the file name and its first non-blank characters."""
    name = path.lower()
    if name.endswith(".jsonl") or name.endswith(".json"):
        return "jsonl"
    if name.endswith(".edn"):
        return "edn"
    stripped = head.lstrip()
    if not stripped:
        return "empty"
    if "jepsen.util - " in head:
        return "jepsen-log"
    if stripped[0] in "[({;#" or stripped.startswith("{:"):
        return "edn"
    if stripped[0] == "{":
        return "jsonl"
    raise InputError("cannot tell the history format (use --format jsonl|edn|jepsen-log)", path, 1)


def load(path: str | os.PathLike[str], fmt: str = "auto") -> History:
    """Read any supported history file. Raises InputError naming the file and line on bad input."""
    source = os.fspath(path)
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise InputError("no such file", source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a history file", source) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: {e.reason}", source) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", source) from None
    if fmt == "auto":
        fmt = detect(source, text[:4096])
    if fmt == "empty" or not text.strip():
        raise InputError("empty history (no operations)", source)
    if fmt == "jsonl":
        return parse_jsonl(text.splitlines(), source)
    if fmt == "edn":
        return parse_edn(text, source)
    return parse_jepsen_log(text.splitlines(), source)


def _edn_value(v: Any) -> Any:
    if isinstance(v, dict):
        return {edn.Keyword(k) if isinstance(k, str) else k: _edn_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_edn_value(x) for x in v]
    return v


def op_to_edn(op: Op) -> str:
    """One op as a Jepsen EDN map."""
    m: dict[Any, Any] = {edn.Keyword("index"): op.index}
    if op.time is not None:
        m[edn.Keyword("time")] = op.time
    m[edn.Keyword("type")] = edn.Keyword(op.type)
    m[edn.Keyword("process")] = edn.Keyword(NEMESIS) if op.process == NEMESIS else op.process
    m[edn.Keyword("f")] = edn.Keyword(op.f)
    if op.key is not None:
        m[edn.Keyword("key")] = list(op.key) if isinstance(op.key, tuple) else op.key
    m[edn.Keyword("value")] = _edn_value(op.value)
    if op.node is not None:
        m[edn.Keyword("node")] = op.node
    if op.error is not None:
        m[edn.Keyword("error")] = op.error
    if op.extra:
        for k, v in op.extra.items():
            m[edn.Keyword(k)] = _edn_value(v)
    return edn.dumps(m)


def to_edn(history: History | Iterable[Op]) -> str:
    """The whole history as one EDN vector, one op map per line (what Knossos and Elle read)."""
    ops = history.ops if isinstance(history, History) else list(history)
    return "[" + "\n ".join(op_to_edn(op) for op in ops) + "]\n"
