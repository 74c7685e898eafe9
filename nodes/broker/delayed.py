"""Delayed produce and fetch operations (Kafka's ``DelayedProduce``/``DelayedFetch``).

Both are thin: the replica manager supplies the per-partition check and the completion, so the
rules live in one place (``replica_manager.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import BrokerError
from .purgatory import DelayedOperation
from .topic_partition import TopicPartition


@dataclass(slots=True)
class ProduceStatus:
    """One partition of a produce: appended at ``base_offset``; satisfied once the check says
    so for ``required_offset`` (the LEO right after the append)."""

    base_offset: int
    required_offset: int
    error: BrokerError = BrokerError.NONE
    done: bool = False


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        deadline: int,
        statuses: dict[TopicPartition, ProduceStatus],
        check: Callable[[TopicPartition, ProduceStatus], BrokerError | None],
        respond: Callable[[dict[TopicPartition, ProduceStatus]], None],
    ) -> None:
        super().__init__(deadline)
        self.statuses = statuses
        self._check = check
        self._respond = respond

    def try_complete(self) -> bool:
        waiting = False
        for tp, status in self.statuses.items():
            if status.done:
                continue
            error = self._check(tp, status)
            if error is None:
                waiting = True
            else:
                status.error, status.done = error, True
        return False if waiting else self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if not status.done:
                status.error, status.done = BrokerError.REQUEST_TIMED_OUT, True

    def on_complete(self) -> None:
        self._respond(self.statuses)


class DelayedFetch(DelayedOperation):
    def __init__(self, deadline: int, ready: Callable[[], bool], complete: Callable[[], None]) -> None:
        super().__init__(deadline)
        self._ready = ready
        self._complete = complete

    def try_complete(self) -> bool:
        return self.force_complete() if self._ready() else False

    def on_complete(self) -> None:
        self._complete()
