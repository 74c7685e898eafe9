"""A node whose recovery lost records inside its log (a damaged record, ``repair_to``): it neither stands
nor votes for a candidate behind the position its log had reached, until it has fetched the range back."""

from __future__ import annotations

from nodes.raft import MS, Error, FetchResponse, QuorumState, Role, VoteRequest, VoteResponse

from .helpers import FETCH_TIMEOUT, VOTERS, T, boot, log_of, persisted, sent


def test_repairing_node_does_not_stand() -> None:
    node, effects = boot(1, persisted=QuorumState(2, None, None, repair_to=6, repair_epoch=2), log=log_of(1, 1))
    assert persisted(effects)[-1].repair_to == 6  # kept on disk until repaired
    for i in range(1, 6):
        effects = node.tick(i * 10 * T)
        assert not sent(effects, VoteRequest), "a repairing node asked for votes"
    assert node.epoch == 2 and node.role is Role.UNATTACHED


def test_repairing_candidate_asks_for_no_votes() -> None:
    node, effects = boot(1, persisted=QuorumState(2, None, 1, repair_to=6, repair_epoch=2), log=log_of(1, 1))
    assert node.role is Role.CANDIDATE and not sent(effects, VoteRequest)
    effects = node.tick(20 * T)
    assert not sent(effects, VoteRequest) and node.epoch == 2


def test_repairing_node_votes_by_the_position_its_log_had_reached() -> None:
    node, _ = boot(1, persisted=QuorumState(2, None, None, repair_to=6, repair_epoch=2), log=log_of(1, 1))
    # up to date against the recovered log (epoch 1, 2 records), behind the lost one (epoch 2, 6 records)
    effects = node.handle(0, 2, VoteRequest(3, 2, 1, 4))
    assert sent(effects, VoteResponse)[0].vote_granted is False
    effects = node.handle(0, 3, VoteRequest(4, 3, 2, 6))
    assert sent(effects, VoteResponse)[0].vote_granted is True


def test_repair_ends_once_the_range_is_fetched_and_flushed() -> None:
    node, _ = boot(2, persisted=QuorumState(2, 1, None, repair_to=4, repair_epoch=2), log=log_of(1))
    assert node.role is Role.FOLLOWER
    records = tuple(log_of(1, 2, 2, 2, 2)[1:])
    effects = node.handle(MS, 1, FetchResponse(Error.NONE, 2, 1, 5, records))
    assert node.log_end_offset == 5
    effects = node.flushed(2 * MS, 5)
    assert persisted(effects)[-1] == QuorumState(2, 1, None, voters=VOTERS)  # repair_to cleared, durably
    # and it may stand again
    effects = node.tick(2 * MS + 3 * FETCH_TIMEOUT)
    assert node.role in (Role.CANDIDATE, Role.PROSPECTIVE) or sent(effects, VoteRequest)


def test_no_repair_floor_when_the_log_already_reaches_it() -> None:
    node, effects = boot(1, persisted=QuorumState(2, None, None, repair_to=2, repair_epoch=1), log=log_of(1, 1, 1))
    assert persisted(effects)[-1].repair_to == 0


def test_an_observer_of_a_one_voter_quorum_repairs_but_the_lone_voter_cannot() -> None:
    state = QuorumState(2, 1, None, repair_to=6, repair_epoch=2)
    observer, effects = boot(9, (1,), persisted=state, log=log_of(1, 1))
    assert persisted(effects)[-1].repair_to == 6  # the voter holds the lost range: fetch it back
    lone, effects = boot(1, (1,), persisted=state, log=log_of(1, 1))
    assert persisted(effects)[-1].repair_to == 0  # no other copy exists: nothing to wait for
