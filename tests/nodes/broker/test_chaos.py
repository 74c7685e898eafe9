"""Randomized faults (crash, isolate, heal, restart) under acks=all producers: no acknowledged
write is lost, replicas converge, and no partition has two leaders in one leader epoch."""

import random

import pytest

from tests.nodes.broker.test_node_cluster import TP, acked_of, with_topic


def run_chaos(seed: int, rounds: int = 10):
    rng = random.Random(seed)
    c = with_topic(seed)
    rids, value = {}, 0
    for _ in range(rounds):
        op, target = rng.choice(["crash", "isolate", "heal", "restart", "none"]), rng.choice(c.ids)
        if op == "crash" and len(c.alive()) == 3:
            c.crash(target)
        elif op == "isolate":
            c.heal()
            c.isolate(target)
        elif op == "heal":
            c.heal()
        elif op == "restart":
            for i in c.ids:
                if c.nodes[i] is None:
                    c.boot(i)
        for _ in range(15):
            lid = c.partition_leader(TP)
            if lid is not None:
                rids[value] = c.send_value(lid, TP, value, timeout_ms=1_000)
                value += 1
            c.run_for(rng.randint(1, 100))
    c.heal()
    for i in c.ids:
        if c.nodes[i] is None:
            c.boot(i)
    assert c.run_until(lambda: c.leader_ready(TP, 3) is not None, 60_000)
    c.run_for(3_000)
    return c, acked_of(c, rids)


@pytest.mark.parametrize("seed", range(12))
def test_no_acknowledged_write_is_lost_under_random_faults(seed):
    c, acked = run_chaos(seed)
    assert acked, "the schedule should let some writes through"
    lid = c.leader_ready(TP)
    seen = dict((v, o) for o, v in c.read_all(lid, TP))
    assert {k: seen.get(k) for k in acked} == acked
    logs = [c.log_values(i, TP) for i in c.ids]
    assert logs[0] == logs[1] == logs[2]
    assert c.violations == [] and c.fatal == {}
