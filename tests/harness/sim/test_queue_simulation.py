"""The queue workload in the simulator: the safe profile stays valid, acks=1 loses writes, broker bugs are caught."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.spec import TestSpec
from harness.sim.runs import simulate
from harness.sim.runtime import SimRuntime


def run(seed: int, time_limit: float = 20.0, **kw: Any) -> dict[str, Any]:
    checked = simulate(TestSpec.of(seed=seed, time_limit=time_limit, workload="queue", **kw), check_time_limit=60)
    verdict = checked.results
    verdict["sim"] = checked.sim.stats
    return verdict


def test_safe_profile_run_is_valid_and_does_work() -> None:
    verdict = run(7)
    assert verdict["valid"] is True, verdict.get("anomaly-types")
    sends = verdict["queue"]["stats"]["sends"]
    assert sends["ok"] > 100, sends
    assert verdict["sim"]["unread-keys"] == []


def test_same_seed_same_history() -> None:
    a = SimRuntime(TestSpec(seed=3, time_limit=6, workload="queue")).run()
    b = SimRuntime(TestSpec(seed=3, time_limit=6, workload="queue")).run()
    assert a.stats["history-sha256"] == b.stats["history-sha256"]


def test_schedule_json_records_the_replica_assignment_the_main_phase_began_with() -> None:
    spec = TestSpec(seed=3, time_limit=2, workload="queue", nodes=3)
    result = SimRuntime(spec).run()
    doc = result.schedule_document(spec)
    assignment = doc["assignment"]
    assert sorted(assignment) == ["t0-0", "t0-1", "t0-2"]
    for replicas in assignment.values():
        assert sorted(replicas) == ["n1", "n2", "n3"]  # replication factor 3 on 3 nodes
    # each partition's first leader (lowest leader epoch) is its preferred leader, the first replica
    first: dict[str, tuple[int, str]] = {}
    for e in result.events:
        if (
            e.get("type") == "partition-leader"
            and e.get("leader")
            and (e["partition"] not in first or e["leader_epoch"] < first[e["partition"]][0])
        ):
            first[e["partition"]] = (e["leader_epoch"], e["leader"])
    assert {p: leader for p, (_, leader) in first.items()} == {p: r[0] for p, r in assignment.items()}


@pytest.mark.slow
@pytest.mark.parametrize("block", range(5))
def test_sweep_safe_profile_valid(block: int) -> None:
    """acks=all, replication factor 3, min ISR 2, no unclean election: 100 seeds, every nemesis, all valid."""
    bad = []
    for seed in range(block * 20, block * 20 + 20):
        verdict = run(seed)
        if verdict["valid"] is not True:
            bad.append((seed, verdict.get("anomaly-types")))
    assert not bad, bad


@pytest.mark.slow
def test_acks_1_with_leader_kills_loses_writes() -> None:
    """Expected, and documented: acks=1 answers before any follower has the record."""
    for seed in range(10):
        verdict = run(seed, time_limit=30, acks="1")
        if "lost-write" in verdict.get("anomaly-types", []):
            return
    pytest.fail("acks=1 never lost a write in 10 seeds")


@pytest.mark.slow
@pytest.mark.parametrize(
    "bug", ["hw-from-leader", "no-truncate", "stale-leader-produce", "lazy-flush", "dedup-window-1"]
)
def test_each_broker_bug_is_caught(bug: str) -> None:
    for seed in range(15):
        if run(seed, time_limit=30, bugs=[bug])["valid"] is False:
            return
    pytest.fail(f"{bug} was not detected in 15 seeds")
