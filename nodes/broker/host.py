"""What the broker's parts (replica manager, fetcher, controller, lifecycle) need from the node
that owns them: the clock of the current step, the metadata image, and ways to emit effects and
send messages. :class:`~nodes.broker.node.BrokerNode` implements it."""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from .image import MetadataImage


class BrokerHost(Protocol):
    node_id: int
    image: MetadataImage

    @property
    def now(self) -> int: ...

    def emit(self, effect: Any) -> None: ...

    def send(self, dst: int, message: Any, reply_ctx: Any = None) -> None: ...

    def controller_id(self) -> int | None: ...

    def broker_epoch(self) -> int | None:
        """This incarnation's broker epoch once its registration is in the image, else None."""
        ...

    def next_correlation(self) -> int: ...

    def fatal(self, reason: str) -> NoReturn: ...
