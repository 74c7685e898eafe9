"""BrokerNode plumbing: a single-node cluster (broker and controller talk to themselves), the
driver contract (start once, Fatal stops the node, no busy deadlines), config parsing."""

import pytest

from nodes.broker import (
    BrokerConfig,
    BrokerError,
    BrokerNode,
    CreateTopicsRequest,
    NewTopic,
    TopicPartition,
)
from nodes.broker.config import PROPERTY_KEYS
from nodes.raft import Event, Fatal, PersistQuorumState
from tests.nodes.broker.cluster import BrokerCluster

TP = TopicPartition("t0", 0)
SOLO = BrokerConfig(min_insync_replicas=1, default_replication_factor=1, broker_heartbeat_interval_ms=500)


def test_a_single_node_is_controller_broker_and_register_service_at_once():
    c = BrokerCluster(1, seed=3, broker_config=SOLO).start()
    assert c.run_until(c.registered, 10_000)
    response = c.request(1, "create_topics", CreateTopicsRequest((NewTopic("t0"),)))
    assert response.topics[0].error == BrokerError.NONE
    assert c.run_until(lambda: c.partition_leader(TP) == 1, 5_000)
    for k in range(3):
        rid = c.send_value(1, TP, k)
        c.run_until(lambda rid=rid: rid in c.replies, 2_000)
        assert c.produce_result(rid).error == BrokerError.NONE
    assert c.read_all(1, TP) == [(0, 0), (1, 1), (2, 2)]
    c.call(1, "submit", "w", "write", "k", "v")
    c.run_until(lambda: "w" in c.replies)
    assert c.replies["w"][1].type == "ok"
    status = c.broker(1).status()
    assert status["active_controller"] and status["partitions"]["t0-0"]["high_watermark"] == 3
    # a restart recovers the partition log and the metadata, and serves the same records
    c.restart(1)
    assert c.run_until(lambda: c.partition_leader(TP) == 1 and c.broker(1).replicas.partitions[TP].hw == 3, 10_000)
    assert c.read_all(1, TP) == [(0, 0), (1, 1), (2, 2)]


def test_driver_contract():
    node = BrokerNode(1, [1, 2, 3])
    with pytest.raises(RuntimeError):
        node.tick(0)
    effects = node.start(0)
    assert any(isinstance(e, PersistQuorumState) for e in effects)
    assert any(isinstance(e, Event) and e.data["type"] == "state" for e in effects)
    with pytest.raises(RuntimeError):
        node.start(0)
    deadline = node.next_deadline()
    assert deadline is not None and deadline > 0
    node.replicas.partition_flushed = lambda *a: node.fatal("boom")
    effects = node.partition_flushed(1, TP, 1)
    assert effects[-1] == Fatal("boom") and node.failed == "boom"
    assert node.tick(10**12) == [] and node.next_deadline() is None


def test_an_idle_cluster_does_not_spin():
    c = BrokerCluster(3, seed=1).start()
    c.run_until(c.registered, 20_000)
    c.create_topic("t0", partitions=4)
    c.run_for(3_000)
    before = c.sim.sched.events_run
    c.run_for(10_000)
    assert (c.sim.sched.events_run - before) / 10 < 200  # events run per simulated second, all nodes together


def test_config_from_properties():
    props = {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "TRUE",
        "broker.session.timeout.ms": "4000",
        "unrelated.key": "x",
    }
    config = BrokerConfig.from_properties(props)
    assert (config.min_insync_replicas, config.unclean_leader_election_enable) == (2, True)
    assert config.broker_session_timeout_ms == 4000 and config.replica_lag_time_max_ms == 30_000
    assert set(PROPERTY_KEYS) >= {"min.insync.replicas", "replica.lag.time.max.ms", "default.replication.factor"}
    with pytest.raises(ValueError, match="min.insync.replicas"):
        BrokerConfig.from_properties({"min.insync.replicas": "0"})
    with pytest.raises(ValueError, match="replica.lag.time.max.ms"):
        BrokerConfig.from_properties({"replica.lag.time.max.ms": "soon"})
    with pytest.raises(ValueError, match="unclean"):
        BrokerConfig.from_properties({"unclean.leader.election.enable": "yes"})
