"""InitProducerId on a broker: producer ids handed out from blocks the active controller
allocates through the quorum (Kafka's RPCProducerIdManager and AllocateProducerIds, KIP-730).

The broker keeps its current block ``[next, end)``. A request is answered from it at once; with
no block (at start, or used up) the request waits while one AllocateProducerIds is in flight,
and is answered COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers) if no block comes
within ``request_timeout_ms``. A new block is asked for early, once 90% of the current one is
used. Each block is a committed ``producer-ids`` metadata record, so no id is handed out twice,
across controller changes and restarts (a restarted broker asks for a fresh block). Producer
epochs start at 0: without transactional ids there is nothing to fence.
"""

from __future__ import annotations

from collections.abc import Callable

from ..raft.config import MS
from .config import BrokerConfig
from .errors import BrokerError
from .host import BrokerHost
from .messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

Respond = Callable[[InitProducerIdResponse], None]


class ProducerIdManager:
    def __init__(self, host: BrokerHost, config: BrokerConfig) -> None:
        self.host = host
        self.config = config
        self.next_id = 0
        self.end_id = 0  # the current block is [next_id, end_id)
        self._prefetched: tuple[int, int] | None = None
        self._inflight: tuple[int, int] | None = None  # (correlation, deadline)
        self._waiting: list[tuple[int, Respond]] = []  # (deadline, respond)
        self.allocated_blocks = 0

    def init_producer_id(self, request: InitProducerIdRequest, respond: Respond) -> None:
        if request.transactional_id is not None:
            respond(InitProducerIdResponse(BrokerError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            return
        if self._take(respond):
            return
        deadline = self.host.now + self.config.request_timeout_ms * MS
        self._waiting.append((deadline, respond))
        self._maybe_request()

    def _take(self, respond: Respond) -> bool:
        if self.next_id >= self.end_id and self._prefetched is not None:
            self.next_id, self.end_id = self._prefetched
            self._prefetched = None
        if self.next_id >= self.end_id:
            return False
        pid = self.next_id
        self.next_id += 1
        respond(InitProducerIdResponse(BrokerError.NONE, pid, 0))
        size = self.end_id - self.next_id
        if self._prefetched is None and size * 10 < self.config.producer_id_block_size:
            self._maybe_request()
        return True

    def _maybe_request(self) -> None:
        if self._inflight is not None:
            return
        controller = self.host.controller_id()
        broker_epoch = self.host.broker_epoch()
        if controller is None or broker_epoch is None:
            return  # retried by poll() until the deadline of the oldest waiter
        correlation = self.host.next_correlation()
        self._inflight = (correlation, self.host.now + self.config.request_timeout_ms * MS)
        self.host.send(controller, AllocateProducerIdsRequest(self.host.node_id, broker_epoch, correlation))

    def on_response(self, response: AllocateProducerIdsResponse) -> None:
        if self._inflight is None or self._inflight[0] != response.correlation:
            return
        self._inflight = None
        if response.error is not BrokerError.NONE or response.producer_id_len <= 0:
            return  # poll() asks again while someone waits
        self.allocated_blocks += 1
        block = (response.producer_id_start, response.producer_id_start + response.producer_id_len)
        if self.next_id >= self.end_id:
            self.next_id, self.end_id = block
        else:
            self._prefetched = block
        waiting, self._waiting = self._waiting, []
        for i, (_deadline, respond) in enumerate(waiting):
            if not self._take(respond):
                self._waiting = waiting[i:]
                break

    def poll(self, now: int) -> None:
        if self._inflight is not None and now >= self._inflight[1]:
            self._inflight = None  # lost: ask again (maybe another controller)
        expired = [respond for deadline, respond in self._waiting if now >= deadline]
        self._waiting = [(d, r) for d, r in self._waiting if now < d]
        for respond in expired:
            respond(InitProducerIdResponse(BrokerError.COORDINATOR_LOAD_IN_PROGRESS))
        if self._waiting:
            self._maybe_request()

    def next_deadline(self) -> int | None:
        times = [d for d, _ in self._waiting]
        if self._inflight is not None:
            times.append(self._inflight[1])
        return min(times) if times else None
