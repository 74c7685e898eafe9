"""Queue runs driven by stored client operations: identical replay, well-formed shrunk plans."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.runs import Checked, from_schedule, simulate

ACKS = {-1: "all", 1: "1", 0: "0"}  # the producer's acks → --acks
SETTINGS = settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def stored(checked: Checked) -> dict[str, Any]:
    """schedule.json as it would be written and read back."""
    return json.loads(json.dumps(checked.sim.schedule_document(checked.spec, checked.plan)))


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    acks=st.sampled_from([-1, 1, 0]),
    bugs=st.sampled_from([[], ["hw-from-leader"], ["no-truncate"], ["stale-leader-produce"]]),
)
def test_queue_plan_replays_byte_identically(seed: int, acks: int, bugs: list[str]) -> None:
    first = simulate(TestSpec.of(seed=seed, time_limit=3, workload="queue", acks=ACKS[acks], bugs=bugs))
    doc = stored(first)
    assert doc["test"]["workload"] == "queue" and doc["test"]["acks"] == ACKS[acks] and doc["ops"]
    assert {op["f"] for op in doc["ops"]} <= {"assign", "send", "poll"}
    again = simulate(*from_schedule(doc))
    assert again.digest == first.digest
    assert again.results["valid"] == first.results["valid"]


@SETTINGS
@given(seed=st.integers(0, 10_000), keep=st.lists(st.booleans(), min_size=64, max_size=64))
def test_any_subset_of_a_plan_is_well_formed_and_deterministic(seed: int, keep: list[bool]) -> None:
    """What shrink does to a plan (drop any operations) never invents an anomaly on a correct cluster."""
    first = simulate(TestSpec(seed=seed, time_limit=4, workload="queue"))
    doc = stored(first)
    doc["ops"] = [op for i, op in enumerate(doc["ops"]) if keep[i % len(keep)]]
    a = simulate(*from_schedule(doc))
    b = simulate(*from_schedule(doc))
    assert a.digest == b.digest
    # no anomaly; the run may be unknown only by the stats rule (an operation type the kept ops never
    # completed ok: a plan without sends, say, tested nothing of them)
    assert a.valid is not False and not a.anomalies, sorted(a.anomalies)
    assert a.valid is True or a.results["stats"]["valid"] == "unknown"
    # a poll of a partition its process was not assigned (its assign was dropped, or a crash reopened the
    # client unassigned) fails at once without a request, as on real clusters; no other op fails so
    assigned: dict[Any, set[str]] = {}
    unassigned: dict[Any, bool] = {}
    for op in a.sim.recorder.ops:
        if op.process == "nemesis":
            continue
        if op.type == "invoke":
            if op.f == "assign":
                assigned[op.process] = set(op.value)
            unassigned[op.process] = op.f == "poll" and op.key not in assigned.get(op.process, set())
        elif unassigned.pop(op.process):
            assert (op.type, op.error, op.node) == ("fail", "not-assigned", None), op
        else:
            assert op.error != "not-assigned", op


def test_unassigned_polls_fail_and_assign_resets_positions() -> None:
    s = 10**9
    ops = [
        {"at": 0, "client": 0, "f": "poll", "key": "t0-0", "value": None},  # nothing assigned yet: fails
        {"at": 1 * s, "client": 0, "f": "send", "key": "t0-0", "value": 1},
        {"at": 2 * s, "client": 0, "f": "assign", "key": None, "value": ["t0-0"]},
        {"at": 3 * s, "client": 0, "f": "poll", "key": "t0-0", "value": None},
        {"at": 4 * s, "client": 0, "f": "poll", "key": "t0-0", "value": None},
        {"at": 5 * s, "client": 0, "f": "assign", "key": None, "value": ["t0-0"]},
        {"at": 6 * s, "client": 0, "f": "poll", "key": "t0-0", "value": None},
        {"at": 7 * s, "client": 0, "f": "poll", "key": "t0-1", "value": None},  # not assigned: fails
    ]
    spec = TestSpec(seed=5, time_limit=8, workload="queue", concurrency=1, nemeses=[])
    checked = simulate(spec, SimPlan(schedule=[], ops=ops))
    assert checked.valid is True, sorted(checked.anomalies)
    main_end = checked.main_start + 8 * s
    done = [op for op in checked.sim.recorder.ops if op.type != "invoke" and op.time < main_end]
    assert [op.f for op in done] == ["poll", "send", "assign", "poll", "poll", "assign", "poll", "poll"]
    unassigned, send, _, poll1, poll2, _, poll3, unassigned2 = done
    for op in (unassigned, unassigned2):
        assert (op.type, op.error, op.node) == ("fail", "not-assigned", None)
    assert send.type == "ok" and send.value == [0, 1]
    assert poll1.value == [[0, 1]] and poll2.value == []  # the position moved past offset 0
    assert poll3.value == [[0, 1]]  # the second assign reset it to the start
    # what ran is what is stored
    assert [o["f"] for o in checked.sim.ops] == ["poll", "send", "assign", "poll", "poll", "assign", "poll", "poll"]
    assert simulate(*from_schedule(stored(checked))).digest == checked.digest


def test_stored_queue_options_round_trip() -> None:
    spec = TestSpec.of(seed=2, time_limit=2, workload="queue", acks="1", partitions=2, min_isr=1, unclean=True)
    doc = stored(simulate(spec))
    assert doc["test"]["acks"] == "1"  # the test, embedded
    back, plan = from_schedule(doc)
    assert back == spec
    assert (plan.schedule, plan.ops) == (doc["nemesis"], doc["ops"])
