"""The operation history: the `history.jsonl` model of docs/formats.md "History", validation and pairing.

A history is a list of `Op` records in completion order. `pair()` matches every
client invocation with its completion (ok, fail, info, or none by the end) and
enforces Jepsen's rules: one open operation per process, no completion without an
invocation, and no reuse of a process id after it crashed (`info`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from checkers.errors import InputError

TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"
_FIELDS = ("index", "time", "process", "type", "f", "key", "value", "node", "error")
_FIELD_SET = frozenset(_FIELDS)


def freeze(value: Any) -> Any:
    """Make a JSON-ish value hashable: lists become tuples, dicts become sorted item tuples."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze(v) for v in value)
    return value


class Op:
    """One line of a history: an invocation, a completion, or a nemesis event."""

    # A plain class, not a dataclass: `kraftwerk check` starts without generating code.
    __slots__ = ("index", "type", "process", "f", "value", "time", "key", "node", "error", "line", "extra")

    def __init__(
        self,
        index: int,
        type: str,  # noqa: A002 - the history's field name
        process: int | str,
        f: str,
        value: Any = None,
        time: int | None = None,
        key: Any = None,
        node: str | None = None,
        error: Any = None,
        line: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.index = index
        self.type = type
        self.process = process
        self.f = f
        self.value = value
        self.time = time
        self.key = key
        self.node = node
        self.error = error
        self.line = line
        self.extra = extra

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in Op.__slots__)

    def __eq__(self, other: object) -> bool:
        return other.__class__ is Op and self._fields() == other._fields()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment] - mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return "Op(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in Op.__slots__) + ")"

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS

    def to_dict(self) -> dict[str, Any]:
        """The JSONL object of docs/formats.md "History", fields in their canonical order."""
        out: dict[str, Any] = {"index": self.index}
        if self.time is not None:
            out["time"] = self.time
        out["process"] = self.process
        out["type"] = self.type
        out["f"] = self.f
        if self.key is not None:
            out["key"] = self.key
        out["value"] = self.value
        if self.node is not None:
            out["node"] = self.node
        if self.error is not None:
            out["error"] = self.error
        if self.extra:
            out.update(self.extra)
        return out


class Operation:
    """An invocation paired with its completion. `complete is None` means it never completed."""

    __slots__ = ("invoke", "complete", "call", "ret")

    def __init__(self, invoke: Op, complete: Op | None, call: int, ret: int | None) -> None:
        self.invoke = invoke
        self.complete = complete
        self.call = call  # position of the invocation in the history
        self.ret = ret  # position of the completion; None when it never completed

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Operation:
            return NotImplemented
        o: Operation = other  # type: ignore[assignment]
        return (self.invoke, self.complete, self.call, self.ret) == (o.invoke, o.complete, o.call, o.ret)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Operation(invoke={self.invoke!r}, complete={self.complete!r}, call={self.call!r}, ret={self.ret!r})"

    @property
    def process(self) -> int | str:
        return self.invoke.process

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def key(self) -> Any:
        return self.invoke.key

    @property
    def type(self) -> str:
        """ok, fail or info (an operation that never completed counts as info)."""
        return self.complete.type if self.complete is not None else "info"

    @property
    def value(self) -> Any:
        """The completion's value when it has one (reads), else the invocation's."""
        c = self.complete
        if c is not None and c.type == "ok" and c.value is not None:
            return c.value
        return self.invoke.value

    @property
    def line(self) -> int:
        return self.invoke.line

    def describe(self) -> str:
        v = json.dumps(self.value, default=str)
        key = f" {self.key}" if self.key is not None else ""
        return f"p{self.process} {self.f}{key} {v} -> {self.type} (index {self.invoke.index})"


class History:
    """A whole history plus where it came from."""

    def __init__(self, ops: list[Op], source: str = "<history>", _paired: list[Operation] | None = None) -> None:
        self.ops = ops
        self.source = source
        self._paired = _paired

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, History):
            return NotImplemented
        return (self.ops, self.source, self._paired) == (other.ops, other.source, other._paired)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History(ops={self.ops!r}, source={self.source!r})"

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def operations(self) -> list[Operation]:
        """Client operations, paired and validated (cached)."""
        if self._paired is None:
            self._paired = pair(self.ops, self.source)
        return self._paired

    def nemesis(self) -> list[Op]:
        return [op for op in self.ops if not op.is_client]


def pair(ops: list[Op], source: str = "<history>") -> list[Operation]:
    """Match invocations to completions, in invocation order; raise InputError on a broken history."""
    open_ops: dict[Any, tuple[int, Operation]] = {}
    crashed: dict[Any, int] = {}
    out: list[Operation] = []
    for pos, op in enumerate(ops):
        if not op.is_client:
            continue
        p = op.process
        if op.type == "invoke":
            if p in open_ops:
                prev = open_ops[p][1].invoke
                raise InputError(
                    f"process {p} invokes {op.f!r} while its {prev.f!r} (line {prev.line}) is still open; "
                    "a process runs one operation at a time",
                    source,
                    op.line,
                )
            if p in crashed:
                raise InputError(
                    f"process {p} invokes {op.f!r} after it crashed (info at line {crashed[p]}); "
                    "a crashed client must reopen under a new process id",
                    source,
                    op.line,
                )
            operation = Operation(op, None, pos, None)
            open_ops[p] = (len(out), operation)
            out.append(operation)
        else:
            entry = open_ops.pop(p, None)
            if entry is None:
                if op.type == "info" and p in crashed:
                    continue  # a second crash report for an already-crashed process
                raise InputError(
                    f"{op.type} completion of {op.f!r} for process {p} without a matching invoke",
                    source,
                    op.line,
                )
            operation = entry[1]
            if operation.invoke.f != op.f:
                raise InputError(
                    f"process {p} completes {op.f!r} but invoked {operation.invoke.f!r} (line {operation.invoke.line})",
                    source,
                    op.line,
                )
            if op.key is not None and operation.invoke.key is not None and op.key != operation.invoke.key:
                raise InputError(
                    f"process {p} completes key {op.key!r} but invoked key {operation.invoke.key!r}",
                    source,
                    op.line,
                )
            operation.complete = op
            operation.ret = pos
            if op.type == "info":
                crashed[p] = op.line
    return out


def _check_fields(obj: Any, source: str, line: int) -> Op:
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", source, line)
    try:
        typ = obj["type"]
        process = obj["process"]
        f = obj["f"]
    except KeyError as e:
        raise InputError(f"missing field {e.args[0]!r}", source, line) from None
    if typ not in TYPES:
        raise InputError(f"unknown type {typ!r} (expected one of {', '.join(TYPES)})", source, line)
    if isinstance(process, bool) or not (isinstance(process, int) or process == NEMESIS):
        raise InputError(f'process must be an integer or "nemesis", got {process!r}', source, line)
    if not isinstance(f, str) or not f:
        raise InputError(f"f must be a non-empty string, got {f!r}", source, line)
    time = obj.get("time")
    if time is not None and (isinstance(time, bool) or not isinstance(time, int) or time < 0):
        raise InputError(f"time must be a non-negative integer (nanoseconds), got {time!r}", source, line)
    index = obj.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise InputError(f"index must be an integer, got {index!r}", source, line)
    key = obj.get("key")
    if isinstance(key, (list, dict)):
        key = freeze(key)
    node = obj.get("node")
    if node is not None and not isinstance(node, str):
        raise InputError(f"node must be a string, got {node!r}", source, line)
    extra = None if obj.keys() <= _FIELD_SET else {k: v for k, v in obj.items() if k not in _FIELDS} or None
    return Op(
        index=index if index is not None else -1,
        type=typ,
        process=process,
        f=f,
        value=obj.get("value"),
        time=time,
        key=key,
        node=node,
        error=obj.get("error"),
        line=line,
        extra=extra,
    )


def parse_jsonl(lines: Iterable[str], source: str = "<history>") -> History:
    """Parse `history.jsonl` text lines (blank lines are skipped) into a validated History."""
    ops: list[Op] = []
    loads = json.loads
    for lineno, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            obj = loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"not valid JSON: {e.msg} (column {e.colno})", source, lineno) from None
        op = _check_fields(obj, source, lineno)
        if op.index == -1:
            op.index = len(ops)
        elif op.index != len(ops):
            raise InputError(
                f"index {op.index} out of sequence (expected {len(ops)}; indices are dense from 0)",
                source,
                lineno,
            )
        ops.append(op)
    history = History(ops, source)
    history.operations()
    return history


def read_jsonl(path: str | os.PathLike[str]) -> History:
    """Read and validate a history.jsonl file."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            return parse_jsonl(fh, source)
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: {e.reason}", source) from None


def op_from_dict(obj: Any, source: str = "<history>", line: int = 0) -> Op:
    """One validated op from a decoded history line, keeping the line's own `index` (-1 without one);
    InputError naming `line` of `source` if a field is missing or of the wrong kind."""
    return _check_fields(obj, source, line)


def from_dicts(objs: Iterable[dict[str, Any]], source: str = "<history>") -> History:
    """Build a validated History from already-decoded op dictionaries (line = position + 1)."""
    ops = []
    for i, obj in enumerate(objs):
        op = _check_fields(obj, source, i + 1)
        op.index = i
        ops.append(op)
    history = History(ops, source)
    history.operations()
    return history


def dumps_op(op: Op) -> str:
    return json.dumps(op.to_dict(), separators=(", ", ": "), default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def write_jsonl(history: History | Iterable[Op], path: str | os.PathLike[str]) -> None:
    """Write a history as JSONL, one op per line."""
    ops = history.ops if isinstance(history, History) else history
    with open(path, "w", encoding="utf-8") as fh:
        for op in ops:
            fh.write(dumps_op(op))
            fh.write("\n")


class HistoryWriter:
    """Append ops to a history.jsonl as they happen, flushing each line (a killed run stays readable)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the writer
        self.count = 0

    def append(self, op: Op) -> None:
        op.index = self.count
        self._fh.write(dumps_op(op) + "\n")
        self._fh.flush()
        self.count += 1

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
