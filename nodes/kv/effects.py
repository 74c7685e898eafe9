"""The register layer's own effect: the answer to a client operation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(frozen=True, slots=True)
class ClientReply:
    """Completion of ``submit(…, request_id, …)`` in history terms.

    ``type``: ``"ok"`` (happened; ``value`` as in docs/formats.md "Register ops": the value read, the value written, or
    ``[expected, new]`` for cas), ``"fail"`` (definitely did not happen: ``error`` is
    ``"not-leader"`` with ``leader_id`` the leader this node knows, or ``"cas-mismatch"``), or
    ``"info"`` (unknown: ``"leadership-lost"`` after the command was appended).
    """

    request_id: Any
    type: str
    value: Any = None
    error: str | None = None
    leader_id: int | None = None
