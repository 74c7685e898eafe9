"""Broker-only nodes (``process.roles=broker``): BrokerNodes outside the voter set are raft observers
that replay the metadata log, register with the active controller and lead and serve partitions."""

from nodes.broker import BrokerError, BrokerNode, TopicPartition
from nodes.raft import Role
from tests.nodes.broker.cluster import BrokerCluster

OBSERVERS = (4, 5)


def test_broker_only_nodes_register_lead_partitions_and_serve_produce_and_fetch():
    c = BrokerCluster(5, seed=2, voters=3).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    assert c.run_until(c.registered, 20_000)
    assert c.stable_leader() in (1, 2, 3)
    assert c.create_topic("t0", partitions=5, rf=2, via=4).error == BrokerError.NONE  # forwarded
    tps = [TopicPartition("t0", p) for p in range(5)]
    assert c.run_until(lambda: all(c.leader_ready(tp, 2) is not None for tp in tps), 10_000)
    served = [(tp, c.partition_leader(tp)) for tp in tps if c.partition_leader(tp) in OBSERVERS]
    assert served, "no partition led by a broker-only node"
    for tp, lid in served:
        rids = [c.send_value(lid, tp, f"v{k}") for k in range(3)]
        assert c.run_until(lambda rids=rids: all(c.produce_result(r) is not None for r in rids), 5_000)
        assert [c.produce_result(r).error for r in rids] == [BrokerError.NONE] * 3
        assert [v for _, v in c.read_all(lid, tp)] == ["v0", "v1", "v2"]
    for i in OBSERVERS:
        assert c.nodes[i].raft.observer and c.nodes[i].raft.role is Role.FOLLOWER
    assert c.violations == [] and c.fatal == {}


class _SplitCluster(BrokerCluster):
    """Voters 1-3 are controller-only (``broker=False``), 4 and 5 broker-only observers."""

    def _make(self, i, ids, config, rng, bugs):
        return BrokerNode(
            i, ids, config, rng, bugs, broker_config=self.broker_config, endpoint=(f"n{i}", 9092), broker=i not in ids
        )


def test_controller_only_nodes_run_the_controller_but_never_register_or_lead_partitions():
    c = _SplitCluster(5, seed=3, voters=3).start()
    assert c.run_until(lambda: c.stable_leader() is not None)
    assert c.run_until(lambda: all(c.nodes[i].image.is_eligible(b) for i in c.alive() for b in OBSERVERS), 20_000)
    assert c.create_topic("t0", partitions=4, rf=2, via=5).error == BrokerError.NONE
    tps = [TopicPartition("t0", p) for p in range(4)]
    assert c.run_until(lambda: all(c.leader_ready(tp, 2) is not None for tp in tps), 10_000)
    for i in (1, 2, 3):
        assert set(c.nodes[i].image.brokers) == set(OBSERVERS)  # the controllers never registered
        assert c.nodes[i].replicas.partitions == {}
    assert {c.partition_leader(tp) for tp in tps} <= set(OBSERVERS)
    assert c.violations == [] and c.fatal == {}
