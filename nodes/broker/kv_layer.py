"""The register service inside a broker node: :class:`~nodes.kv.KVNode` reused as is, except that
metadata payloads (which share the raft log) are not register commands, and the raft replies to
the controller's own appends are handed back untranslated for the node to route."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..kv import ClientReply, KVNode
from ..kv.machine import Outcome
from ..raft import Record, Reply
from ..raft.effects import Effect
from .records import is_metadata_payload


@dataclass(frozen=True, slots=True)
class ControllerAppend:
    """``request_id`` of a metadata append made by the controller."""

    seq: int


class RegisterService(KVNode):
    def _apply(self, record: Record) -> Outcome | None:
        if not record.control and is_metadata_payload(record.payload):
            if record.offset == self.machine.applied:
                self.machine.applied = record.offset + 1
            return None
        return super()._apply(record)

    def _client_reply(self, reply: Reply, outcomes: dict[int, Outcome | None]) -> ClientReply | Reply:  # type: ignore[override]
        if isinstance(reply.request_id, ControllerAppend):
            return reply
        return KVNode._client_reply(reply, outcomes)

    def translate(self, effects: list[Effect]) -> list[Any]:
        """Raft effects -> register-service effects (``ClientReply`` for register commands)."""
        return self._translate(effects)
