"""Effect dispatch, written once: every effect a sans-IO core returns (raft, register, broker)
goes to one method of an :class:`EffectHandler`.

The runtime driver, the simulator's node and the tests implement the handler; none of them
tests effect types itself. A new effect type is one entry in :data:`METHODS` and one method in
the Protocol, and ``tests/nodes/test_effects.py`` fails until every handler has it.

    step = Dispatcher(handler)   # binds the handler's methods once
    if step(core.tick(now)):     # applies the effects in order
        ...                      # False: stopped at a Fatal (the handler's on_fatal ran)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .broker.effects import (
    AppendPartitionLog,
    ClientResponse,
    CloseClientConnection,
    FlushPartition,
    TruncatePartitionLog,
)
from .kv.effects import ClientReply
from .raft.effects import AppendLog, Committed, Event, Fatal, Flush, PersistQuorumState, Reply, Send, TruncateLog

__all__ = ["METHODS", "Dispatcher", "EffectHandler", "dispatch"]


class EffectHandler(Protocol):
    """Applies one effect of each kind; the effects module of each core says what each means."""

    def on_send(self, effect: Send) -> None: ...
    def on_persist_quorum_state(self, effect: PersistQuorumState) -> None: ...
    def on_append_log(self, effect: AppendLog) -> None: ...
    def on_truncate_log(self, effect: TruncateLog) -> None: ...
    def on_flush(self, effect: Flush) -> None: ...
    def on_committed(self, effect: Committed) -> None: ...
    def on_reply(self, effect: Reply) -> None: ...
    def on_event(self, effect: Event) -> None: ...
    def on_fatal(self, effect: Fatal) -> None: ...
    def on_client_reply(self, effect: ClientReply) -> None: ...
    def on_append_partition_log(self, effect: AppendPartitionLog) -> None: ...
    def on_truncate_partition_log(self, effect: TruncatePartitionLog) -> None: ...
    def on_flush_partition(self, effect: FlushPartition) -> None: ...
    def on_client_response(self, effect: ClientResponse) -> None: ...
    def on_close_client_connection(self, effect: CloseClientConnection) -> None: ...


METHODS: dict[type, str] = {
    Send: "on_send",
    PersistQuorumState: "on_persist_quorum_state",
    AppendLog: "on_append_log",
    TruncateLog: "on_truncate_log",
    Flush: "on_flush",
    Committed: "on_committed",
    Reply: "on_reply",
    Event: "on_event",
    Fatal: "on_fatal",
    ClientReply: "on_client_reply",
    AppendPartitionLog: "on_append_partition_log",
    TruncatePartitionLog: "on_truncate_partition_log",
    FlushPartition: "on_flush_partition",
    ClientResponse: "on_client_response",
    CloseClientConnection: "on_close_client_connection",
}


class Dispatcher:
    """Applies effect lists to one handler, whose methods are looked up once (drivers call this on
    every step)."""

    __slots__ = ("_table",)

    def __init__(self, handler: EffectHandler) -> None:
        self._table: dict[type, Callable[[Any], object]] = {
            kind: getattr(handler, name) for kind, name in METHODS.items()
        }

    def __call__(self, effects: Iterable[Any]) -> bool:
        """Apply `effects` in order; False if a Fatal stopped the step (nothing after it applies)."""
        table = self._table
        for effect in effects:
            kind = type(effect)
            method = table.get(kind)
            if method is None:
                raise TypeError(f"no handler method for effect {kind.__name__}")
            method(effect)
            if kind is Fatal:
                return False
        return True


def dispatch(effects: Iterable[Any], handler: EffectHandler) -> bool:
    """Apply `effects` to `handler` in order; False if a Fatal stopped the step."""
    return Dispatcher(handler)(effects)
