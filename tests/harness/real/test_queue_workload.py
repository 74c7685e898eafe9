"""The queue workload on real clusters: made from `kraftwerk test`'s options, broker node.properties, leader targets.

(Its op stream, client, setup and final drain are the shared ones: tests/workloads/test_queue.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from harness.core.spec import TestSpec
from harness.db.nodes import NodeDB, broker_properties
from harness.real.backends.base import Host
from harness.real.control.netns import NetnsTransport
from workloads.queue import QueueWorkload
from workloads.queue.options import QueueOptions

NODES = ["n1", "n2", "n3"]


def _options(**kw: Any) -> TestSpec:
    return TestSpec(workload="queue", workload_options=QueueOptions(**kw))


def test_make_workload_reads_the_queue_options() -> None:
    w = _options(acks="1", partitions=5, unclean=True).make_workload(NODES, 1.5)
    assert isinstance(w, QueueWorkload) and w.model == "queue" and w.name == "queue" and w.api == "kafka"
    assert (w.acks, w.partitions, w.unclean, w.timeout_s) == (1, 5, True, 1.5)
    assert w.all_keys() == [f"t0-{i}" for i in range(5)]
    assert _options().make_workload(NODES, 2.0).acks == -1
    assert TestSpec(workload="register").make_workload(NODES, 2.0).api == "kv"


def _hosts(n: int) -> list[Host]:
    return [Host(f"n{i}", f"10.1.0.{i}", NetnsTransport(f"n{i}", None), f"/w/n{i}") for i in range(1, n + 1)]


def test_broker_nodes_get_the_broker_role_topic_defaults_and_bugs(tmp_path: Path) -> None:
    w = _options(min_isr=3, unclean=True).make_workload(NODES, 2.0)
    db = NodeDB(_hosts(3), bugs=["hw-from-leader"], broker=True, properties=broker_properties(w.options()))
    props = dict(line.split("=", 1) for line in db.properties(db.hosts[2]).splitlines())
    assert props["process.roles"] == "controller,broker"
    assert props["advertised.listeners"] == "CLIENT://10.1.0.3:9092"  # listeners bind 0.0.0.0
    assert props["min.insync.replicas"] == "3" and props["unclean.leader.election.enable"] == "true"
    assert props["broker.session.timeout.ms"] == "3000" and props["kraftwerk.bugs"] == "hw-from-leader"
    from nodes.runtime.config import load_config

    path = tmp_path / "node.properties"
    path.write_text(db.properties(db.hosts[2]))
    config = load_config(path)  # the node accepts what the harness writes
    assert config.is_broker and config.broker.min_insync_replicas == 3 and "hw-from-leader" in config.bugs
    assert "process.roles=controller\n" in NodeDB(_hosts(3)).properties(_hosts(3)[0])


def test_leader_targets_and_readiness_of_brokers() -> None:
    def broker(parts: dict[str, tuple[str, int]], fenced: bool = False) -> dict[str, object]:
        views = {tp: {"role": r, "leader_epoch": e} for tp, (r, e) in parts.items()}
        return {"role": "follower", "broker": {"fenced": fenced, "partitions": views}}

    statuses = {
        "n1": broker({"t0-0": ("leader", 1), "t0-1": ("leader", 4)}),  # t0-0: a stale leader of epoch 1
        "n2": broker({"t0-0": ("leader", 2), "t0-1": ("follower", 4), "t0-2": ("leader", 1)}),
        "n3": broker({"t0-2": ("follower", 1)}),
    }
    assert NodeDB.partition_leaders(statuses) == {"t0-0": "n2", "t0-1": "n1", "t0-2": "n2"}
    assert NodeDB.brokers_ready(statuses)
    assert not NodeDB.brokers_ready({**statuses, "n3": broker({}, fenced=True)})
    assert not NodeDB.brokers_ready({**statuses, "n3": None})

    db = NodeDB(_hosts(3), broker=True)
    views = statuses

    async def describe_all(timeout: float = 1.0, names: object = None) -> dict[str, object]:
        return views

    db.describe_all = describe_all  # type: ignore[method-assign]
    assert asyncio.run(db.partition_leader()) == "n2"  # leads two of the three partitions
    views = {"n1": {"role": "leader", "epoch": 3}, "n2": None, "n3": {"role": "follower", "epoch": 3}}
    assert asyncio.run(db.partition_leader()) == "n1"  # no partitions yet: the quorum leader
