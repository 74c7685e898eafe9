"""The high watermark rule (§1.5): majority of fetched offsets, strictly past the epoch start,
never decreasing; the leader counts only its flushed offset; followers take min(leader HW, own
flushed end)."""

from nodes.raft import (
    MS,
    AppendLog,
    Committed,
    Error,
    FetchRequest,
    FetchResponse,
    Flush,
    Record,
    Reply,
    VoteResponse,
)
from nodes.raft.effects import Event
from nodes.raft.timing import next_lazy_flush

from .helpers import fetch, flush_all, hws, log_of, make_follower, make_leader, of


def test_majority_offset_past_epoch_start():
    node, _ = make_leader(1, epoch=1)  # LeaderChange at offset 0 = epoch start
    assert fetch(node, 2, 0, 0).records[0].control
    assert node._leader.high_watermark is None  # offset 0 is not past the epoch start
    response = fetch(node, 2, 1, 1)
    assert node._leader.high_watermark == 1 and node.high_watermark == 1
    assert response.high_watermark == 1


def test_epoch_start_rule_blocks_old_epoch_entries():
    # the leader of epoch 3 inherits three entries of older epochs; its LeaderChange sits at 3
    node, _ = make_leader(1, epoch=3, log=log_of(1, 1, 2))
    assert node._leader.epoch_start_offset == 3
    fetch(node, 2, 3, 2)  # follower 2 holds the old entries: a majority has offsets 0..2
    fetch(node, 3, 3, 2)
    assert node._leader.high_watermark is None and node.high_watermark == 0
    fetch(node, 2, 4, 3)  # a majority now holds the LeaderChange record of epoch 3
    assert node._leader.high_watermark == 4


def test_commit_old_epoch_bug_commits_without_an_entry_of_the_current_epoch():
    node, _ = make_leader(1, epoch=3, log=log_of(1, 1, 2), bugs={"commit-old-epoch"})
    fetch(node, 2, 2, 1)
    assert node._leader.high_watermark == 2  # entries of epochs 1 committed by counting replicas
    fetch(node, 2, 3, 2)
    assert node.high_watermark == 3  # ... and the entry of epoch 2: the Figure 8 hazard


def test_leader_counts_only_its_flushed_offset():
    node, _ = make_leader(1, epoch=1, flush=False)
    fetch(node, 2, 1, 1)
    fetch(node, 3, 1, 1)
    assert node._leader.high_watermark == 1  # two followers are a majority without the leader
    node2, _ = make_leader(1, voters=(1, 2, 3, 4, 5), epoch=1, flush=False)
    fetch(node2, 2, 1, 1)
    fetch(node2, 3, 1, 1)
    assert node2._leader.high_watermark is None  # needs 3 of 5; the leader's own copy is unflushed
    flush_all(node2, 1)
    assert node2._leader.high_watermark == 1


def test_lazy_flush_bug_counts_unflushed_entries():
    node, effects = make_leader(1, voters=(1, 2, 3, 4, 5), epoch=1, flush=False, bugs={"lazy-flush"})
    assert of(effects, Flush) == []  # no flush after the append
    fetch(node, 2, 1, 1)
    fetch(node, 3, 1, 1)
    assert node._leader.high_watermark == 1 and node.flushed_offset == 0
    effects = node.append(5, b"w", "r1")
    assert of(effects, Flush) == []
    fetch(node, 2, 2, 1, now=6)
    effects = node.handle(7, 3, FetchRequest(1, 3, 2, 1, 0))
    assert [r.error for r in of(effects, Reply)] == [Error.NONE]  # acknowledged, still unflushed
    assert node.flushed_offset == 0
    # the lazy flush happens later, on a timer
    later = node.tick(node.config.lazy_flush_interval_ms * MS)
    assert of(later, Flush) == [Flush(2)]


def test_lazy_flush_timer_falls_on_whole_intervals_of_the_clock():
    """The lazy flushes are phased by the node's clock, not by when it started: a node started 0.3 s into
    an interval flushes at the interval's end, so nodes started at any moment (a simulator's, a container's)
    flush in the phase a replay can line up with."""
    interval = 1000 * MS
    node, _ = make_leader(1, epoch=1, flush=False, bugs={"lazy-flush"}, now=7300 * MS)
    assert node.next_deadline() <= 8000 * MS
    node.append(7400 * MS, b"w", "r1")
    assert of(node.tick(7999 * MS), Flush) == []
    assert of(node.tick(8000 * MS), Flush) == [Flush(node._log.end_offset)]
    # the next one a whole interval later, whenever the flush's tick came
    node.flushed(8100 * MS, node._log.end_offset)
    node.append(8150 * MS, b"x", "r1")
    assert of(node.tick(8990 * MS), Flush) == []
    assert of(node.tick(9001 * MS), Flush) == [Flush(node._log.end_offset)]
    assert next_lazy_flush(7300 * MS, interval) == 8000 * MS and next_lazy_flush(8000 * MS, interval) == 9000 * MS


def test_five_voters_use_the_third_highest_offset():
    node, _ = make_leader(1, voters=(1, 2, 3, 4, 5), epoch=1)
    for offset in range(1, 4):
        node.append(offset, f"x{offset}".encode(), offset)
    flush_all(node, 5)  # leader end offset 4
    fetch(node, 2, 4, 1)
    fetch(node, 3, 2, 1)
    fetch(node, 4, 1, 1)
    # offsets: leader 4, n2 4, n3 2, n4 1, n5 none -> third highest = 2
    assert node._leader.high_watermark == 2


def test_high_watermark_never_decreases():
    node, _ = make_leader(1, epoch=1)
    for i in range(4):
        node.append(1, f"x{i}".encode(), i)
    flush_all(node, 2)
    fetch(node, 2, 5, 1)
    fetch(node, 3, 5, 1)
    assert node._leader.high_watermark == 5
    fetch(node, 2, 3, 1)  # positions may go down (e.g. after a follower restart)
    fetch(node, 3, 3, 1)
    assert node._leader.high_watermark == 5 and node.high_watermark == 5


def test_commit_effects_and_replies_in_order():
    node2, _ = make_leader(1, epoch=1)
    node2.append(1, b"a", "ra")
    node2.append(1, b"b", "rb")
    flush_all(node2, 2)
    effects = node2.handle(3, 2, FetchRequest(1, 2, 3, 1, 0))
    committed = of(effects, Committed)
    assert len(committed) == 1 and committed[0].high_watermark == 3
    assert [r.payload for r in committed[0].records][1:] == [b"a", b"b"]
    replies = of(effects, Reply)
    assert [(r.request_id, r.offset) for r in replies] == [("ra", 1), ("rb", 2)]
    kinds = [type(e) for e in effects]
    assert kinds.index(Committed) < kinds.index(Reply)
    assert hws(effects) == [3]
    assert [e.data for e in effects if isinstance(e, Event)][0] == {
        "node": "n1",
        "time": 3,
        "type": "hw",
        "epoch": 1,
        "hw": 3,
    }


def test_follower_high_watermark_is_min_of_leader_hw_and_flushed_end():
    node, _ = make_follower(2, leader=1, epoch=1)
    node.handle(1, 1, FetchResponse(Error.NONE, 1, 1, 5, tuple(log_of(1, 1, 1))))
    assert node.high_watermark == 0  # nothing flushed yet
    node.flushed(2, 3)
    assert node.high_watermark == 3  # min(5, 3)
    node.handle(3, 1, FetchResponse(Error.NONE, 1, 1, 2, ()))  # a stale, lower leader HW
    assert node.high_watermark == 3
    node.handle(4, 1, FetchResponse(Error.NONE, 1, 1, None, ()))  # a new leader with no HW yet
    assert node.high_watermark == 3


def test_new_leader_reports_no_high_watermark_until_it_commits():
    node, _ = make_follower(2, leader=1, epoch=1)
    node.handle(1, 1, FetchResponse(Error.NONE, 1, 1, 2, (Record(0, 1, b"a"), Record(1, 1, b"b"))))
    node.flushed(2, 2)
    assert node.high_watermark == 2
    # node 2 becomes leader of epoch 2: its LeaderState starts without a high watermark
    node.tick(node.next_deadline() + 10**12)  # fetch timeout -> candidate
    node.handle(3, 3, VoteResponse(Error.NONE, node.epoch, None, True))
    assert node.is_leader and node._leader.high_watermark is None
    assert fetch(node, 3, 0, 0, now=4).high_watermark is None
    assert node.high_watermark == 2  # its own view never goes down
    effects = node.append(5, b"c", "rc")
    assert of(effects, AppendLog)
