"""Records a run's history as it happens: in memory for the checkers, and appended (flushed)
to `history.jsonl` so a run killed half way still leaves a readable history."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from checkers.history import History, Op

_ENCODER = json.JSONEncoder(separators=(", ", ": "))  # json.dumps with options builds a new encoder per call
# JSONEncoder.encode builds its C encoder on every call: build it once (the same bytes)
_C_ENCODE = (
    c_make_encoder(None, _ENCODER.default, encode_basestring_ascii, None, ": ", ", ", False, False, True)
    if c_make_encoder is not None
    else None
)


def _encode(obj: Any) -> str:
    if _C_ENCODE is None:  # a Python without the C accelerator
        return _ENCODER.encode(obj)
    return "".join(_C_ENCODE(obj, 0))


class Recorder:
    def __init__(self, clock: Callable[[], int], path: str | os.PathLike[str] | None = None) -> None:
        self.clock = clock
        self.ops: list[Op] = []
        self._digest = hashlib.sha256()
        self._fh = open(path, "w", encoding="utf-8") if path is not None else None  # noqa: SIM115

    def record(
        self,
        process: int | str,
        type: str,
        f: str,
        value: Any = None,
        key: Any = None,
        node: str | None = None,
        error: Any = None,
        extra: dict[str, Any] | None = None,
    ) -> Op:
        op = Op(
            index=len(self.ops),
            type=type,
            process=process,
            f=f,
            value=value,
            time=self.clock(),
            key=key,
            node=node,
            error=error,
            line=len(self.ops) + 1,
            extra=extra or None,
        )
        self.ops.append(op)
        line = _encode(op.to_dict()) + "\n"
        self._digest.update(line.encode())
        if self._fh is not None:
            self._fh.write(line)
            self._fh.flush()
        return op

    def digest(self) -> str:
        """SHA-256 of the history.jsonl bytes written so far."""
        return self._digest.hexdigest()

    def history(self, source: str = "history.jsonl") -> History:
        return History(list(self.ops), source)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
