"""`run_test` (harness.core.run) over a scripted Runtime: the order of the phases, their limits
(harness.core.phases), what run.json records, and the one call that judges the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.registry import observed_of
from harness.core import run as run_module
from harness.core.phases import PHASES
from harness.core.recorder import Recorder
from harness.core.run import run_test
from harness.core.runtime import PAUSE, SETTLE_READY, Collected, NotReady
from harness.core.spec import TestSpec
from harness.store.runs import RunDir
from workloads import generator as gen

S = 1_000_000_000
NAMES = ["n1", "n2", "n3"]


class Workload:
    model = "cas-register"

    def setup(self) -> gen.Generator | None:
        return None

    def final(self, keys: list[str], threads: int) -> gen.Generator:
        return gen.lift([{"f": "read", "key": k} for k in keys])  # the runtime below reads them itself


class Scripted:
    """A runtime whose clock moves only as the phases say; a leader known to all `ready_after` s after the heal."""

    def __init__(self, ready_after: float = 1.0, down: tuple[str, ...] = (), recovery: str = SETTLE_READY) -> None:
        self.names = NAMES
        self.workload = Workload()
        self.recovery = recovery
        self.stats: dict[str, Any] = {}
        self.ready_after, self.down = ready_after, down
        self.t = 0
        self.heal_at: int | None = None
        self.calls: list[tuple[Any, ...]] = []
        self.recorder: Recorder | None = None

    def __enter__(self) -> Scripted:
        self.calls.append(("enter",))
        return self

    def __exit__(self, *exc: object) -> None:
        self.calls.append(("exit",))

    def now(self) -> int:
        return self.t

    def log(self, message: str) -> None:
        pass

    def set_phase(self, name: str, seconds: float | None = None) -> None:
        self.calls.append(("phase", name, seconds))

    def wait_ready(self, timeout: float, nodes: Any = None) -> str | None:
        self.calls.append(("wait_ready", round(timeout, 3), nodes))
        if self.heal_at is None:
            self.t += S
            return "n1"
        ready = self.heal_at + int(self.ready_after * S)
        if ready > self.t + timeout * S:
            self.t += int(timeout * S)
            raise NotReady(f"no leader known to every node within {timeout:g} s")
        self.t = max(self.t, ready)
        return "n1"

    def prepare(self, leader: str | None) -> None:
        self.calls.append(("prepare", leader))

    def setup(self, generator: Any, timeout: float) -> None:
        raise AssertionError("the workload has no setup")

    def main(self, recorder: Recorder, time_limit: float) -> int:
        self.calls.append(("main", time_limit))
        self.recorder, start = recorder, self.t
        recorder.record(0, "invoke", "write", 1, key="r1")
        self.t += int(time_limit * S)
        recorder.record(0, "ok", "write", 1, key="r1", node="n1")
        return start

    def heal(self) -> None:
        self.calls.append(("heal",))
        assert self.recorder is not None
        self.recorder.record("nemesis", "info", "start", ["n2"])
        self.heal_at = self.t

    def sleep_until(self, time: int) -> None:
        self.calls.append(("sleep_until", (time - (self.heal_at or 0)) / S))
        self.t = max(self.t, time)

    def running(self) -> list[str]:
        return [n for n in NAMES if n not in self.down]

    def ops(self) -> list[dict[str, Any]]:
        return [{"at": 0, "client": 0, "f": "write", "key": "r1", "value": 1, "node": "n1"}]

    def final(self, generator: Any, seconds: float) -> None:
        self.calls.append(("final", generator is not None, seconds))
        assert self.recorder is not None
        if generator is not None:
            self.recorder.record(1, "invoke", "read", None, key="r1")
            self.t += S // 10
            self.recorder.record(1, "ok", "read", 1, key="r1", node="n1")

    def collect(self) -> Collected:
        self.calls.append(("collect",))
        return Collected([], {}, {}, None, [{"node": "n3", "reason": "illegal"}] if self.down else [])

    def schedule_document(self) -> dict[str, Any]:
        return {"ops": self.ops()}


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every call of check_run (its arguments), each answered valid."""
    calls: list[tuple[Any, ...]] = []

    def check_run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append((args, kwargs))
        return {"valid": True}

    monkeypatch.setattr(run_module, "check_run", check_run)
    return calls


SPEC = TestSpec(nodes=3, time_limit=5.0, seed=1)


def test_the_phases_run_in_order_with_their_limits_and_the_run_is_judged_once(
    judged: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    runtime = Scripted(ready_after=2.0)
    run = run_test(SPEC, runtime, RunDir(tmp_path))
    steps = [c for c in runtime.calls if c[0] != "phase"]
    assert steps == [
        ("enter",),
        ("wait_ready", PHASES.ready, None),
        ("prepare", "n1"),
        ("main", 5.0),
        ("heal",),
        ("sleep_until", SPEC.settle),  # at least the settle from the heal …
        ("wait_ready", PHASES.recovery - SPEC.settle, NAMES),  # … then a leader, until 30 s from the heal
        ("final", True, PHASES.final),
        ("collect",),
        ("exit",),
    ]
    assert [c[1] for c in runtime.calls if c[0] == "phase"] == ["setup", "main", "heal", "recover", "final", "done"]
    assert len(judged) == 1 and run.results["valid"] is True
    assert run.stats["recovered"] is True and run.stats["unread-keys"] == []
    doc = json.loads((tmp_path / "run.json").read_text())
    heal = 1 * S + 5 * S  # ready after 1 s, then the 5 s main phase
    assert doc == {
        "phases": {"main": [S, heal], "heal": heal, "final": [heal + 10 * S, heal + 10 * S + S // 10]},
        "invariants": None,
        "node-fatal": [],
    }
    assert json.loads((tmp_path / "results.json").read_text())["run"]["history-sha256"] == run.digest


def test_a_cluster_ready_only_after_the_settle_starts_its_final_reads_then(judged: list[tuple[Any, ...]]) -> None:
    run = run_test(SPEC, Scripted(ready_after=14.5))
    assert run.phases["final"][0] - run.phases["heal"] == 14.5 * S and run.stats["recovered"] is True


def test_a_cluster_not_ready_within_the_recovery_limit_is_read_anyway(judged: list[tuple[Any, ...]]) -> None:
    run = run_test(SPEC, Scripted(ready_after=60))
    assert run.phases["final"][0] - run.phases["heal"] == PHASES.recovery * S
    assert run.stats["recovered"] is False and run.stats["unread-keys"] == []


def test_without_a_majority_of_running_nodes_there_are_no_final_reads(judged: list[tuple[Any, ...]]) -> None:
    runtime = Scripted(down=("n2", "n3"))
    run = run_test(SPEC, runtime)
    assert ("final", False, PHASES.final) in runtime.calls
    assert run.stats["recovered"] is False and run.stats["exited-by-themselves"] == ["n2", "n3"]
    assert run.stats["unread-keys"] == ["r1"]
    # a node that stopped itself on an illegal state makes the run invalid, through the one check
    ((args, _kwargs),) = judged
    assert args[4] == {"valid": False, "node-fatal": run.collected.node_fatal, "anomaly-types": ["node-fatal"]}


def test_a_fixed_pause_reads_at_the_settle_without_asking_for_a_leader(judged: list[tuple[Any, ...]]) -> None:
    runtime = Scripted(ready_after=60, recovery=PAUSE)
    run = run_test(SPEC, runtime)
    assert [c for c in runtime.calls if c[0] == "wait_ready"] == [("wait_ready", PHASES.ready, None)]
    assert run.phases["final"][0] - run.phases["heal"] == 10 * S and run.stats["recovered"] is None


def test_a_fresh_cluster_that_never_becomes_ready_is_torn_down_and_raises() -> None:
    class Broken(Scripted):
        def wait_ready(self, timeout: float, nodes: Any = None) -> str | None:
            raise NotReady("no leader")

    runtime = Broken()
    with pytest.raises(NotReady):
        run_test(SPEC, runtime)
    assert runtime.calls[-1] == ("exit",)


def test_node_fatal_folds_into_the_simulators_invariants() -> None:
    fatal = [{"node": "n2", "reason": "log divergence", "time": 7}]
    assert observed_of({"invariants": {"valid": True}, "node-fatal": []}) == {"valid": True}
    assert observed_of({"invariants": None, "node-fatal": []}) is None
    assert observed_of({"invariants": {"valid": False, "anomaly-types": ["SingleLeader"]}, "node-fatal": fatal}) == {
        "valid": False,
        "anomaly-types": ["SingleLeader", "node-fatal"],
        "node-fatal": fatal,
    }
