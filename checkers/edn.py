"""A small, fast EDN reader and writer — enough for Jepsen and Knossos histories.

Reads nil, booleans, integers (incl. N/M suffixes), floats, strings, characters,
keywords, symbols, vectors, lists, maps, sets, `#_` discards and tagged literals
(the tag is dropped, the value kept). Keywords come back as `Keyword`, a `str`
subclass, so `Keyword("ok") == "ok"` while the writer still prints `:ok`.
Every top-level element remembers the line it started on, so errors name lines.
We keep our own reader rather than `edn_format` for speed and for line numbers.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from checkers.errors import InputError


class Keyword(str):
    """An EDN keyword (`:ok`). Equal to the plain string of its name."""

    __slots__ = ()

    def __repr__(self) -> str:
        return ":" + str.__str__(self)


class Symbol(str):
    """An EDN symbol (`foo`)."""

    __slots__ = ()


class Char(str):
    """An EDN character (`\\a`)."""

    __slots__ = ()


_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+|;[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<disc>\#_)
  | (?P<tag>\#[A-Za-z][\w.\-/]*)
  | (?P<char>\\(?:newline|space|tab|return|backspace|formfeed|u[0-9A-Fa-f]{4}|\S))
  | (?P<atom>[^\s,;"\[\](){}\\]+)
    """,
    re.VERBOSE | re.DOTALL,
)
_INT = re.compile(r"[+-]?\d+N?\Z")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?\Z")
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b", "formfeed": "\f"}
_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f", "/": "/"}
_ESC_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)", re.DOTALL)
_CLOSER = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_END = object()
_CLOSE = object()


def _unescape(m: re.Match[str]) -> str:
    s = m.group(1)
    if s[0] == "u":
        return chr(int(s[1:], 16))
    return _ESC.get(s, s)


class _Reader:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.tokens = _TOKEN.finditer(text)
        self._newlines: list[int] | None = None
        self.pos = 0

    def line_of(self, pos: int) -> int:
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect_right(self._newlines, pos - 1) + 1

    def error(self, msg: str, pos: int) -> InputError:
        return InputError(f"EDN: {msg}", self.source, self.line_of(pos))

    def next_token(self) -> tuple[str, str, int] | None:
        for m in self.tokens:
            kind = m.lastgroup
            if kind == "ws":
                continue
            self.pos = m.end()
            return kind, m.group(), m.start()  # type: ignore[return-value]
        if self.pos < len(self.text) and self.text[self.pos :].strip(" \t\r\n,"):
            raise self.error("unreadable input", self.pos)
        return None

    def read(self, tok: tuple[str, str, int] | None = None, closer: str | None = None) -> Any:
        """Read one form; returns _END at end of input, or the closing token string at a closer."""
        while True:
            if tok is None:
                tok = self.next_token()
            if tok is None:
                return _END
            kind, text, pos = tok
            if kind == "atom":
                return self.atom(text, pos)
            if kind == "str":
                body = text[1:-1]
                return _ESC_RE.sub(_unescape, body) if "\\" in body else body
            if kind == "open":
                return self.collection(text, pos)
            if kind == "close":
                if closer is None or text != closer:
                    raise self.error(f"unexpected {text!r}", pos)
                return _CLOSE
            if kind == "disc":
                if self.read(None, closer) is _CLOSE:
                    raise self.error("#_ with nothing to discard", pos)
                tok = None
                continue
            if kind == "tag":
                value = self.read()
                if value is _END:
                    raise self.error(f"tag {text} with no value", pos)
                return value
            if kind == "char":
                name = text[1:]
                if name in _CHARS:
                    return Char(_CHARS[name])
                if len(name) == 5 and name[0] == "u":
                    return Char(chr(int(name[1:], 16)))
                return Char(name)
            raise self.error(f"unexpected token {text!r}", pos)  # pragma: no cover

    def collection(self, opener: str, pos: int) -> Any:
        closer = _CLOSER[opener]
        items: list[Any] = []
        while True:
            tok = self.next_token()
            if tok is None:
                raise self.error(f"unclosed {opener!r}", pos)
            value = self.read(tok, closer)
            if value is _CLOSE:
                break
            if value is _END:
                raise self.error(f"unclosed {opener!r}", pos)
            items.append(value)
        if opener == "{":
            if len(items) % 2:
                raise self.error("map literal with an odd number of forms", pos)
            it = iter(items)
            return {_hashable(k): v for k, v in zip(it, it)}
        if opener == "#{":
            return frozenset(_hashable(v) for v in items)
        return items

    def atom(self, text: str, pos: int) -> Any:
        c = text[0]
        if c == ":":
            if len(text) == 1:
                raise self.error("empty keyword", pos)
            return Keyword(text[1:])
        if c.isdigit() or (c in "+-" and len(text) > 1 and text[1].isdigit()):
            if _INT.match(text):
                return int(text.rstrip("N"))
            if _FLOAT.match(text):
                return float(text.rstrip("M"))
            if "/" in text:
                num, _, den = text.partition("/")
                try:
                    return int(num) / int(den)
                except (ValueError, ZeroDivisionError):
                    pass
            raise self.error(f"bad number {text!r}", pos)
        if text == "nil":
            return None
        if text == "true":
            return True
        if text == "false":
            return False
        return Symbol(text)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _hashable(x)) for k, x in v.items())
    return v


def loads_all(text: str, source: str = "<edn>") -> Iterator[tuple[Any, int]]:
    """Yield (form, line) for each top-level form in the text."""
    r = _Reader(text, source)
    while True:
        tok = r.next_token()
        if tok is None:
            return
        line = r.line_of(tok[2])
        value = r.read(tok)
        if value is _END:
            return
        yield value, line


def loads(text: str, source: str = "<edn>") -> Any:
    """Read exactly one form."""
    forms = list(loads_all(text, source))
    if len(forms) != 1:
        raise InputError(f"EDN: expected one form, found {len(forms)}", source)
    return forms[0][0]


_SCALAR = r'(?:nil|true|false|[+-]?\d+|:[\w\-?!*.+/<>=]+|"(?:[^"\\\n]|\\.)*")'
_FLAT_PAIR = re.compile(r":([\w\-?!*.+/<>=]+)[ \t]+(" + _SCALAR + r")[ \t]*,?[ \t]*")
_FLAT_LINE = re.compile(r"[ \t]*\{[ \t]*(?::[\w\-?!*.+/<>=]+[ \t]+" + _SCALAR + r"[ \t]*,?[ \t]*)*\}[ \t]*\r?")


def _flat_value(text: str, plain: bool = False) -> Any:
    """One scalar of a flat map line; `plain` reads keywords as plain strings."""
    c = text[0]
    if c == '"':
        body = text[1:-1]
        return _ESC_RE.sub(_unescape, body) if "\\" in body else body
    if c == ":":
        return text[1:] if plain else Keyword(text[1:])
    if text == "nil":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    return int(text)


def _flat_plain(text: str) -> Any:
    return _flat_value(text, plain=True)


def _read_lines(text: str, plain: bool = False) -> list[tuple[Any, int]] | None:
    """Fast path for one flat op map per line (Porcupine's kv files); None when a line is not flat.

    With `plain`, keys and keyword values are plain strings (what a history needs), not Keywords.
    """
    fullmatch = _FLAT_LINE.fullmatch
    findall = _FLAT_PAIR.findall
    value = _flat_plain if plain else _flat_value
    key = str if plain else Keyword
    out = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if fullmatch(line):
            out.append(({key(k): value(v) for k, v in findall(line)}, lineno))
        elif line.strip(" \t\r,"):
            return None
    return out


def _read_uniform(text: str) -> list[tuple[dict[str, Any], int]] | None:
    """Fast path of the fast path: every line a flat map with the first line's keys in the same order (how a
    program writes one op per line), read by one regular expression over the whole text; None otherwise."""
    body = text.rstrip(" \t\r\n")
    if not body.startswith("{") or "\n\n" in body:
        return None
    end = body.find("\n")
    keys = [k for k, _ in _FLAT_PAIR.findall(body if end < 0 else body[:end])]
    if not keys:
        return None
    separator = r"[ \t]*,?[ \t]*"
    pairs = separator.join(":" + re.escape(k) + r"[ \t]+(" + _SCALAR + ")" for k in keys)
    rows = re.findall(r"^[ \t]*\{[ \t]*" + pairs + separator + r"\}[ \t]*\r?$", body, re.MULTILINE)
    if len(rows) != body.count("\n") + 1:
        return None
    if len(keys) == 1:
        rows = [(v,) for v in rows]
    memo: dict[str, Any] = {}
    columns = []
    for raw in zip(*rows):
        column = []
        for v in raw:
            try:
                column.append(memo[v])
            except KeyError:
                column.append(memo.setdefault(v, _flat_plain(v)))
        columns.append(column)
    return [(dict(zip(keys, values)), n) for n, values in enumerate(zip(*columns), 1)]


def read_flat_lines(text: str) -> list[tuple[dict[str, Any], int]] | None:
    """One flat op map per line, keywords read as plain strings; None when the text is not like that."""
    head = text.lstrip()
    if head.startswith("{") and "\n" in head and _FLAT_LINE.fullmatch(head[: head.index("\n")]):
        if text[:1] == "{":  # the fast path's line numbers count from the first line
            uniform = _read_uniform(text)
            if uniform is not None:
                return uniform
        return _read_lines(text, plain=True)
    return None


def read_elements(text: str, source: str = "<edn>") -> Iterator[tuple[Any, int]]:
    """Histories: a single top-level vector/list yields its elements; otherwise each top-level form.

    Each element comes with the line its first token is on.
    """
    head = text.lstrip()
    if head.startswith("{") and "\n" in head and _FLAT_LINE.fullmatch(head[: head.index("\n")]):
        fast = _read_lines(text)
        if fast is not None:
            yield from fast
            return
    r = _Reader(text, source)
    first = r.next_token()
    if first is None:
        return
    if first[0] == "open" and first[1] in ("[", "("):
        closer = _CLOSER[first[1]]
        while True:
            tok = r.next_token()
            if tok is None:
                raise r.error(f"unclosed {first[1]!r}", first[2])
            line = r.line_of(tok[2])
            value = r.read(tok, closer)
            if value is _CLOSE:
                break
            if value is _END:
                raise r.error(f"unclosed {first[1]!r}", first[2])
            yield value, line
        trailing = r.next_token()
        if trailing is not None:
            raise r.error("content after the history vector", trailing[2])
        return
    tok: tuple[str, str, int] | None = first
    while tok is not None:
        line = r.line_of(tok[2])
        value = r.read(tok)
        if value is _END:
            return
        yield value, line
        tok = r.next_token()


def dumps(value: Any) -> str:
    """Write a Python value as EDN. str → string, Keyword → keyword, None → nil, dict → map."""
    if value is None:
        return "nil"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Keyword):
        return ":" + str.__str__(value)
    if isinstance(value, Symbol):
        return str.__str__(value)
    if isinstance(value, Char):
        inv = {v: k for k, v in _CHARS.items()}
        return "\\" + inv.get(value, str.__str__(value))
    if isinstance(value, str):
        out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out = out.replace("\t", "\\t").replace("\r", "\\r")
        return f'"{out}"'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"EDN cannot represent {value!r}")
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{dumps(k)} {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (set, frozenset)):
        return "#{" + " ".join(dumps(v) for v in value) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as EDN")
