"""Node-to-node broker requests carry the cluster id; one of another cluster is answered
INCONSISTENT_CLUSTER_ID and not acted on."""

import pytest

from nodes.broker import BrokerError, BrokerNode, TopicPartition
from nodes.broker.messages import (
    AllocateProducerIdsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    FetchPartition,
    FetchRecordsRequest,
    NewTopic,
    TxnMarkerEntry,
    WriteTxnMarkersRequest,
    is_broker_request,
)
from nodes.raft import MS, BeginQuorumEpochRequest, RaftConfig, Send

TP = TopicPartition("t0", 0)
FOREIGN = "other-cluster"


def started(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3)) -> BrokerNode:
    node = BrokerNode(node_id, voters, RaftConfig(cluster_id="c1"))
    node.start(0)
    return node


def active_controller() -> BrokerNode:
    """A lone voter, leading at once; its first records flushed, so its controller is active."""
    node = started(1, (1,))
    for t in range(1, 20):
        node.flushed(t, node.raft.log_end_offset)
        node.tick(t)
        if node.controller.active:
            return node
    raise AssertionError(node.status())


def snapshot(node: BrokerNode) -> tuple:
    """What a request could change: the metadata log, the controller's in-flight changes, the broker state."""
    return node.raft.log_end_offset, set(node.controller.pending_brokers), node.status()


def test_requests_to_other_nodes_carry_the_cluster_id():
    node = started(2)
    effects = node.handle(1, 1, BeginQuorumEpochRequest(1, 1, "c1"))  # follows n1: registers with it
    effects += node.tick(5_000 * MS)
    requests = [e.message for e in effects if isinstance(e, Send) and is_broker_request(e.message)]
    assert any(isinstance(m, BrokerRegistrationRequest) for m in requests)
    assert {m.cluster_id for m in requests} == {"c1"}


@pytest.mark.parametrize(
    "request_",
    [
        FetchRecordsRequest((FetchPartition(TP, 0),), replica_id=2, correlation=4, cluster_id=FOREIGN),
        BrokerRegistrationRequest(2, 77, "h", 1, correlation=4, cluster_id=FOREIGN),
        BrokerHeartbeatRequest(2, 5, 0, correlation=4, cluster_id=FOREIGN),
        AlterPartitionRequest(2, 5, TP, 1, 1, (1, 2), correlation=4, cluster_id=FOREIGN),
        CreateTopicsRequest((NewTopic("t0"),), correlation=4, cluster_id=FOREIGN),
        AllocateProducerIdsRequest(2, 5, correlation=4, cluster_id=FOREIGN),
        WriteTxnMarkersRequest((TxnMarkerEntry(7, 0, True, 1, (TP,)),), correlation=4, cluster_id=FOREIGN),
    ],
    ids=lambda r: type(r).__name__,
)
def test_a_request_of_another_cluster_is_answered_inconsistent_cluster_id(request_):
    node = active_controller()
    before = snapshot(node)
    effects = node.handle(2, 2, request_, "ctx")
    (send,) = [e for e in effects if isinstance(e, Send) and e.dst == 2]
    assert send.reply_ctx == "ctx" and send.message.correlation == 4
    answer = send.message
    errors = (
        [answer.error]
        if hasattr(answer, "error")
        else [t.error for t in getattr(answer, "topics", ())]
        + [e for m in getattr(answer, "markers", ()) for _, e in m.errors]
    )
    assert errors and set(errors) == {BrokerError.INCONSISTENT_CLUSTER_ID}
    assert snapshot(node) == before


def test_a_request_of_our_cluster_is_served():
    node = active_controller()
    before = node.raft.log_end_offset
    node.handle(2, 2, BrokerRegistrationRequest(2, 77, "h", 1, correlation=4, cluster_id="c1"), "ctx")
    assert 2 in node.controller.pending_brokers and node.raft.log_end_offset > before  # the registration is appended
