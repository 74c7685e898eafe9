"""The broker side of registration and heartbeats (Kafka's ``BrokerLifecycleManager``).

Each BrokerNode instance is one *incarnation* (a number drawn from the node's rng). It
registers with the active controller (the raft leader) until the registration is answered,
then heartbeats every ``broker.heartbeat.interval.ms`` with its broker epoch and how far its
metadata image has got; a STALE_BROKER_EPOCH answer makes it register again. One request is in
flight at a time; an unanswered one is given up after ``request.timeout.ms``. Registrations
name the partitions whose log was found damaged at start-up (``damaged``), so the controller
takes this broker out of their ISR before it can lead them again.

Kafka's lifecycle manager times its heartbeats on the monotonic clock; ours read the clock the node's
timers read (``clock.source``), which a wall-clock step moves. A step back would leave the next
heartbeat as far ahead as the step, and the controller would fence the silent broker while it still
believes itself unfenced; so a deadline further ahead than any this manager sets is brought back
(``_unstep``): heartbeats stay one interval apart across a step, as on the monotonic clock.
"""

from __future__ import annotations

from ..raft.config import MS
from .config import BrokerConfig
from .errors import BrokerError
from .host import BrokerHost
from .messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from .topic_partition import TopicPartition

RETRY_BACKOFF_MS = 100


class BrokerLifecycle:
    def __init__(
        self,
        host: BrokerHost,
        config: BrokerConfig,
        incarnation: int,
        endpoint: tuple[str, int],
        inter_broker: tuple[str, int] = ("", 0),
    ) -> None:
        self.host = host
        self.config = config
        self.incarnation = incarnation
        self.endpoint = endpoint
        self.inter_broker = inter_broker  # registered for other brokers' requests ("": the voter address)
        self.epoch: int | None = None  # from the registration response
        self.fenced = True  # as the controller last said
        self._inflight: int | None = None  # correlation
        self._inflight_to: int | None = None
        self._inflight_until = 0
        self._next_at = 0  # earliest time for the next request
        self._announced = False  # heartbeat sent since our registration reached our own image
        self.damaged: tuple[TopicPartition, ...] = ()  # partition logs that lost a range (set at start)

    def _unstep(self, now: int) -> None:
        """Bring deadlines a backward clock step left too far ahead back within their longest period."""
        self._next_at = min(self._next_at, now + self._longest_wait())
        if self._inflight is not None:
            self._inflight_until = min(self._inflight_until, now + self.config.request_timeout_ms * MS)

    def _longest_wait(self) -> int:
        return max(self.config.broker_heartbeat_interval_ms, 5 * RETRY_BACKOFF_MS) * MS

    def poll(self, now: int) -> None:
        self._unstep(now)
        controller = self.host.controller_id()
        if self._inflight is not None:
            if now < self._inflight_until and controller == self._inflight_to:
                return
            self._inflight = None  # lost, or the controller changed: ask the new one
            self._next_at = min(self._next_at, now)
        if controller is None:
            return
        if self.epoch is not None and not self._announced and self.host.broker_epoch() == self.epoch:
            self._announced = True  # tell the controller at once that we caught up
            self._next_at = now
        if now < self._next_at:
            return
        correlation = self.host.next_correlation()
        if self.epoch is None:
            host, port = self.endpoint
            ib_host, ib_port = self.inter_broker
            message: object = BrokerRegistrationRequest(
                self.host.node_id,
                self.incarnation,
                host,
                port,
                correlation,
                self.damaged,
                inter_broker_host=ib_host,
                inter_broker_port=ib_port,
            )
        else:
            message = BrokerHeartbeatRequest(self.host.node_id, self.epoch, self.host.image.offset, False, correlation)
        self._inflight, self._inflight_to = correlation, controller
        self._inflight_until = now + self.config.request_timeout_ms * MS
        self._next_at = now + self.config.broker_heartbeat_interval_ms * MS
        self.host.send(controller, message)

    def on_registration_response(self, response: BrokerRegistrationResponse) -> None:
        if response.correlation != self._inflight:
            return
        self._inflight = None
        now = self.host.now
        if response.error is BrokerError.NONE:
            self.epoch = response.broker_epoch
            self._announced = False
            self._next_at = now  # first heartbeat right away
        else:
            self._next_at = now + RETRY_BACKOFF_MS * MS

    def on_heartbeat_response(self, response: BrokerHeartbeatResponse) -> None:
        if response.correlation != self._inflight:
            return
        self._inflight = None
        now = self.host.now
        if response.error is BrokerError.NONE:
            self.fenced = response.is_fenced
            if self.fenced and self.host.broker_epoch() == self.epoch:
                # caught up but still fenced (e.g. waiting for leaderships to move): ask again soon
                self._next_at = min(self._next_at, now + RETRY_BACKOFF_MS * MS * 5)
        elif response.error is BrokerError.STALE_BROKER_EPOCH:
            self.epoch = None
            self.fenced = True
            self._next_at = now
        else:
            self._next_at = now + RETRY_BACKOFF_MS * MS

    def next_deadline(self) -> int | None:
        self._unstep(self.host.now)
        if self._inflight is not None:
            return self._inflight_until
        if self.host.controller_id() is None:
            return None  # any step that discovers a controller polls again
        return self._next_at
