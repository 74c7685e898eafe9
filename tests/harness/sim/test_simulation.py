"""Whole simulated tests: determinism, clean sweeps valid, every seeded bug caught."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.runs import simulate
from harness.sim.runtime import SimRuntime

ALL = ["partition", "kill", "pause", "clock"]


def run(seed: int, bugs: list[str] | None = None, time_limit: float = 15.0, **kw: Any) -> dict[str, Any]:
    checked = simulate(TestSpec.of(seed=seed, time_limit=time_limit, bugs=bugs or [], **kw))
    result, verdict = checked.sim, checked.results
    verdict["sim"] = result.stats
    return verdict


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_same_seed_same_history(seed: int) -> None:
    a = SimRuntime(TestSpec(seed=seed, time_limit=8)).run()
    b = SimRuntime(TestSpec(seed=seed, time_limit=8)).run()
    assert a.stats["history-sha256"] == b.stats["history-sha256"]
    assert a.events == b.events and a.schedule == b.schedule


def test_different_seeds_differ() -> None:
    a = SimRuntime(TestSpec(seed=1, time_limit=5)).run()
    b = SimRuntime(TestSpec(seed=2, time_limit=5)).run()
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
    first = SimRuntime(spec).run()
    doc = first.schedule_document(spec)
    assert doc["ops"] and all({"at", "client", "f", "key", "value", "node"} <= set(op) for op in doc["ops"])
    again = SimRuntime(spec, SimPlan(schedule=doc["nemesis"], ops=doc["ops"])).run()
    assert again.stats["history-sha256"] == first.stats["history-sha256"]


@pytest.mark.parametrize(
    ("clocks", "source"), [("wall", "monotonic"), ("wall", "wall"), ("timers", "monotonic"), ("timers", "wall")]
)
def test_a_clock_fault_moves_the_timers_that_read_the_wall_clock(clocks: str, source: str) -> None:
    """A +30 s bump always shows in the nodes' events' times. With clock.source=wall (the default, Kafka's
    Time.milliseconds()) it fires every follower's fetch timeout: elections; with clock.source=monotonic (which
    libfaketime leaves alone) it starts none. Runs stored with "clocks": "timers" let it fire every timer."""
    bump = {"at": 2_000_000_000, "package": "clock", "f": "bump-clock"}
    bump["value"] = {f"n{i}": {"delta-ms": 30_000, "drift-ppm": 0} for i in (1, 2, 3)}
    # one of the three is the leader: its write commits while the clocks are bumped
    writes = [
        {"at": at, "client": 0, "f": "write", "key": "r1", "value": i, "node": f"n{i}"}
        for i, at in ((1, 2_500_000_000), (2, 2_800_000_000), (3, 3_100_000_000))
    ]
    spec = TestSpec.of(seed=5, nodes=3, concurrency=1, time_limit=4, clock_source=source)
    plan = SimPlan([bump], writes, clocks=clocks)
    sim = SimRuntime(spec, plan)
    result = sim.run()
    after = [e for e in result.events if e["type"] == "state" and e["time"] >= sim.main_start + 30 * 10**9]
    epochs = {e["epoch"] for e in result.events if e["type"] == "state"}
    doc = result.schedule_document(spec, plan)
    assert doc["clocks"] == clocks and doc["test"]["kraftwerk"]["clock-source"] == source
    if clocks == "wall" and source == "monotonic":
        assert epochs == {0, 1} and after == []
        hw_times = [e["time"] for e in result.events if e["type"] == "hw"]
        assert max(hw_times) >= sim.main_start + 30 * 10**9  # stamped with the bumped wall clock
    else:
        assert max(epochs) > 1 and after  # every follower's fetch timeout fired at the bump: elections


@pytest.mark.parametrize("seed", [3, 11])
def test_without_clock_faults_the_clock_source_changes_nothing(seed: int) -> None:
    """Seeds without the clock nemesis give the same history on either clock source (the wall clock is the true
    time until a clock fault moves it), so runs stored before clock.source replay unchanged."""
    digests = set()
    for source in ("wall", "monotonic"):
        spec = TestSpec.of(seed=seed, time_limit=10, nemeses=("partition", "kill", "pause"), clock_source=source)
        digests.add(SimRuntime(spec).run().stats["history-sha256"])
    assert len(digests) == 1


def test_wall_clock_source_is_the_older_timers_mode() -> None:
    """clock.source=wall simulates clock faults as runs stored with "clocks": "timers" did: same history."""
    common: dict[str, Any] = {"seed": 7, "time_limit": 10, "nemeses": ("clock", "partition")}
    a = SimRuntime(TestSpec.of(clock_source="wall", **common)).run()
    b = SimRuntime(TestSpec.of(clock_source="monotonic", **common), SimPlan(clocks="timers")).run()
    c = SimRuntime(TestSpec.of(clock_source="monotonic", **common)).run()
    assert a.stats["history-sha256"] == b.stats["history-sha256"] != c.stats["history-sha256"]
