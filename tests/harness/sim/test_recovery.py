"""The recovery phase in the simulator (harness.core.run): after the heal the final reads wait the settle and
then until a leader is known to every running node (schedule.json `"recover": "settle-ready"`); runs stored
before that replay with their fixed 10 s pause (`"recover"` absent: `pause`), byte for byte."""

from __future__ import annotations

from typing import Any

from harness.core.phases import PHASES, SETTLE
from harness.core.runtime import PAUSE, SETTLE_READY
from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.runs import Checked, from_schedule, simulate

S = 1_000_000_000
# a 4 s run of 3 nodes: a few writes, then the leader killed half a second before the heal restarts it
KILL_THE_LEADER = [{"at": 3_500_000_000, "package": "kill", "f": "kill", "value": "leader"}]
WRITES = [
    {"at": S * (1 + i) // 2, "client": 0, "f": "write", "key": f"r{i}", "value": i, "node": f"n{i % 3 + 1}"}
    for i in range(4)
]


def killed_at_the_end(settle: float, recover: str = SETTLE_READY) -> Checked:
    spec = TestSpec(seed=3, nodes=3, concurrency=2, time_limit=4, nemeses=("kill",), settle=settle)
    return simulate(spec, SimPlan(schedule=KILL_THE_LEADER, ops=WRITES, recover=recover))


def final_start(checked: Checked) -> int:
    """When the final phase began, after the heal (ns)."""
    phases = checked.run.phases
    return int(phases["final"][0] - phases["heal"])


def test_final_reads_wait_for_a_leader_known_to_every_node_when_that_takes_longer_than_the_settle() -> None:
    checked = killed_at_the_end(settle=0.0)
    waited = final_start(checked)
    assert 0 < waited < PHASES.recovery * S  # the new leader's election and the restarted node learning it
    assert checked.results["run"]["recovered"] is True and checked.valid is True
    ops = checked.sim.recorder.ops
    first_read = next(op for op in ops if op.time >= checked.run.phases["final"][0] and op.process != "nemesis")
    assert first_read.time - checked.run.phases["heal"] == waited  # the reads start as soon as it is ready
    # a fixed pause (runs stored before "recover") starts them at the settle, ready or not
    paused = killed_at_the_end(settle=0.0, recover=PAUSE)
    assert final_start(paused) == 0 and paused.results["run"]["recovered"] is None
    assert paused.digest != checked.digest


def test_a_cluster_ready_when_the_settle_ends_gives_the_history_of_the_fixed_pause() -> None:
    """What kept (nearly) every simulator history byte for byte: the readiness is checked when the settle ends
    and, when it holds, no event runs before the final reads."""
    ready = killed_at_the_end(settle=SETTLE)
    paused = killed_at_the_end(settle=SETTLE, recover=PAUSE)
    assert final_start(ready) == final_start(paused) == SETTLE * S
    assert ready.digest == paused.digest


def stored(checked: Checked) -> dict[str, Any]:
    return checked.sim.schedule_document(checked.spec, checked.plan)


def test_a_run_stored_without_recover_replays_with_the_fixed_pause() -> None:
    doc = stored(killed_at_the_end(settle=SETTLE))
    assert doc["recover"] == SETTLE_READY and doc["test"]["settle-seconds"] == SETTLE  # the test, embedded
    older = {k: v for k, v in doc.items() if k != "recover"}
    spec, plan = from_schedule(older)
    assert plan.recover == PAUSE and spec.settle == SETTLE == 10.0
    replayed = simulate(spec, plan)
    assert final_start(replayed) == 10 * S and replayed.results["run"]["recovered"] is None
    assert stored(replayed)["recover"] == PAUSE  # stored again, it keeps replaying the old way


def test_the_recover_mode_and_a_shorter_settle_are_stored_and_replay_byte_for_byte() -> None:
    first = killed_at_the_end(settle=0.5)
    doc = stored(first)
    assert doc["recover"] == SETTLE_READY and doc["test"]["settle-seconds"] == 0.5
    spec, plan = from_schedule(doc)
    assert spec.settle == 0.5 and plan.recover == SETTLE_READY
    again = simulate(spec, plan)
    assert again.digest == first.digest and final_start(again) == final_start(first)
