"""The broker's registration and heartbeats (BrokerLifecycle) across steps of the clock its timers read."""

from __future__ import annotations

from nodes.broker.config import BrokerConfig
from nodes.broker.errors import BrokerError
from nodes.broker.lifecycle import BrokerLifecycle
from nodes.broker.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationResponse
from nodes.raft.config import MS

from .fakes import FakeHost, epoch_of

INTERVAL_MS = 500


def registered() -> tuple[FakeHost, BrokerLifecycle]:
    host = FakeHost(node_id=1)
    life = BrokerLifecycle(host, BrokerConfig(broker_heartbeat_interval_ms=INTERVAL_MS), 77, ("n1", 9092))
    life.poll(host.now)
    ((_, registration),) = host.sent
    host.sent.clear()
    life.on_registration_response(BrokerRegistrationResponse(BrokerError.NONE, epoch_of(1), registration.correlation))
    return host, life


def heartbeats(host: FakeHost) -> list[BrokerHeartbeatRequest]:
    return [m for _, m in host.take_sent(BrokerHeartbeatRequest)]


def answer(host: FakeHost, life: BrokerLifecycle, request: BrokerHeartbeatRequest) -> None:
    life.on_heartbeat_response(BrokerHeartbeatResponse(BrokerError.NONE, False, request.correlation))


def test_heartbeats_keep_their_interval_when_the_clock_steps_back() -> None:
    host, life = registered()
    host._now = 40_000 * MS  # a wall-clock step 40 s ahead: the next heartbeat is due at once
    life.poll(host.now)
    (beat,) = heartbeats(host)
    answer(host, life, beat)
    host._now = 1_000 * MS  # the step is undone: back 39 s
    deadline = life.next_deadline()
    assert deadline is not None and deadline <= host.now + INTERVAL_MS * MS
    host._now = deadline
    life.poll(host.now)
    assert len(heartbeats(host)) == 1  # one interval after the step back, not 39 s later


def test_a_request_lost_before_a_step_back_is_given_up_within_the_request_timeout() -> None:
    host, life = registered()
    host._now = 40_000 * MS
    life.poll(host.now)
    assert heartbeats(host)  # in flight, never answered
    host._now = 1_000 * MS
    deadline = life.next_deadline()
    timeout = BrokerConfig().request_timeout_ms * MS
    assert deadline is not None and deadline <= host.now + timeout
    host._now = deadline
    life.poll(host.now)
    assert len(heartbeats(host)) == 1  # given up and sent again


def test_without_steps_the_interval_is_unchanged() -> None:
    host, life = registered()
    life.poll(host.now)
    (beat,) = heartbeats(host)
    answer(host, life, beat)
    assert life.next_deadline() == host.now + INTERVAL_MS * MS
