"""OffsetForLeaderEpoch (KIP-320) on three BrokerNodes: the leader's epoch cache answers where
an epoch ends, across a leader change; followers and stale epochs are refused."""

from nodes.broker import BrokerError
from nodes.broker.messages import EpochQuery, OffsetForLeaderEpochRequest
from tests.nodes.broker.test_node_cluster import TP, with_topic

E = BrokerError


def ask(c, node, epoch, current=None):
    resp = c.request(node, "offset_for_leader_epoch", OffsetForLeaderEpochRequest((EpochQuery(TP, epoch, current),)))
    r = resp.partitions[0]
    return r.error, r.leader_epoch, r.end_offset


def test_epoch_end_offsets_across_a_leader_change():
    c = with_topic()
    old = c.leader_ready(TP)
    first = c.broker(old).replicas.partitions[TP].leader_epoch
    for v in range(3):
        c.send_value(old, TP, v)
    assert c.run_until(lambda: c.broker(old).replicas.partitions[TP].hw == 3, 3_000)
    assert ask(c, old, first) == (E.NONE, first, 3)  # the current epoch ends at the log end
    assert ask(c, old, first + 5) == (E.NONE, first, 3)
    assert ask(c, old, -1) == (E.NONE, -1, -1)  # no epoch at or below it
    follower = next(i for i in c.ids if i != old)
    assert ask(c, follower, first)[0] is E.NOT_LEADER_OR_FOLLOWER
    c.crash(old)
    assert c.run_until(lambda: c.leader_ready(TP) not in (None, old), 30_000)
    new = c.leader_ready(TP)
    second = c.broker(new).replicas.partitions[TP].leader_epoch
    assert second > first
    rid = c.send_value(new, TP, 3)
    assert c.run_until(lambda: rid in c.replies, 3_000)
    assert ask(c, new, first) == (E.NONE, first, 3)  # the old epoch ends where the new one starts
    assert ask(c, new, second) == (E.NONE, second, 4)
    assert ask(c, new, second, current=first)[0] is E.FENCED_LEADER_EPOCH
    assert ask(c, new, second, current=second + 1)[0] is E.UNKNOWN_LEADER_EPOCH
