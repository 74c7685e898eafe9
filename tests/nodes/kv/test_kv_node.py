"""KVNode on the in-test cluster driver: ops go through the log; reads are linearizable unless the
``stale-read`` bug is on."""

import random

import pytest

from nodes.kv import FAIL, INFO, OK, ClientReply, KVNode
from nodes.raft import Committed, QuorumState, Record, Role, VoteResponse
from nodes.raft.errors import Error
from tests.nodes.raft.cluster import Cluster


def cluster(n=3, seed=1, bugs=()):
    c = Cluster(n, seed=seed, bugs=bugs, factory=KVNode).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    return c


def op(c, node, rid, f, key, value=None, timeout_ms=3_000):
    c.call(node, "submit", rid, f, key, value)
    c.run_until(lambda: rid in c.replies, timeout_ms)
    return c.replies.get(rid, (None, None))[1]


def test_write_read_cas_through_the_log():
    c = cluster()
    lid = c.stable_leader()
    assert op(c, lid, "w1", "write", "r1", 1) == ClientReply("w1", OK, 1, None, lid)
    assert op(c, lid, "r1", "read", "r1").value == 1
    assert op(c, lid, "r2", "read", "other").value is None
    assert op(c, lid, "c1", "cas", "r1", [1, 2]).type == OK
    refused = op(c, lid, "c2", "cas", "r1", [1, 3])
    assert (refused.type, refused.error, refused.value) == (FAIL, "cas-mismatch", [1, 3])
    assert op(c, lid, "r3", "read", "r1").value == 2
    # reads are log entries too
    payloads = [r.payload for r in c.node(lid).log_records() if not r.control]
    assert sum(b'"f":"read"' in p for p in payloads) == 3
    # every replica applied the same state
    c.run_for(2_000)
    assert all(c.nodes[i].machine.registers == {"r1": 2} for i in c.ids)


def test_non_leader_fails_definitely_and_names_the_leader():
    c = cluster()
    lid = c.stable_leader()
    other = next(i for i in c.ids if i != lid)
    reply = op(c, other, "x", "write", "r1", 9)
    assert (reply.type, reply.error, reply.leader_id) == (FAIL, "not-leader", lid)


def test_leadership_lost_with_pending_ops_is_indeterminate():
    node = KVNode(1, [1, 2, 3], rng=random.Random(0))
    node.start(0, QuorumState(2, None, 1))
    node.handle(0, 2, VoteResponse(Error.NONE, 2, None, True))
    assert node.raft.role is Role.LEADER
    node.submit(1, "w", "write", "k", 5)
    effects = node.handle(2, 3, VoteResponse(Error.NONE, 3, 3, False))  # a newer leader exists
    (reply,) = [e for e in effects if isinstance(e, ClientReply)]
    assert (reply.type, reply.error, reply.leader_id) == (INFO, "leadership-lost", 3)


def test_state_machine_is_rebuilt_from_committed_entries_after_restart():
    c = cluster()
    lid = c.stable_leader()
    for k in range(3):
        assert op(c, lid, f"w{k}", "write", "r", k).type == OK
    c.run_for(2_000)
    follower = next(i for i in c.ids if i != lid)
    c.restart(follower)
    c.run_for(3_000)
    assert c.nodes[follower].machine.registers == {"r": 2}


def test_deposed_leader_does_not_answer_reads_from_stale_state():
    c = cluster(seed=2)
    old = c.stable_leader()
    assert op(c, old, "w0", "write", "r", "old").type == OK
    c.isolate(old)
    majority = [i for i in c.ids if i != old]
    assert c.run_until(lambda: any(c.node(i).is_leader for i in majority), 10_000)
    new = next(i for i in majority if c.node(i).is_leader)
    assert op(c, new, "w1", "write", "r", "new").type == OK
    # the old leader is cut off: its read can never commit; it ends "info" or "fail", never ok
    c.call(old, "submit", "stale", "read", "r", None)
    c.run_for(10_000)
    reply = c.replies.get("stale", (None, None))[1]
    assert reply is None or reply.type != OK


@pytest.mark.parametrize("bug", [False, True])
def test_stale_read_bug(bug):
    c = cluster(seed=3, bugs={"stale-read"} if bug else ())
    lid = c.stable_leader()
    assert op(c, lid, "w0", "write", "r", "old").type == OK
    c.run_for(2_000)
    follower = next(i for i in c.ids if i != lid)
    c.isolate(follower)
    assert op(c, lid, "w1", "write", "r", "new").type == OK
    reply = op(c, follower, "read", "read", "r", timeout_ms=100)
    if bug:
        assert (reply.type, reply.value) == (OK, "old")  # a stale value: not linearizable
    else:
        assert reply.type == FAIL and reply.error == "not-leader"


def test_committed_effects_pass_through_for_log_dumps():
    node = KVNode(1, [1], rng=random.Random(0))
    node.start(0)
    effects = node.tick(node.next_deadline())
    effects += node.flushed(1, 1)
    committed = [e for e in effects if isinstance(e, Committed)]
    assert committed and isinstance(committed[0].records[0], Record)
    effects = node.submit(2, "w", "write", "k", 1) + node.flushed(3, 2)
    assert [e for e in effects if isinstance(e, ClientReply)] == [ClientReply("w", OK, 1, None, 1)]
