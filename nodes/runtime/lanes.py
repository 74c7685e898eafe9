"""Which connection a node-to-node request travels on, and how long that connection waits for it.

Raft requests go one voter at a time on one connection; broker requests on one of four
*lanes* per destination: ``replication`` (follower fetches, which park on the leader),
``control`` (registration, heartbeats, AlterPartition), ``forward`` (CreateTopics to the
active controller) and ``txn`` (WriteTxnMarkers, which wait for the markers' replication and
must not hold up heartbeats). ``control`` and ``forward`` go to the active controller (a voter's
controller listener); ``replication`` and ``txn`` go to another broker (the inter-broker endpoint it
registered). A request with no answer within its connection's timeout resets that
connection, and whatever it still carried is lost. The runtime driver sizes its connections
from here, and the simulator's TCP-like links hold a message across a partition for as long.
"""

from __future__ import annotations

from typing import Any

from ..broker.config import BrokerConfig
from ..broker.messages import (
    BROKER_REQUESTS,
    BROKER_RESPONSES,
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchRecordsRequest,
    FetchRecordsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from ..raft import RaftConfig

LANES = ("replication", "control", "forward", "txn")
CONTROLLER_LANES = frozenset({"control", "forward"})  # to the active controller; the others to a broker


def lane_of(message: Any) -> str:
    """The lane of a broker request (or of the response that answers it)."""
    if isinstance(message, FetchRecordsRequest | FetchRecordsResponse):
        return "replication"
    if isinstance(message, CreateTopicsRequest | CreateTopicsResponse):
        return "forward"
    if isinstance(message, WriteTxnMarkersRequest | WriteTxnMarkersResponse):
        return "txn"
    return "control"


def lane_timeout_ms(lane: str, broker: BrokerConfig) -> int:
    """How long a lane's connection waits for an answer before it is reset."""
    if lane == "replication":  # a follower's fetch may park on the leader for the fetch wait first
        return broker.replica_fetch_wait_max_ms + broker.request_timeout_ms
    return broker.request_timeout_ms


def connection_timeout_ms(message: Any, raft: RaftConfig, broker: BrokerConfig | None) -> int:
    """How long the connection carrying `message` (a request, or the response to one) lives without an answer."""
    if broker is not None and isinstance(message, BROKER_REQUESTS + BROKER_RESPONSES):
        return lane_timeout_ms(lane_of(message), broker)
    return raft.request_timeout_ms
