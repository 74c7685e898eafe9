"""Helpers for driving one RaftNode by hand in unit tests."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from nodes.raft import (
    MS,
    Error,
    Event,
    FetchRequest,
    FetchResponse,
    PersistQuorumState,
    QuorumState,
    RaftConfig,
    RaftNode,
    Record,
    Role,
    Send,
    VoteResponse,
)

T = RaftConfig().election_timeout_ms * MS  # base election timeout, ns
FETCH_TIMEOUT = RaftConfig().fetch_timeout_ms * MS
VOTERS = (1, 2, 3)  # the voter set boot() uses by default, as the quorum state records it


def log_of(*epochs: int) -> list[Record]:
    """Records at offsets 0.. with the given epochs."""
    return [Record(i, e, f"v{i}".encode()) for i, e in enumerate(epochs)]


def boot(
    node_id: int = 1,
    voters: Iterable[int] = VOTERS,
    *,
    now: int = 0,
    persisted: QuorumState | None = None,
    log: Iterable[Record] = (),
    bugs: Iterable[str] = (),
    seed: int = 0,
    **config: Any,
) -> tuple[RaftNode, list]:
    node = RaftNode(node_id, list(voters), RaftConfig(**config), random.Random(seed), bugs)
    return node, node.start(now, persisted, list(log))


def of(effects: list, cls: type) -> list:
    return [e for e in effects if isinstance(e, cls)]


def sent(effects: list, cls: type | None = None, dst: int | None = None) -> list:
    """Messages sent (optionally of one type / to one node)."""
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and (cls is None or isinstance(e.message, cls)) and (dst is None or e.dst == dst)
    ]


def persisted(effects: list) -> list[QuorumState]:
    return [e.state for e in effects if isinstance(e, PersistQuorumState)]


def states(effects: list) -> list[dict]:
    return [e.data for e in effects if isinstance(e, Event) and e.data["type"] == "state"]


def hws(effects: list) -> list[int]:
    return [e.data["hw"] for e in effects if isinstance(e, Event) and e.data["type"] == "hw"]


def flush_all(node: RaftNode, now: int) -> list:
    """Complete flushes until the whole log is durable (one Flush is outstanding at a time)."""
    effects: list = []
    for _ in range(10):
        if node.flushed_offset >= node.log_end_offset and node._flush_inflight is None:
            break
        effects += node.flushed(now, node.log_end_offset)
    return effects


def make_leader(
    node_id: int = 1,
    voters: Iterable[int] = VOTERS,
    *,
    epoch: int = 1,
    log: Iterable[Record] = (),
    bugs: Iterable[str] = (),
    now: int = 0,
    flush: bool = True,
    **config: Any,
) -> tuple[RaftNode, list]:
    """A node that restarts as Candidate(epoch) (it had voted for itself) and wins at ``now``."""
    voters = list(voters)
    node, effects = boot(
        node_id, voters, now=now, persisted=QuorumState(epoch, None, node_id), log=log, bugs=bugs, **config
    )
    for v in voters:
        if v != node_id and node.role is Role.CANDIDATE:
            effects += node.handle(now, v, VoteResponse(Error.NONE, epoch, None, True))
    assert node.role is Role.LEADER, node.status()
    if flush:
        effects += flush_all(node, now)
    return node, effects


def make_follower(
    node_id: int = 2,
    voters: Iterable[int] = VOTERS,
    *,
    leader: int = 1,
    epoch: int = 1,
    log: Iterable[Record] = (),
    bugs: Iterable[str] = (),
    now: int = 0,
    **config: Any,
) -> tuple[RaftNode, list]:
    node, effects = boot(
        node_id, voters, now=now, persisted=QuorumState(epoch, leader, None), log=log, bugs=bugs, **config
    )
    assert node.role is Role.FOLLOWER
    return node, effects


def fetch(node: RaftNode, src: int, offset: int, last_epoch: int, now: int = 0, max_wait_ms: int = 0) -> FetchResponse:
    """Send a Fetch to leader ``node`` and return its (immediate) response."""
    effects = node.handle(now, src, FetchRequest(node.epoch, src, offset, last_epoch, max_wait_ms))
    responses = sent(effects, FetchResponse, dst=src)
    assert len(responses) == 1, effects
    return responses[0]
