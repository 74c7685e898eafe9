"""Cluster id: every request a node sends carries it; a request of another cluster is answered
INCONSISTENT_CLUSTER_ID and changes nothing, and such an answer changes nothing either."""

import pytest

from nodes.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Error,
    FetchRequest,
    FetchResponse,
    QuorumState,
    Role,
    Send,
    VoteRequest,
    VoteResponse,
)

from .helpers import boot, make_follower, make_leader, persisted, sent

FOREIGN = "other-cluster"


def test_requests_carry_the_configured_cluster_id():
    node, effects = boot(1, persisted=QuorumState(2, None, 1), cluster_id="c1")  # a candidate at once
    assert {m.cluster_id for m in sent(effects, VoteRequest)} == {"c1"}
    follower, effects = make_follower(2, leader=1, epoch=3, cluster_id="c1")
    assert [m.cluster_id for m in sent(effects, FetchRequest)] == ["c1"]
    leader, effects = make_leader(1, epoch=3, cluster_id="c1")
    assert {m.cluster_id for m in sent(effects, BeginQuorumEpochRequest)} == {"c1"}
    effects = leader.resign(1)
    assert {m.cluster_id for m in sent(effects, EndQuorumEpochRequest)} == {"c1"}


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        (VoteRequest(9, 2, 0, 0, cluster_id=FOREIGN), VoteResponse(Error.INCONSISTENT_CLUSTER_ID, 3, 1, False)),
        (
            VoteRequest(3, 2, 0, 0, pre_vote=True, cluster_id=FOREIGN),
            VoteResponse(Error.INCONSISTENT_CLUSTER_ID, 3, 1, False, pre_vote=True),
        ),
        (BeginQuorumEpochRequest(9, 2, FOREIGN), BeginQuorumEpochResponse(Error.INCONSISTENT_CLUSTER_ID, 3, 1)),
        (EndQuorumEpochRequest(9, 2, (3,), FOREIGN), EndQuorumEpochResponse(Error.INCONSISTENT_CLUSTER_ID, 3, 1)),
        (FetchRequest(3, 2, 0, 0, cluster_id=FOREIGN), FetchResponse(Error.INCONSISTENT_CLUSTER_ID, 3, 1, None)),
        (
            DescribeQuorumRequest(cluster_id=FOREIGN),
            DescribeQuorumResponse(Error.INCONSISTENT_CLUSTER_ID, 3, 1, None),
        ),
    ],
    ids=["vote", "pre-vote", "begin-epoch", "end-epoch", "fetch", "describe"],
)
def test_a_request_of_another_cluster_is_refused_and_changes_nothing(request_, answer):
    leader, _ = make_leader(1, epoch=3, now=0)
    before = leader.status()
    effects = leader.handle(5, 2, request_, "ctx")
    assert effects == [Send(2, answer, "ctx")]
    assert leader.role is Role.LEADER and leader.status() == before and persisted(effects) == []


def test_a_request_without_a_cluster_id_is_served():
    leader, _ = make_leader(1, epoch=3)
    (answer,) = sent(leader.handle(5, -1, DescribeQuorumRequest(), "ctx"), DescribeQuorumResponse)
    assert answer.error is Error.NONE and answer.leader_id == 1


def test_a_request_of_our_cluster_is_served():
    node, _ = boot(2, persisted=QuorumState(3), cluster_id="c1")
    effects = node.handle(5, 1, VoteRequest(4, 1, 0, 0, cluster_id="c1"))
    assert sent(effects, VoteResponse) == [VoteResponse(Error.NONE, 4, None, True)]
    assert node.role is Role.VOTED and node.epoch == 4


def test_an_inconsistent_cluster_answer_changes_nothing():
    node, _ = boot(1, persisted=QuorumState(2, None, 1))  # candidate in epoch 2
    effects = node.handle(5, 2, VoteResponse(Error.INCONSISTENT_CLUSTER_ID, 7, 3, False))
    assert effects == [] and node.role is Role.CANDIDATE and node.epoch == 2
    follower, _ = make_follower(2, leader=1, epoch=3)
    effects = follower.handle(5, 1, FetchResponse(Error.INCONSISTENT_CLUSTER_ID, 8, 3, None))
    assert effects == [] and follower.role is Role.FOLLOWER and follower.epoch == 3 and follower.leader_id == 1
