"""`kraftwerk replay` of queue runs on real clusters: the plan of a simulated or real queue run (no time
shift, ops without nodes, the stored topic options), the queue client executing the stored ops against
a fake broker, and a short local-backend replay of a simulated queue run end to end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkers.errors import InputError
from harness.core.recorder import Recorder
from harness.core.spec import TestSpec
from harness.real.interpreter import Applied, Interpreter, monotonic_clock
from harness.tools.replay import replay_spec
from harness.tools.replay_plan import (
    Plan,
    controller_renaming,
    first_partition_leaders,
    load_plan,
    renamed_assignment,
    renaming,
    replay_generator,
)
from tests.harness.real import realtest
from workloads.protocol import Answer, Reply, Request
from workloads.queue import QueueWorkload
from workloads.queue.bodies import (
    Fetch,
    Fetched,
    InitProducerId,
    Metadata,
    MetadataReply,
    PartitionInfo,
    Produce,
    Produced,
    ProducerId,
)
from workloads.queue.options import QueueOptions

MS = 1_000_000
S = 1_000_000_000
MAIN = 4 * S  # when the simulated queue run's main phase began (topic led), on the simulator's clock


def state(node: str, t: int, leader: str | None) -> dict[str, Any]:
    return {"node": node, "time": t, "type": "state", "epoch": 1, "role": "follower", "leader": leader}


READY = [state("n1", 1_500 * MS, "n2"), state("n2", 1_500 * MS, "n2"), state("n3", 1_600 * MS, "n2")]

OPS = [
    {"at": 100 * MS, "client": 0, "f": "assign", "key": None, "value": ["t0-0", "t0-1"]},
    {"at": 200 * MS, "client": 1, "f": "send", "key": "t0-1", "value": 1},
    {"at": 300 * MS, "client": 0, "f": "poll", "key": "t0-1", "value": None},
    {"at": 11 * S, "client": 1, "f": "send", "key": "t0-0", "value": 2},  # past the time limit
]


def history() -> list[dict[str, Any]]:
    """The stored simulated history: on the simulator's clock, i.e. MAIN + each op's `at`."""
    rows = [
        (100 * MS, 0, "invoke", "assign", None),
        (100 * MS, 0, "ok", "assign", None),
        (200 * MS, 1, "invoke", "send", "t0-1"),
        (250 * MS, 1, "ok", "send", "t0-1"),  # completed before the poll started: the poll waits for it
        (300 * MS, 0, "invoke", "poll", "t0-1"),
        (320 * MS, 0, "ok", "poll", "t0-1"),
    ]
    out = []
    for i, (t, p, typ, f, key) in enumerate(rows):
        row: dict[str, Any] = {"index": i, "time": MAIN + t, "process": p, "type": typ, "f": f}
        if key is not None:
            row["key"] = key
        out.append(row)
    return out


def write_run(d: Path, backend: str, schedule: dict[str, Any], test: dict[str, Any], anomalies: list[str]) -> Path:
    d.mkdir(parents=True)
    (d / "test.json").write_text(json.dumps({"name": "q", "backend": backend, "workload": "queue", **test}))
    (d / "schedule.json").write_text(json.dumps(schedule))
    (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in READY))
    (d / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history()))
    (d / "results.json").write_text(json.dumps({"valid": False, "anomaly-types": anomalies}))
    return d


def queue_schedule(**kw: Any) -> dict[str, Any]:
    doc = {
        "format": 1,
        "workload": "queue",
        "seed": 7,
        "nodes": 3,
        "concurrency": 2,
        "time-limit": 10.0,
        "bugs": ["hw-from-leader"],
        "acks": -1,
        "partitions": 2,
        "replication-factor": 3,
        "min-isr": 3,
        "unclean": False,
        "nemesis": [{"at": 150 * MS, "package": "kill", "f": "kill", "value": "leader"}],
        "ops": OPS,
    }
    doc.update(kw)
    return doc


def led(node: str, partition: str, epoch: int, leader: str, t: int = 0) -> dict[str, Any]:
    return {
        "node": node,
        "time": t,
        "type": "partition-leader",
        "partition": partition,
        "leader_epoch": epoch,
        "leader": leader,
    }


def test_queue_renaming_maps_the_broken_partitions_followers_too() -> None:
    """no-truncate's minimal schedule paused n4 and n5 while n5 led t0-0 (followers n1, n2: the controller
    puts a partition on consecutive brokers); the fresh cluster has t0-0 on n4, n5, n1. Swapping only the
    leaders (n5 ↔ n4) would pause t0-0's leader and a follower; the renaming maps the replicas in order."""
    stored = {"t0-0": "n5", "t0-1": "n1", "t0-2": "n2"}
    ops = [{"at": 0, "client": 0, "f": "send", "key": "t0-0", "value": 1, "node": None}]
    plan = Plan(
        Path("."), "sim", TestSpec(workload="queue", seed=1, nodes=5, concurrency=1), 1.0, [], [], ops, leader="n1",
        partition_leaders=stored, failing_key="t0-0",
    )  # fmt: skip
    fresh = {"t0-0": "n4", "t0-1": "n5", "t0-2": "n1"}
    mapping = renaming(plan, "n1", fresh)
    assert [mapping.get(n, n) for n in ("n5", "n1", "n2")] == ["n4", "n5", "n1"]  # t0-0's replicas, in order
    paused = {mapping.get(n, n) for n in ("n4", "n5")}
    assert "n4" in paused and not paused & {"n5", "n1"}  # its leader and no follower, as in the stored run


def test_first_partition_leaders_go_by_leader_epoch_not_by_skewed_clocks() -> None:
    events = [
        led("n1", "t0-1", 1, "n1", t=100),  # a later leader epoch, on a clock running behind
        led("n2", "t0-1", 0, "n3", t=900),
        led("n3", "t0-0", 0, "n2", t=5),
        state("n1", 0, None),
    ]
    assert first_partition_leaders(events) == {"t0-0": "n2", "t0-1": "n3"}


def test_queue_renaming_puts_the_broken_partitions_leader_first(tmp_path: Path) -> None:
    """The simulator had n3 leading t0-1 (the partition that broke) and n2 as controller; the fresh cluster
    gives t0-1 to n1: a fault aimed at the stored n3 must hit n1, even at the cost of the controller."""
    stored = {"t0-0": "n2", "t0-1": "n3", "t0-2": "n1"}
    ops = [{"at": 0, "client": 0, "f": "send", "key": "t0-1", "value": 1, "node": None}]
    plan = Plan(
        Path("."),
        "sim",
        # one replica per partition: the leaders alone decide (no followers to place)
        TestSpec(
            workload="queue",
            seed=1,
            nodes=3,
            concurrency=1,
            workload_options=QueueOptions(replication_factor=1, min_isr=1),
        ),
        1.0,
        [],
        [],
        ops,
        leader="n2",
        partition_leaders=stored,
        failing_key="t0-1",
    )
    fresh = {"t0-0": "n3", "t0-1": "n1", "t0-2": "n2"}
    assert renaming(plan, "n1", fresh) == {"n2": "n3", "n3": "n1", "n1": "n2"}  # every partition leader matches
    # only t0-1 known: its leader first, then the controller (n2 → n1 is taken, so the fewest other moves)
    assert renaming(plan, "n2", {"t0-1": "n1"}) == {"n3": "n1", "n1": "n3"}
    # a used partition beats the controller; with nothing known about partitions, the controller is swapped
    plan.failing_key = None
    assert renaming(plan, "n3", {"t0-1": "n2", "t0-0": "n3"})["n3"] == "n2"
    assert renaming(plan, "n3", {}) == {"n2": "n3", "n3": "n2"}
    # the stored run's partition leaders are read from its events
    run = write_run(tmp_path / "run", "sim", queue_schedule(), {}, ["unseen"])
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in READY + [led("n2", "t0-1", 0, "n3")]))
    assert load_plan(run).partition_leaders == {"t0-1": "n3"}


def test_the_controller_renaming_places_the_stored_assignment_around_the_fresh_controller(tmp_path: Path) -> None:
    """no-truncate's stored run: controller n2, a follower of t0-0 (n1, n2, n3). A fresh cluster whose
    controller is n1 gets t0-0 on n2, n1, n3: its controller is again t0-0's first follower, so pausing
    t0-0's leader never pauses the controller; the schedule is renamed the same way."""
    assignment = {"t0-0": ["n1", "n2", "n3"], "t0-1": ["n2", "n3", "n1"]}
    run = write_run(tmp_path / "run", "sim", queue_schedule(assignment=assignment), {}, ["lost-write"])
    plan = load_plan(run)
    assert plan.assignment == assignment
    plan.leader = "n2"
    mapping = controller_renaming(plan, "n1")
    assert mapping == {"n2": "n1", "n1": "n2"}
    placed = renamed_assignment(plan, mapping)
    assert placed == {0: ["n2", "n1", "n3"], 1: ["n1", "n3", "n2"]}
    assert placed[0][1] == "n1"  # the fresh controller is t0-0's first follower, as the stored one was
    assert controller_renaming(plan, "n2") == {} and controller_renaming(plan, None) == {}
    w = QueueWorkload(["n1", "n2", "n3"], 0, partitions=2)
    w.place(placed)
    assert w.create_topic().assignments == ((0, ("n2", "n1", "n3")), (1, ("n1", "n3", "n2")))
    # runs stored before schedule.json had an assignment keep the old renaming; a bad one is refused
    assert load_plan(write_run(tmp_path / "old", "sim", queue_schedule(), {}, [])).assignment == {}
    bad = write_run(tmp_path / "bad", "sim", queue_schedule(assignment={"t0-0": ["n1", "n9"]}), {}, [])
    with pytest.raises(InputError, match="assignment of t0-0"):
        load_plan(bad)


def test_sim_queue_plan_keeps_times_ops_without_nodes_and_the_topic_options(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", "sim", queue_schedule(), {}, ["lost-write", "MajorityReachedHighWatermark"])
    plan = load_plan(run)
    assert plan.workload == "queue" and plan.shift_ns == 0 and plan.time_limit == 10.0  # no shift for queue runs
    assert [(o["at"], o["client"], o["f"], o["key"], o["value"], o["node"]) for o in plan.ops] == [
        (100 * MS, 0, "assign", None, ["t0-0", "t0-1"], None),
        (200 * MS, 1, "send", "t0-1", 1, None),
        (300 * MS, 0, "poll", "t0-1", None, None),
    ]
    # the history is brought to the main phase's origin (else nothing would have completed before anything):
    # the send waits for the assign and the kill, the poll for the send (done at 250 ms) and the kill
    assert [o["after"] for o in plan.ops] == [[], [0, 3], [1, 3]]
    assert plan.events[0]["after"] == [0]  # the assign had completed before the kill, the send had not
    assert plan.spec.workload_options == QueueOptions(acks="all", partitions=2, replication_factor=3, min_isr=3)
    target, mapped = plan.target()
    assert target == {"lost-write", "committed-divergence", "hw-regression"} and mapped  # no linearizability check
    spec = replay_spec(plan, {}, "docker")
    assert spec.workload == "queue" and spec.workload_options == plan.spec.workload_options  # every option
    assert spec.bugs == ("hw-from-leader",) and spec.backend == "docker"
    assert spec.db_options.lose_unsynced is True  # the simulator's crashes lose unsynced writes: so do the replay's
    assert replay_spec(plan, {}, "docker", keep_unsynced=True).db_options.lose_unsynced is False
    given = replay_spec(plan, {"acks": "1", "settle": 0.0}, "docker")  # options given replace the stored ones
    assert given.workload_options.acks == "1" and given.settle == 0.0


def test_real_queue_plan_takes_the_options_from_test_json(tmp_path: Path) -> None:
    ops = [{**o, "node": "n2" if o["f"] == "send" else None} for o in OPS]  # a real run's ops: node, or none
    doc = {k: v for k, v in queue_schedule(ops=ops).items() if k not in ("acks", "min-isr", "partitions")}
    test = {"acks": "1", "min-isr": 1, "partitions": 4, "allow": ["lost-write"], "nemesis": ["kill"]}
    plan = load_plan(write_run(tmp_path / "run", "docker", doc, test, ["inconsistent-offsets"]))
    options = plan.spec.workload_options
    assert options.acks == "1" and options.min_isr == 1 and options.partitions == 4
    assert options.allow == ("lost-write",) and plan.nemeses == ["kill"]
    assert [o["node"] for o in plan.ops] == [None, "n2", None]


def test_register_ops_still_need_a_node_and_other_workloads_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown workload 'kv'"):
        load_plan(write_run(tmp_path / "a", "sim", queue_schedule(workload="kv"), {}, []))
    (tmp_path / "b").mkdir()
    run = write_run(tmp_path / "b" / "run", "sim", queue_schedule(workload="register", bugs=[]), {}, [])
    (run / "test.json").write_text(json.dumps({"name": "r", "backend": "sim", "workload": "register"}))
    with pytest.raises(InputError, match="op on node None"):
        load_plan(run)


class FakeBroker:
    """A connection to an in-memory broker (every partition led by n1), at the queue bodies' level:
    Produce appends, Fetch returns the records from the requested offset; every request is noted in `calls`."""

    def __init__(self, logs: dict[int, list[int]], calls: list[Any]) -> None:
        self.logs, self.calls = logs, calls

    async def call(self, request: Request) -> Answer:
        body = request.body
        if isinstance(body, Metadata):
            return Reply(MetadataReply(tuple(PartitionInfo(p, "n1", 3) for p in range(2))))
        if isinstance(body, InitProducerId):
            return Reply(ProducerId(0, "none", 1, 0))
        if isinstance(body, Produce):
            log = self.logs.setdefault(body.partition, [])
            log.append(int(body.value))
            self.calls.append(("produce", body.partition, log[-1:]))
            return Reply(Produced(0, "none", len(log) - 1))
        assert isinstance(body, Fetch)
        log = self.logs.get(body.partition, [])
        self.calls.append(("fetch", body.partition, body.offset))
        records = tuple((off, str(v).encode()) for off, v in enumerate(log) if off >= body.offset)
        return Reply(Fetched(0, "none", len(log), records))

    async def close(self) -> None:
        pass


def test_the_queue_client_executes_the_stored_ops(tmp_path: Path) -> None:
    """Stored sends with their values, assigns with theirs, polls from the process's own positions; a poll
    after the process crashed (its assignment gone with it) fails without a request."""

    def op(at_ms: int, client: int, f: str, key: str | None, value: Any) -> dict[str, Any]:
        return {"at": at_ms * MS, "client": client, "f": f, "key": key, "value": value, "node": None}

    ops = [
        op(10, 0, "assign", None, ["t0-1"]),
        op(20, 1, "send", "t0-1", 41),
        op(40, 1, "send", "t0-1", 42),
        op(60, 0, "poll", "t0-1", None),  # reads 41 and 42 from offset 0
        op(80, 1, "send", "t0-1", 43),
        op(100, 0, "poll", "t0-1", None),  # from its position 2: reads 43 only
        op(120, 0, "poll", "t0-0", None),  # never assigned: not-assigned
        op(140, 1, "send", "t0-0", 7),
    ]
    plan = Plan(Path("."), "sim", TestSpec(workload="queue", seed=1, nodes=3, concurrency=2), 0.4, [], [], ops)
    workload = QueueWorkload(["n1"], seed=1, partitions=2)
    logs: dict[int, list[int]] = {}
    calls: list[Any] = []
    clock = monotonic_clock()

    async def nemesis(o: dict[str, Any]) -> Applied:
        return Applied(o["value"], o["value"])

    rec = Recorder(clock, tmp_path / "h.jsonl")
    interp = Interpreter(2, workload.client, nemesis, rec, clock, transport=lambda: FakeBroker(logs, calls))

    async def go() -> None:
        try:
            await interp.run(replay_generator(plan))
        finally:
            await interp.close()

    asyncio.run(go())
    assert logs == {1: [41, 42, 43], 0: [7]}  # the stored values, on the stored partitions
    assert [c for c in calls if c[0] == "fetch"] == [("fetch", 1, 0), ("fetch", 1, 2)]  # only t0-0's poll fails
    done = [(o.process, o.f, o.key, o.type, o.value) for o in rec.ops if o.type != "invoke"]
    assert (0, "poll", "t0-1", "ok", [[0, 41], [1, 42]]) in done
    assert (0, "poll", "t0-1", "ok", [[2, 43]]) in done
    assert (0, "poll", "t0-0", "fail", None) in done
    assert (1, "send", "t0-0", "ok", [0, 7]) in done
    assert [(o["client"], o["f"], o["key"], o["value"]) for o in interp.ops] == [
        (o["client"], o["f"], o["key"], o["value"]) for o in ops
    ]


@pytest.mark.slow
def test_local_replay_of_a_simulated_queue_run(tmp_path: Path) -> None:
    """A short simulated queue run with kills, replayed on local processes: the same ops from the same slots."""
    sim = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--workload", "queue", "--backend", "sim"]
        + ["--store", str(tmp_path / "sim"), "--nodes", "3", "--concurrency", "2", "--time-limit", "6"]
        + ["--nemesis", "kill", "--interval", "1", "--seed", "4", "--partitions", "2", "--min-isr", "1", "-q"],
        cwd=realtest.ROOT,
        capture_output=True,
        text=True,
    )
    assert sim.returncode == 0, sim.stderr[-2000:]
    source = realtest.latest(tmp_path / "sim")
    plan = load_plan(source)
    assert plan.ops and plan.events
    assert plan.spec.workload_options.partitions == 2 and plan.spec.workload_options.min_isr == 1
    cmd = [sys.executable, "-m", "harness.cli", "replay", str(source), "--backend", "local"]
    cmd += ["--store", str(tmp_path / "real"), "--times", "1"]
    r = subprocess.run(cmd, cwd=realtest.ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]  # a valid run stays valid
    assert "reproduced in 0 of 1 attempts" in r.stderr and "partitions 2" in r.stderr
    attempt = Path(json.loads(r.stdout.strip().splitlines()[-1])["runs"][0]["run"])
    test = json.loads((attempt / "test.json").read_text())
    assert test["workload"] == "queue" and test["partitions"] == 2 and test["min-isr"] == 1 and test["acks"] == "all"
    assert test["settle-seconds"] == 10.0  # the simulator's pause before its final reads
    # the topic was created with the stored assignment, renamed so the fresh controller plays the stored
    # controller's part: every partition's first leader is the stored one's, renamed
    mapping = test["replay"].get("node-renaming", {})
    fresh = first_partition_leaders([json.loads(x) for x in (attempt / "events.jsonl").read_text().splitlines() if x])
    stored = plan.partition_leaders
    assert set(stored) == set(fresh) == set(plan.assignment) == {"t0-0", "t0-1"}
    assert all(mapping.get(stored[k], stored[k]) == fresh[k] for k in stored), (mapping, stored, fresh)
    assert "topic placed as" in r.stderr
    schedule = json.loads((attempt / "schedule.json").read_text())
    want = sorted(((o["client"], o["f"], o["key"], o["value"]) for o in plan.ops), key=str)
    got = sorted(((o["client"], o["f"], o["key"], o["value"]) for o in schedule["ops"]), key=str)
    assert got == want
    assert [e["f"] for e in schedule["nemesis"]] == [e["f"] for e in plan.events]
    _, cluster = realtest.cluster_of(attempt)
    assert realtest.leftovers(cluster) == []
