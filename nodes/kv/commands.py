"""Register commands and their log payload (compact JSON bytes).

``read`` (value None), ``write`` (value v), ``cas`` (value ``[expected, new]``) on a keyed
register whose initial value is null. Values are any JSON values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OPS = ("read", "write", "cas")


class CommandError(ValueError):
    """A command or payload is malformed."""


@dataclass(frozen=True, slots=True)
class Command:
    f: str
    key: str
    value: Any = None

    def __post_init__(self) -> None:
        if self.f not in OPS:
            raise CommandError(f"unknown op {self.f!r}; expected one of {OPS}")
        if not isinstance(self.key, str):
            raise CommandError(f"key must be a string, got {type(self.key).__name__}")
        if self.f == "cas" and (not isinstance(self.value, list | tuple) or len(self.value) != 2):
            raise CommandError(f"cas value must be [expected, new], got {self.value!r}")


def encode_command(command: Command) -> bytes:
    value = list(command.value) if command.f == "cas" else command.value
    try:
        text = json.dumps({"f": command.f, "k": command.key, "v": value}, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise CommandError(f"value is not JSON-serialisable: {exc}") from None
    return text.encode()


_DECODED: dict[bytes, Command] = {}
_DECODED_MAX = 8192


def decode_command(payload: bytes) -> Command:
    """Decode a log payload; every replica applies the same payloads, so recent ones are cached."""
    cached = _DECODED.get(payload)
    if cached is not None:
        return cached
    command = _decode(payload)
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    _DECODED[bytes(payload)] = command
    return command


def _decode(payload: bytes) -> Command:
    try:
        doc = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CommandError(f"payload is not a JSON command: {exc}") from None
    if not isinstance(doc, dict) or "f" not in doc or "k" not in doc:
        raise CommandError("payload must be an object with f and k")
    return Command(doc["f"], doc["k"], doc.get("v"))
