"""Each seeded broker bug, on three BrokerNodes: the clean run keeps every acknowledged write and
consistent logs, the bugged run loses acknowledged writes or leaves divergent logs."""

import pytest

from nodes.broker import BrokerError
from tests.nodes.broker.test_node_cluster import TP, acked_of, with_topic

E = BrokerError


def lost_writes(c, rids, reader):
    acked = acked_of(c, rids)
    seen = dict((v, o) for o, v in c.read_all(reader, TP))
    return acked, sorted(k for k, o in acked.items() if seen.get(k) != o)


def lazy_flush_scenario(bugs):
    """acks=all writes, then every node loses power before its next (lazy) flush."""
    c = with_topic(bugs=bugs)
    c.run_for(2_000)  # the topic's metadata is flushed even with lazy raft flushes
    lid = c.leader_ready(TP)
    rids = {k: c.send_value(lid, TP, k) for k in range(5)}
    c.run_until(lambda: all(r in c.replies for r in rids.values()), 3_000)
    for i in c.ids:
        c.crash(i)
    for i in c.ids:
        c.boot(i)
    assert c.run_until(lambda: c.leader_ready(TP) is not None, 30_000)
    new = c.leader_ready(TP)
    c.run_until(lambda: c.broker(new).replicas.partitions[TP].hw >= 5, 5_000)
    return lost_writes(c, rids, new)


@pytest.mark.parametrize("bugs", [(), ("lazy-flush",)])
def test_lazy_flush(bugs):
    acked, lost = lazy_flush_scenario(bugs)
    assert len(acked) == 5
    assert lost == ([0, 1, 2, 3, 4] if bugs else [])


def isolated_leader_scenario(bugs):
    """acks=all writes to a leader cut off from its followers, which then dies."""
    c = with_topic(bugs=bugs)
    old = c.leader_ready(TP)
    c.isolate(old)
    rids = {k: c.send_value(old, TP, k, timeout_ms=1_000) for k in range(5)}
    c.run_until(lambda: all(r in c.replies for r in rids.values()), 3_000)
    errors = {c.produce_result(r).error for r in rids.values()}
    c.crash(old)
    c.heal()
    assert c.run_until(lambda: c.leader_ready(TP) not in (None, old), 30_000)
    new = c.leader_ready(TP)
    c.run_for(1_000)
    return errors, *lost_writes(c, rids, new)


def test_hw_from_leader():
    errors, acked, lost = isolated_leader_scenario(())
    assert errors == {E.REQUEST_TIMED_OUT} and acked == {} and lost == []
    errors, acked, lost = isolated_leader_scenario(("hw-from-leader",))
    assert errors == {E.NONE} and len(acked) == 5 and lost == [0, 1, 2, 3, 4]


def new_leader_while_isolated(bugs):
    """The partition leader is cut off long enough to be fenced and replaced; it takes acks=1
    writes meanwhile (a divergent suffix), the new leader takes acks=all writes, then the
    network heals."""
    c = with_topic(bugs=bugs)
    old = c.leader_ready(TP)
    c.isolate(old)
    stale = {k: c.send_value(old, TP, k, acks=1) for k in range(3)}
    assert c.run_until(lambda: c.partition_leader(TP) not in (None, old), 30_000)
    new = c.partition_leader(TP)
    fresh = {k: c.send_value(new, TP, k) for k in range(100, 102)}
    c.run_until(lambda: all(r in c.replies for r in fresh.values()), 3_000)
    c.heal()
    return c, old, new, stale, fresh


def test_no_truncate():
    c, old, new, stale, fresh = new_leader_while_isolated(())
    c.run_for(3_000)
    logs = [c.log_values(i, TP) for i in c.ids]
    assert logs[0] == logs[1] == logs[2] == [(0, 100), (1, 101)]  # acks=1 suffix truncated (S1)
    assert len(acked_of(c, fresh)) == 2

    c, old, new, stale, fresh = new_leader_while_isolated(("no-truncate",))
    c.run_for(3_000)
    assert c.log_values(new, TP) == [(0, 100), (1, 101)]
    assert c.log_values(old, TP) == [(0, 0), (1, 1), (2, 2)]  # divergent at offsets 0 and 1


def stale_leader_scenario(bugs):
    """After a leader change has reached the old leader, a client with stale metadata keeps
    producing to it while others produce to the new leader."""
    c, old, new, _, _ = new_leader_while_isolated(bugs)
    assert c.run_until(lambda: c.leader_ready(TP, 3) == new, 30_000)
    stale = {k: c.send_value(old, TP, k) for k in range(200, 203)}
    c.run_for(5)
    fresh = {}
    for k in range(300, 306):
        fresh[k] = c.send_value(new, TP, k)
        c.run_until(lambda k=k: fresh[k] in c.replies, 3_000)
    c.run_until(lambda: all(r in c.replies for r in stale.values()), 5_000)
    c.run_for(1_000)
    errors = {c.produce_result(r).error for r in stale.values()}
    return errors, *lost_writes(c, {**stale, **fresh}, new)


def test_stale_leader_produce():
    errors, acked, lost = stale_leader_scenario(())
    assert errors == {E.NOT_LEADER_OR_FOLLOWER} and len(acked) == 6 and lost == []
    errors, acked, lost = stale_leader_scenario(("stale-leader-produce",))
    assert errors == {E.NONE} and lost == [200, 201, 202]
