"""Typed test options: frozen dataclasses whose fields say their command-line flag, test.json key and help.

A field declared with `option(...)` is one fact in one place. From it `add_arguments` makes the argparse
option of every command that takes test options, `to_json`/`from_json` its test.json entry and `to_argv`
the words of a command line that give the same value back. The test (`harness.core.spec.TestSpec`), each
workload (its options class) and each DB (its options class) declare their options this way.

    @dataclass(frozen=True)
    class QueueOptions:
        acks: str = option("all", "--acks", "producer acks", choices=("all", "1", "0"))
        unclean: bool = option(False, "--unclean", "unclean.leader.election.enable=true")
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["value", "switch", "repeat", "list"]


class OptionError(ValueError):
    """An option value that is not one: the message names the option (its flag or its test.json key)."""


@dataclass(frozen=True)
class Option:
    """How one field appears on the command line and in test.json.

    kind: "value" (`--flag VALUE`), "switch" (a bool, `--flag` sets it), "repeat" (`--flag A --flag B`, a
    tuple) or "list" (`--flag A,B`, a tuple parsed by `parse`). `parse` turns the command line's text into
    the value (raising ValueError with a reason); `decode`/`encode` turn test.json's value into the field's
    and back (default: the value itself, type-checked against the default's type). `always`: the reproduce
    command names it even at its default.
    """

    flag: str
    key: str
    help: str
    kind: Kind = "value"
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    group: str | None = None
    always: bool = False
    decode: Callable[[Any], Any] | None = None
    encode: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        """The argparse destination: the flag's name with underscores (unique across every options class)."""
        return self.flag.lstrip("-").replace("-", "_")


def option(
    default: Any,
    flag: str,
    help: str,  # noqa: A002 - argparse's word
    *,
    key: str | None = None,
    kind: Kind | None = None,
    parse: Callable[[str], Any] | None = None,
    choices: Sequence[str] | None = None,
    metavar: str | None = None,
    group: str | None = None,
    always: bool = False,
    decode: Callable[[Any], Any] | None = None,
    encode: Callable[[Any], Any] | None = None,
) -> Any:
    """A dataclass field that is a test option (see the module docstring). `key` defaults to the flag's name."""
    if kind is None:
        kind = "switch" if isinstance(default, bool) else "value"
    meta = Option(
        flag=flag,
        key=key or flag.lstrip("-"),
        help=help,
        kind=kind,
        parse=parse,
        choices=tuple(choices) if choices is not None else None,
        metavar=metavar,
        group=group,
        always=always,
        decode=decode,
        encode=encode,
    )
    return field(default=default, metadata={"option": meta})


def options_of(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Option]]:
    """The fields of a dataclass that are options, in declaration order, with their metadata."""
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("option")
        if isinstance(meta, Option):
            yield f, meta


def default_of(f: dataclasses.Field[Any]) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


# -- command line --------------------------------------------------------------------------------


def _help(meta: Option, default: Any, show: bool) -> str:
    if not show or meta.kind == "switch" or default in (None, (), "") or "(default" in meta.help:
        return meta.help
    return f"{meta.help} (default {_word(default)})"


def _word(value: Any) -> str:
    """A value as one command-line word: lists comma-separated, floats as short as they stay exact."""
    if isinstance(value, tuple):
        return ",".join(value) or "none"
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def _argparse_type(meta: Option, default: Any) -> Callable[[str], Any] | None:
    parse = meta.parse or (type(default) if isinstance(default, (int, float)) and default is not None else None)
    if parse is None:
        return None

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (TypeError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e) or f"not a valid value: {text!r}") from None

    convert.__name__ = getattr(parse, "__name__", "value")  # argparse names it in "invalid X value"
    return convert


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    defaults: bool = True,
    title: str | None = None,
    groups: dict[str, argparse._ArgumentGroup] | None = None,
    default_overrides: Mapping[str, Any] | None = None,
) -> None:
    """Add `cls`'s options to `parser` (in a group `title` if given; an option's own `group` wins).

    defaults=False leaves an option that is not given out of the parsed namespace (argparse.SUPPRESS), so
    that a command can tell what was given (replay and shrink: the given options replace the stored ones).
    `groups` collects the argument groups made, by title, so that several classes can share one.
    `default_overrides` gives some options (by field name) another default for this command.
    """
    groups = {} if groups is None else groups
    root = parser
    for f, meta in options_of(cls):
        where = meta.group or title
        target: Any = root
        if where is not None:
            if where not in groups:
                groups[where] = root.add_argument_group(where)  # type: ignore[union-attr]
            target = groups[where]
        default = (default_overrides or {}).get(f.name, default_of(f))
        kwargs: dict[str, Any] = {"dest": meta.dest, "help": _help(meta, default, defaults)}
        if not defaults:
            kwargs["default"] = argparse.SUPPRESS
        if meta.kind == "switch":
            kwargs["action"] = "store_true"
            if defaults:
                kwargs["default"] = default
        elif meta.kind == "repeat":
            kwargs["action"] = "append"
            kwargs["metavar"] = meta.metavar or "NAME"
            if defaults:
                kwargs["default"] = None  # None: not given (an empty list would be shared between parses)
        else:
            kwargs["type"] = _argparse_type(meta, default)
            kwargs["metavar"] = meta.metavar or ("LIST" if meta.kind == "list" else None)
            if meta.choices is not None and meta.kind == "value":
                kwargs["choices"] = meta.choices
            if defaults:
                kwargs["default"] = default
        target.add_argument(meta.flag, **{k: v for k, v in kwargs.items() if v is not None or k == "default"})


def given(cls: type, namespace: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The field values of `cls` that the parsed command line holds ({field name: value}); a repeatable
    option not given is left out, its values become a tuple."""
    values = vars(namespace) if isinstance(namespace, argparse.Namespace) else dict(namespace)
    out: dict[str, Any] = {}
    for f, meta in options_of(cls):
        if meta.dest not in values:
            continue
        value = values[meta.dest]
        if meta.kind == "repeat":
            if value is None:
                continue
            value = tuple(value)
        out[f.name] = value
    return out


def to_argv(value: Any, *, only: Callable[[str], bool] | None = None) -> list[str]:
    """Command-line words that give `value`'s options back: every option that differs from its default or is
    `always` shown (`only(field name)` may leave some out)."""
    words: list[str] = []
    for f, meta in options_of(type(value)):
        if only is not None and not only(f.name):
            continue
        v = getattr(value, f.name)
        if v == default_of(f) and not meta.always:
            continue
        if meta.kind == "switch":
            if v:
                words.append(meta.flag)
        elif meta.kind == "repeat":
            for item in v:
                words += _pair(meta.flag, str(item))
        elif v is not None:
            words += _pair(meta.flag, _word(v))
    return words


def _pair(flag: str, word: str) -> list[str]:
    """`--flag word`, or `--flag=word` for a word argparse would take for an option of its own."""
    return [f"{flag}={word}"] if word.startswith("-") else [flag, word]


# -- test.json -----------------------------------------------------------------------------------


def to_json(value: Any, *, only: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """`value`'s options as test.json entries ({key: value}); `only(field name)` may leave some out."""
    out: dict[str, Any] = {}
    for f, meta in options_of(type(value)):
        if only is not None and not only(f.name):
            continue
        v = getattr(value, f.name)
        if meta.encode is not None:
            v = meta.encode(v)
        elif isinstance(v, tuple):
            v = list(v)
        out[meta.key] = v
    return out


def _checked(value: Any, default: Any, key: str) -> Any:
    """A JSON value of the default's type (ints for floats too; lists of strings for tuples)."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, tuple):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value
    elif isinstance(default, str) or default is None:
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise OptionError(f"{key} {value!r} is not a valid value")
    return value


def from_json(cls: type, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The field values test.json entries give for `cls`'s options ({field name: value}); keys it does not
    hold (or that are null) are left out. OptionError names a key whose value is of the wrong type."""
    out: dict[str, Any] = {}
    for f, meta in options_of(cls):
        if meta.key not in doc or doc[meta.key] is None:
            continue
        raw = doc[meta.key]
        if meta.decode is not None:
            try:
                out[f.name] = meta.decode(raw)
            except (TypeError, ValueError):
                raise OptionError(f"{meta.key} {raw!r} is not a valid value") from None
        else:
            out[f.name] = _checked(raw, default_of(f), meta.key)
    return out


def keys_of(cls: type) -> tuple[str, ...]:
    """The test.json keys of `cls`'s options."""
    return tuple(meta.key for _, meta in options_of(cls))
