"""The queue workload's pieces for real clusters: op stream, final drain, broker node.properties, leader targets."""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from pathlib import Path

from harness.backends.base import Host
from harness.control.netns import NetnsTransport
from harness.runner.db import NodeDB
from harness.runner.queue_workload import QueueWorkload, node_properties
from harness.runner.workload import make_workload
from workloads import generator as gen
from workloads.queue import QueueGenerator

ENDPOINTS = {f"n{i}": (f"10.1.0.{i}", 9092) for i in range(1, 4)}


def _options(**kw: object) -> argparse.Namespace:
    base = {"acks": "all", "partitions": 3, "replication_factor": 3, "min_isr": 2, "unclean": False}
    return argparse.Namespace(**{**base, **kw})


def _ctx(workers: dict[int, int], free: set[int] | None = None) -> gen.Context:
    return gen.Context(0, workers, frozenset(workers if free is None else free), random.Random(0))


def test_make_workload_reads_the_queue_options() -> None:
    w = make_workload("queue", ENDPOINTS, 7, timeout=1.5, options=_options(acks="1", partitions=5, unclean=True))
    assert isinstance(w, QueueWorkload) and w.model == "queue" and w.name == "queue"
    assert (w.acks, w.partitions, w.unclean, w.timeout) == (1, 5, True, 1.5)
    assert w.all_keys() == [f"t0-{i}" for i in range(5)]
    assert make_workload("queue", ENDPOINTS, 7, options=_options()).acks == -1


def test_main_ops_are_the_simulators_stream_per_process_assignment() -> None:
    """One thread: the ops drawn equal QueueGenerator('workload-{seed}') fed with that process's assignment."""
    w = QueueWorkload(ENDPOINTS, 11, partitions=3)
    expected = QueueGenerator(random.Random("workload-11"), 3)
    assigned: list[str] = []
    seen = []
    for _ in range(200):
        op = w._next(_ctx({0: 0}))
        want = expected.next(assigned)
        assert (op["f"], op["key"], op["value"]) == (want.f, want.key, want.value) and op["process"] == 0
        if op["f"] == "assign":
            assigned = list(op["value"])
            w.consumer(0).assign(op["value"])  # what the client does when the assign runs
        seen.append(op["f"])
    assert seen[0] == "assign" and {"send", "poll", "assign"} <= set(seen)
    sends = [v for v in (w._next(_ctx({0: 0})) for _ in range(50)) if v["f"] == "send"]
    assert len({s["value"] for s in sends}) == len(sends)  # values sent are unique
    assert w._next(_ctx({0: 10}))["f"] == "assign"  # a new process (after an info) starts unassigned


def test_final_drain_assigns_then_polls_each_key_past_the_acked_end() -> None:
    w = QueueWorkload(ENDPOINTS, 1, partitions=2)
    w.note_ack("t0-0", 4)
    w.note_ack("t0-0", 2)  # lower offsets never lower the acked end
    drain = gen.on_threads(lambda t: t == 0, w.final([], 3))
    ctx = _ctx({0: 0, 1: 1})
    consumer = w.consumer(0)
    consumer.assign(["t0-0"])
    consumer.positions["t0-0"] = 9  # read far in the main phase: the final phase starts again at 0
    op, drain = drain.op(ctx)
    assert (op["f"], op["value"], op["process"]) == ("assign", ["t0-0"], 0)
    consumer.assign(op["value"])
    op, drain = drain.op(ctx)
    assert (op["f"], op["key"]) == ("poll", "t0-0")
    consumer.polled.add("t0-0")
    consumer.positions["t0-0"] = 3  # not yet past offset 4
    assert drain.op(ctx)[0]["f"] == "poll"
    assert drain.op(_ctx({0: 0, 1: 1}, free={1}))[0] is gen.PENDING  # its thread is busy
    consumer.positions["t0-0"] = 5
    assert drain.op(ctx) is None  # thread 0 drains only t0-0 (t0-1 is thread 1's)


def test_final_drain_gives_up_on_a_partition_whose_end_stays_short_of_the_acked_offset() -> None:
    w = QueueWorkload(ENDPOINTS, 1, partitions=1)
    w.note_ack("t0-0", 10)  # acknowledged, then lost with its leader (acks=1)
    drain = w.final(["t0-0"], 1)
    ctx = _ctx({0: 0})
    consumer = w.consumer(0)
    op, drain = drain.op(ctx)
    consumer.assign(op["value"])
    consumer.polled.add("t0-0")
    consumer.positions["t0-0"] = 6
    consumer.end_since["t0-0"] = time.monotonic()
    op, drain = drain.op(ctx)
    assert op["f"] == "poll" and op["time"] > ctx.time  # at the end: poll again a little later
    consumer.end_since["t0-0"] = time.monotonic() - 60
    assert drain.op(ctx) is None


def _hosts(n: int) -> list[Host]:
    return [Host(f"n{i}", f"10.1.0.{i}", NetnsTransport(f"n{i}", None), f"/w/n{i}") for i in range(1, n + 1)]


def test_broker_nodes_get_the_broker_role_topic_defaults_and_bugs(tmp_path: Path) -> None:
    opts = _options(min_isr=3, unclean=True)
    db = NodeDB(_hosts(3), bugs=["hw-from-leader"], broker=True, properties=node_properties(opts))
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
