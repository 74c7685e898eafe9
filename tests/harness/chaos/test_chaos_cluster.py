"""`ChaosCluster` (the kafka_chaos fixture's cluster) on the local and docker backends: each fault method goes
through the nemesis and shows in `status`, a kafka-python producer feels a partition and recovers after `heal`,
and bad requests get clear errors."""

from __future__ import annotations

import pytest

from harness.chaos.cluster import ChaosCluster, ChaosError

pytestmark = pytest.mark.slow
BACKENDS = [
    pytest.param("local", marks=pytest.mark.needs("root")),  # partitions, clocks and packets on lo need root
    pytest.param("docker", marks=pytest.mark.needs("docker")),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_fault_shows_in_status_and_a_client_feels_a_partition(backend: str) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError

    with ChaosCluster(backend, 3) as kafka:
        assert kafka.unavailable == {}
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        admin.create_topics([NewTopic("t", num_partitions=1, replication_factor=3)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all", request_timeout_ms=3000)
        producer.send("t", b"before").get(timeout=30)
        leader = kafka.leader("t", 0)
        assert leader in kafka.names and kafka.leader() in kafka.names

        assert kafka.kill("leader", topic="t") == [leader]
        assert kafka.status()["faults"] == {"killed": leader}
        producer.send("t", b"leader down").get(timeout=60)  # a new leader takes over
        assert kafka.start() == [leader]

        everyone = {n: [m for m in kafka.names if m != n] for n in kafka.names}
        assert kafka.partition(everyone) == everyone
        assert kafka.status()["faults"]["partition"] == " | ".join(kafka.names)
        with pytest.raises(KafkaError):  # no quorum, no replication: acks=all cannot be answered
            producer.send("t", b"cut off").get(timeout=10)
        kafka.heal()
        assert kafka.status()["faults"] == {}
        producer.send("t", b"healed").get(timeout=60)

        assert kafka.pause("n2") == ["n2"] and kafka.status()["faults"] == {"paused": "n2"}
        assert kafka.resume() == ["n2"]
        assert kafka.clock("n3", bump_ms=2000) == {"n3": {"offset-ms": 2000.0, "rate": 1.0}}
        assert "clock" in str(kafka.status()["faults"])
        assert kafka.clock(reset=True) == ["n3"]
        kafka.packet(loss=20, nodes=["n1"])
        assert "packet" in str(kafka.status()["faults"])
        kafka.heal()
        assert kafka.status()["faults"] == {}
        producer.send("t", b"end").get(timeout=60)
        producer.close()

        with pytest.raises(ChaosError, match="unknown node"):
            kafka.kill("n9")
        with pytest.raises(ChaosError, match="topic= picks a partition's leader"):
            kafka.kill("n1", topic="t")
        with pytest.raises(ChaosError, match="bump_ms, strobe_ms or reset"):
            kafka.clock("n1")


def test_a_backend_or_option_it_cannot_run_is_a_clear_error() -> None:
    with pytest.raises(ChaosError, match="--bug nope"):
        ChaosCluster("local", 3, bugs=["nope"])
    with pytest.raises(ChaosError, match="--bug stale-read"):  # a register bug: the queue workload never reaches it
        ChaosCluster("local", 3, bugs=["stale-read"])
