"""Start-up rules (§1.3): where a (re)starting voter begins, and what it persists."""

import pytest

from nodes.raft import (
    AppendLog,
    EndQuorumEpochRequest,
    FetchRequest,
    QuorumState,
    Role,
    VoteRequest,
    VoterSetMismatch,
    with_repair,
)
from nodes.raft.state import startup_state

from .helpers import boot, log_of, of, persisted, sent, states

VOTERS = frozenset({1, 2, 3})


@pytest.mark.parametrize(
    ("state", "log_epoch", "role", "epoch", "leader", "voted", "row"),
    [
        (None, 0, Role.UNATTACHED, 0, None, None, "unattached"),
        (QuorumState(2), 5, Role.UNATTACHED, 5, None, None, "log-epoch-ahead"),
        (QuorumState(4, 1, 1), 4, Role.RESIGNED, 4, 1, 1, "was-leader"),
        (QuorumState(4, None, 1), 3, Role.CANDIDATE, 4, None, 1, "voted-for-self"),
        (QuorumState(4, None, 3), 3, Role.VOTED, 4, None, 3, "voted"),
        (QuorumState(4, 2, None), 3, Role.FOLLOWER, 4, 2, None, "follower"),
        (QuorumState(4, 2, 1), 3, Role.FOLLOWER, 4, 2, 1, "follower"),  # voted for self, then saw 2 win
        (QuorumState(4, 9, None), 3, Role.UNATTACHED, 4, None, None, "unattached"),  # leader not a voter
        (QuorumState(4), 3, Role.UNATTACHED, 4, None, None, "unattached"),
    ],
)
def test_startup_table(state, log_epoch, role, epoch, leader, voted, row):
    s = startup_state(state, log_epoch, 1, VOTERS)
    assert (s.role, s.epoch, s.leader_id, s.voted_for, s.row) == (role, epoch, leader, voted, row)


def test_start_rewrites_state_and_reports_it():
    node, effects = boot(persisted=QuorumState(4, None, 3))
    assert persisted(effects) == [QuorumState(4, None, 3, voters=(1, 2, 3))]
    assert states(effects) == [
        {"node": "n1", "time": 0, "type": "state", "epoch": 4, "role": "voted", "leader": None, "voted_for": "n3"}
    ]


def test_log_epoch_ahead_persists_new_epoch():
    node, effects = boot(persisted=QuorumState(1), log=log_of(1, 3))
    assert node.epoch == 3 and persisted(effects) == [QuorumState(3, None, None, voters=(1, 2, 3))]


def test_former_leader_restarts_resigned_and_asks_for_a_successor():
    node, effects = boot(persisted=QuorumState(4, 1, 1), log=log_of(1, 4))
    assert node.role is Role.RESIGNED and node.epoch == 4
    assert len(sent(effects, EndQuorumEpochRequest)) == 2
    assert of(effects, AppendLog) == []  # it never appends again in epoch 4
    assert node.append(1, b"x", "r")[0].error.name == "NOT_LEADER_OR_FOLLOWER"
    assert not sent(node.handle(2, 2, VoteRequest(4, 2, 4, 2)))[0].vote_granted


def test_restart_as_leader_bug_resumes_the_old_epoch():
    node, effects = boot(persisted=QuorumState(4, 1, 1), log=log_of(1, 4), bugs={"restart-as-leader"})
    assert node.role is Role.LEADER and node.epoch == 4  # KAFKA-10527
    (append,) = of(effects, AppendLog)
    assert append.records[0].epoch == 4 and append.records[0].offset == 2
    assert states(effects)[-1]["role"] == "leader"


def test_candidate_restarts_in_the_same_epoch_and_asks_again():
    node, effects = boot(persisted=QuorumState(4, None, 1))
    assert node.role is Role.CANDIDATE and node.epoch == 4 and node._retries == 1
    assert {m.epoch for m in sent(effects, VoteRequest)} == {4}


def test_follower_restarts_and_fetches():
    node, effects = boot(persisted=QuorumState(4, 2, None), log=log_of(1, 2, 4))
    (request,) = sent(effects, FetchRequest, dst=2)
    assert (request.fetch_offset, request.last_fetched_epoch, request.epoch) == (3, 4, 4)
    assert node.flushed_offset == 3  # the recovered log counts as durable
    assert node.high_watermark == 0  # not persisted; relearned from the leader


def test_start_twice_or_inputs_before_start_are_errors():
    node, _ = boot()
    with pytest.raises(RuntimeError):
        node.start(0)
    from nodes.raft import RaftNode

    fresh = RaftNode(1, [1, 2, 3])
    with pytest.raises(RuntimeError):
        fresh.tick(0)
    with pytest.raises(ValueError):
        RaftNode(4, [])  # no voters at all (node 4 alone would be an observer)
    with pytest.raises(ValueError):
        RaftNode(1, [1, 2, 3], bugs={"no-such-bug"})


def test_start_refuses_a_voter_set_other_than_the_recorded_one():
    with pytest.raises(VoterSetMismatch, match=r"configured voter set \[1, 2, 3, 4\] differs .* \[1, 2, 3\]"):
        boot(1, (1, 2, 3, 4), persisted=QuorumState(4, 2, None, voters=(1, 2, 3)))


@pytest.mark.parametrize("voters", [(1, 2, 3), None], ids=["same", "unrecorded"])
def test_start_accepts_the_recorded_voter_set_or_none(voters):
    node, effects = boot(2, (3, 1, 2), persisted=QuorumState(4, 3, None, voters=voters))
    assert node.role is Role.FOLLOWER
    assert persisted(effects) == [QuorumState(4, 3, None, voters=(1, 2, 3))]  # an old file gains the set


def test_repair_keeps_the_recorded_voter_set():
    assert with_repair(QuorumState(4, 2, None, voters=(1, 2)), 9, 3).voters == (1, 2)
