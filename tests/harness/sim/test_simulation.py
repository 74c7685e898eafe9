"""Whole simulated tests: determinism, clean sweeps valid, every seeded bug caught."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checks import check_run
from harness.sim.cluster import SimPlan, Simulation
from harness.spec import TestSpec

ALL = ["partition", "kill", "pause", "clock"]


def run(seed: int, bugs: list[str] | None = None, time_limit: float = 15.0, **kw: Any) -> dict[str, Any]:
    result = Simulation(TestSpec(seed=seed, time_limit=time_limit, bugs=bugs or [], **kw)).run()
    verdict = check_run(result.recorder.history(), result.events, result.logs, result.invariants, "cas-register", 120)
    verdict["sim"] = result.stats
    return verdict


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_same_seed_same_history(seed: int) -> None:
    a = Simulation(TestSpec(seed=seed, time_limit=8)).run()
    b = Simulation(TestSpec(seed=seed, time_limit=8)).run()
    assert a.stats["history-sha256"] == b.stats["history-sha256"]
    assert a.events == b.events and a.schedule == b.schedule


def test_different_seeds_differ() -> None:
    a = Simulation(TestSpec(seed=1, time_limit=5)).run()
    b = Simulation(TestSpec(seed=2, time_limit=5)).run()
    assert a.stats["history-sha256"] != b.stats["history-sha256"]


def test_a_clean_run_does_real_work() -> None:
    verdict = run(11, time_limit=20)
    assert verdict["valid"] is True, verdict
    stats = verdict["stats"]
    assert stats["ok"] > 300, stats
    assert verdict["sim"]["restarts"] >= 1
    assert verdict["sim"]["unread-keys"] == []
    assert verdict["epochs"]["stats"]["epochs"] >= 2


@pytest.mark.slow
@pytest.mark.parametrize("block", range(10))
def test_sweep_all_nemeses_valid(block: int) -> None:
    """200 seeds (10 blocks of 20) with every nemesis: every run valid."""
    bad = []
    for seed in range(block * 20, block * 20 + 20):
        verdict = run(seed)
        if verdict["valid"] is not True:
            bad.append((seed, verdict.get("anomaly-types"), verdict["linearizable"].get("cause")))
    assert not bad, bad


BUGS = ["forget-vote", "restart-as-leader", "vote-ignores-log", "stale-read", "commit-old-epoch", "lazy-flush"]


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS)
def test_each_bug_is_caught_within_a_few_seeds(bug: str) -> None:
    for seed in range(10):
        verdict = run(seed, [bug], time_limit=30)
        if verdict["valid"] is False:
            return
    pytest.fail(f"{bug} was not detected in 10 seeds")


@pytest.mark.parametrize("bugs", [[], ["stale-read"]])
def test_stored_schedule_replays_byte_identically(bugs: list[str]) -> None:
    """schedule.json (nemesis events + every client op) drives the run again without the random source."""
    spec = TestSpec(seed=21, time_limit=12, bugs=bugs)
    first = Simulation(spec).run()
    doc = first.schedule_document(spec)
    assert doc["ops"] and all({"at", "client", "f", "key", "value", "node"} <= set(op) for op in doc["ops"])
    again = Simulation(spec, SimPlan(schedule=doc["nemesis"], ops=doc["ops"])).run()
    assert again.stats["history-sha256"] == first.stats["history-sha256"]


@pytest.mark.parametrize("clocks", ["wall", "timers"])
def test_a_clock_fault_moves_the_wall_clock_and_moves_timers_only_in_older_runs(clocks: str) -> None:
    """A real node's timers run on the monotonic clock, which libfaketime leaves alone: a +30 s bump shows in
    its events' times and starts no election. Runs stored with "clocks": "timers" let it fire every timer."""
    bump = {"at": 2_000_000_000, "package": "clock", "f": "bump-clock"}
    bump["value"] = {f"n{i}": {"delta-ms": 30_000, "drift-ppm": 0} for i in (1, 2, 3)}
    # one of the three is the leader: its write commits while the clocks are bumped
    writes = [
        {"at": at, "client": 0, "f": "write", "key": "r1", "value": i, "node": f"n{i}"}
        for i, at in ((1, 2_500_000_000), (2, 2_800_000_000), (3, 3_100_000_000))
    ]
    spec, plan = TestSpec(seed=5, nodes=3, concurrency=1, time_limit=4), SimPlan([bump], writes, clocks=clocks)
    sim = Simulation(spec, plan)
    result = sim.run()
    after = [e for e in result.events if e["type"] == "state" and e["time"] >= sim.main_start + 30 * 10**9]
    epochs = {e["epoch"] for e in result.events if e["type"] == "state"}
    if clocks == "wall":
        assert epochs == {0, 1} and after == [] and result.schedule_document(spec, plan)["clocks"] == "wall"
        hw_times = [e["time"] for e in result.events if e["type"] == "hw"]
        assert max(hw_times) >= sim.main_start + 30 * 10**9  # stamped with the bumped wall clock
    else:
        assert max(epochs) > 1 and after  # every follower's fetch timeout fired at the bump: elections
