"""Our KV marks its compare failures `cas-mismatch`, truthfully: clean simulated runs stay valid
with the opt-in reading, and the marks are there to be read."""

from __future__ import annotations

from checkers.linearizable import check
from harness.core.spec import TestSpec
from harness.sim.runs import simulate


def test_clean_runs_stay_valid_reading_compare_failures() -> None:
    marked = 0
    for seed in (1, 2):
        checked = simulate(TestSpec(seed=seed, time_limit=15.0, nemeses=("partition", "kill")))
        history = checked.sim.recorder.history("history.jsonl")
        fails = [op for op in history.operations() if op.f == "cas" and op.type == "fail"]
        marked += sum(1 for op in fails if op.complete is not None and op.complete.error == "cas-mismatch")
        assert check(history, "cas-register", time_limit=60)["valid"] is True
        assert check(history, "cas-register", time_limit=60, cas_mismatch=True)["valid"] is True
    assert marked > 0
