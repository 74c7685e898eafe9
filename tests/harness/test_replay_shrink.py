"""explore → replay → shrink on the simulator, and the regression test that shrink writes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.errors import InputError
from harness.cli import build_parser
from harness.commands.explore import run as run_explore
from harness.commands.replay import run as run_replay
from harness.commands.shrink import run as run_shrink
from harness.core.spec import TestSpec
from harness.sim.cluster import SimPlan
from harness.sim.runs import from_schedule
from harness.tools.shrink import (
    FAULT_LATE_NS,
    READY_LATE_NS,
    RESTART_NS,
    ROBUST_SEED_STEP,
    Shrinker,
    build,
    fault_groups,
    other_timing,
    parse_budget,
    parse_max_runs,
    parse_robust,
)


def cli(*words: str) -> argparse.Namespace:
    """A command line as `kraftwerk` parses it."""
    return build_parser().parse_args(list(words))


def explore(tmp_path: Path, bug: str, seed: int = 100) -> Path:
    args = cli("explore", "--budget", "90s", "--bug", bug, "--time-limit", "20", "--seed", str(seed))
    args.store = str(tmp_path)
    assert run_explore(args) == 1
    return (tmp_path / "latest").resolve()


@pytest.fixture(scope="module")
def stale_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return explore(tmp_path_factory.mktemp("explore"), "stale-read")


def test_explore_stores_a_failing_run(stale_run: Path) -> None:
    results = json.loads((stale_run / "results.json").read_text())
    assert results["valid"] is False
    schedule = json.loads((stale_run / "schedule.json").read_text())
    assert schedule["ops"] and schedule["test"]["bugs"] == ["stale-read"]


def test_replay_is_identical(stale_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_replay(cli("replay", str(stale_run), "--times", "2")) == 1
    err = capsys.readouterr().err
    assert err.count("identical to the stored run") == 2


def test_replay_detects_a_changed_history(stale_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("test.json", "schedule.json"):
        (copy / name).write_bytes((stale_run / name).read_bytes())
    lines = (stale_run / "history.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"invoke"', '"invoke" ')
    (copy / "history.jsonl").write_text("\n".join(lines) + "\n")
    assert run_replay(cli("replay", str(copy), "--times", "1")) == 255


def test_replay_rejects_non_runs(tmp_path: Path) -> None:
    assert run_replay(cli("replay", str(tmp_path), "--times", "1")) == 254


@pytest.mark.parametrize("version", [1, None])
def test_replay_and_shrink_refuse_an_older_schedule_format_naming_it(
    stale_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], version: int | None
) -> None:
    """Format 1 runs were simulated with the older clients: refused (exit 254), not replayed differently."""
    old = tmp_path / "old"
    old.mkdir()
    for name in ("test.json", "history.jsonl"):
        (old / name).write_bytes((stale_run / name).read_bytes())
    doc = json.loads((stale_run / "schedule.json").read_text())
    assert doc["format"] == 4
    doc.pop("format") if version is None else doc.update(format=version)
    (old / "schedule.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert run_replay(cli("replay", str(old), "--times", "1")) == 254
    assert "schedule.json is format 1" in capsys.readouterr().err
    shrink = argparse.Namespace(run_dir=str(old), budget="10s", quiet=True, robust=1, observable=False)
    assert run_shrink(shrink) == 254
    assert "schedule.json is format 1" in capsys.readouterr().err


def test_format_2_replays_unless_it_has_the_lazy_flush_bug(stale_run: Path) -> None:
    """Format 3 moved only the lazy-flush bug's flushes (onto whole seconds of the node's clock): a format 2
    run without that bug gives the same history; one with it is refused, naming why."""
    stored = json.loads((stale_run / "schedule.json").read_text())
    copies = ("workload", "seed", "nodes", "concurrency", "time-limit", "bugs")  # what format 2 kept beside it
    doc = {**{k: v for k, v in stored.items() if k != "test"}, **{k: stored["test"][k] for k in copies}, "format": 2}
    assert from_schedule(doc, test=stored["test"])[0].bugs == ("stale-read",)
    with pytest.raises(InputError, match="format 2 with the lazy-flush bug"):
        from_schedule({**doc, "bugs": ["lazy-flush"]})


def test_shrink_to_a_minimal_schedule_and_regression_test(stale_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_shrink(argparse.Namespace(run_dir=str(stale_run), max_runs="200", quiet=True)) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["after"]["fault-events"] <= 5 and summary["after"]["operations"] <= 50
    assert summary["after"]["operations"] < summary["before"]["operations"]
    minimal = stale_run / "minimal"
    assert "minimal" in (minimal / "report.html").read_text()  # the minimal run has a report like any run
    assert run_replay(cli("replay", str(minimal), "--times", "1")) == 1
    test_file = minimal / "test_regression.py"
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    with_bug = subprocess.run(cmd, env={**env, "KRAFTWERK_BUGS": "stale-read"}, capture_output=True, text=True)
    without = subprocess.run(cmd, env={**env, "KRAFTWERK_BUGS": ""}, capture_output=True, text=True)
    assert with_bug.returncode == 1, with_bug.stdout
    assert without.returncode == 0, without.stdout


def test_explore_and_shrink_show_their_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = cli("explore", "--budget", "60s", "--bug", "stale-read", "--time-limit", "5", "--seed", "0")
    args.store = str(tmp_path)
    assert run_explore(args) == 1
    err = capsys.readouterr().err
    assert re.search(
        r"explore: attempt 1 \(seed 0\) · [0-9.]+ runs/s · [0-9,]+ s simulated in [0-9.,]+ s · [0-9,]+ s of budget", err
    )
    assert "found an invalid run after 1 attempt(s): seed 0" in err
    run_dir = (tmp_path / "latest").resolve()
    assert run_shrink(argparse.Namespace(run_dir=str(run_dir), max_runs="60", quiet=False)) == 0
    err = capsys.readouterr().err
    assert re.search(
        r"\[[a-z (),]+\] now \d+ fault events, \d+ operations, \d+ nodes, \d+ clients \(after \d+ of 60 runs", err
    )


def test_a_run_budget_shrinks_to_the_same_result_however_slow_the_machine(
    stale_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-runs counts simulator runs, not seconds: with a clock that races ahead (a machine loaded a
    thousandfold) the search makes the same runs and ends at the same minimal schedule."""
    import functools
    import itertools
    import shutil

    import harness.tools.minimize as command
    from harness.tools.shrink import Shrinker

    def shrink(name: str) -> tuple[dict[str, object], bytes]:
        run = tmp_path / name
        shutil.copytree(stale_run, run, ignore=shutil.ignore_patterns("minimal"))
        capsys.readouterr()
        assert run_shrink(argparse.Namespace(run_dir=str(run), max_runs="40", quiet=True)) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return summary, (run / "minimal" / "schedule.json").read_bytes()

    calm, calm_schedule = shrink("calm")
    ticks = itertools.count(step=1000.0)  # every look at the clock: 1000 s later
    monkeypatch.setattr(command, "Shrinker", functools.partial(Shrinker, clock=lambda: next(ticks)))
    loaded, loaded_schedule = shrink("loaded")
    assert next(ticks) > 10_000  # the search did look at the clock, and saw hours go by
    assert calm["max-runs"] == 40 and 40 <= calm["runs"] <= 42 and "budget-seconds" not in calm
    assert (loaded["runs"], loaded["after"]) == (calm["runs"], calm["after"])
    assert loaded_schedule == calm_schedule
    assert calm["after"]["operations"] < calm["before"]["operations"]  # type: ignore[index]
    # with a wall-time budget as well, the racing clock ends the search at once
    capsys.readouterr()
    both = argparse.Namespace(run_dir=str(tmp_path / "calm"), max_runs="40", budget="60s", quiet=True)
    code = run_shrink(both)
    raced = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert raced["runs"] < 5
    assert code == (1 if raced["after"] == raced["before"] else 0)  # 1: nothing smaller found in the time
    for bad in ("0", "many"):
        assert run_shrink(argparse.Namespace(run_dir=str(tmp_path / "calm"), max_runs=bad, quiet=True)) == 254
        assert "--max-runs" in capsys.readouterr().err


@pytest.mark.slow
def test_shrink_gets_commit_old_epoch_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bug whose long runs shrank worst (3 faults, 88 operations after 4 minutes): from a fresh
    small start it gets to at most 5 fault events and 50 operations within 300 simulator runs."""
    run = explore(tmp_path, "commit-old-epoch", seed=0)
    capsys.readouterr()
    assert run_shrink(argparse.Namespace(run_dir=str(run), max_runs="300", quiet=True)) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["after"]["fault-events"] <= 5 and summary["after"]["operations"] <= 50, summary
    assert summary["valid-without-bugs"] is not False
    assert run_replay(cli("replay", str(run / "minimal"), "--times", "1")) == 1


def robust_shrink(stale_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], robust: object, runs: int):
    """Shrink a copy of the stale-read run with --robust; (its minimal schedule's fails per timing, summary)."""
    import shutil

    from harness.sim.runs import simulate

    run = tmp_path / "run"
    shutil.copytree(stale_run, run, ignore=shutil.ignore_patterns("minimal"))
    capsys.readouterr()
    assert run_shrink(argparse.Namespace(run_dir=str(run), max_runs=runs, quiet=True, robust=robust)) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    candidate = from_schedule(json.loads((run / "minimal" / "schedule.json").read_text()))
    timings = [simulate(*other_timing(candidate, k)) for k in range(summary["robust"])]
    cls = set(summary["anomaly-class"])
    return [t.valid is False and bool(cls & t.anomalies) for t in timings], summary


def test_robust_shrink_keeps_schedules_that_fail_under_other_timings(
    stale_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fails, summary = robust_shrink(stale_run, tmp_path, capsys, 3, 300)
    assert summary["robust"] == 3 and summary["robust-min"] == 3 and summary["robust-reached"] is True
    assert summary["robust-hits"] == 3
    assert fails == [True, True, True]  # the minimal schedule fails at its own seed and at the two other timings
    bad = argparse.Namespace(run_dir=str(tmp_path / "run"), max_runs=300, quiet=True, robust=0)
    assert run_shrink(bad) == 254
    assert "--robust must be between 1 and 20" in capsys.readouterr().err


def test_robust_share_needs_its_own_timing_and_m_of_k(
    stale_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fails, summary = robust_shrink(stale_run, tmp_path, capsys, "2/4", 200)
    assert summary["robust"] == 4 and summary["robust-min"] == 2 and summary["robust-reached"] is True
    assert fails[0] and sum(fails) == summary["robust-hits"] >= 2


@pytest.mark.parametrize(
    ("spec", "parsed"), [(1, (1, 1)), ("3", (3, 3)), ("2/8", (2, 8)), (" 1 / 20 ", (1, 20)), (5, (5, 5))]
)
def test_parse_robust(spec: object, parsed: tuple[int, int]) -> None:
    assert parse_robust(spec) == parsed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0", "between 1 and 20"),
        ("21", "between 1 and 20"),
        ("3/2", "1 ≤ M ≤ K"),
        ("0/4", "1 ≤ M ≤ K"),
        ("x", "K or M/K"),
    ],
)
def test_parse_robust_refuses(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_robust(spec)


def test_fails_counts_timings_and_stops_once_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake simulator that fails at a fixed set of seeds: `fails` accepts a candidate whose own seed fails
    and M of K do, and runs no more timings than it needs to decide."""
    import harness.tools.shrink as shrink

    class Run:
        def __init__(self, spec: TestSpec, plan: SimPlan, failing: set[int]) -> None:
            self.spec, self.plan = spec, plan
            self.valid = spec.seed not in failing
            self.anomalies = frozenset({"nonlinearizable"}) if spec.seed in failing else frozenset()
            # what the run did: the other timings replay these, not fresh draws of their own seeds
            self.sim = argparse.Namespace(schedule=[], ops=[])

    failing: set[int] = set()
    seen: list[int] = []
    plans: list[SimPlan] = []

    def fake(spec: TestSpec, plan: SimPlan, check_time_limit: float = 0) -> Run:
        seen.append(spec.seed)
        plans.append(plan)
        return Run(spec, plan, failing)

    monkeypatch.setattr(shrink, "simulate", fake)
    shrinker = Shrinker.__new__(Shrinker)
    shrinker.robust, shrinker.robust_min, shrinker.runs = 4, 2, 0
    shrinker.target = frozenset({"nonlinearizable"})
    step = ROBUST_SEED_STEP
    cases = [
        ({0, 3 * step}, True, 4),  # own + the last one: all four run
        ({0, step}, True, 2),  # decided after two
        ({step, 2 * step, 3 * step}, False, 1),  # its own timing is valid: rejected at once
        ({0}, False, 4),  # only its own
    ]
    for fail_at, accepted, runs in cases:
        failing.clear()
        failing.update(fail_at)
        seen.clear()
        assert (shrinker.fails((TestSpec(seed=0), SimPlan())) is not None) is accepted, fail_at
        assert len(seen) == runs, (fail_at, seen)
    # a fresh candidate (faults and operations drawn from its seed): its other timings drive what it did
    assert {(p.schedule is None, p.ops is None) for p in plans} == {(True, True), (False, False)}
    shrinker.robust_min = 4
    failing.clear()
    failing.update({0, 2 * step})
    seen.clear()
    # all four asked: out of reach at once
    assert shrinker.fails((TestSpec(seed=0), SimPlan())) is None and len(seen) == 2
    failing.update({step, 3 * step})
    assert shrinker.timings_failing((TestSpec(seed=0), SimPlan())) == 4


def test_longer_fresh_starts_only_when_no_short_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """stale-leader-produce needs a broker fenced after its 3 s session, then a produce to it: no run of
    4-6 s fails that way, so shrink then looks at 15 s runs and at runs of the original's own shape."""
    import time as _time

    from harness.tools import shrink

    shapes: list[tuple[int, int, float]] = []

    class Valid:
        valid = True
        anomalies = frozenset()

    def fake(spec: TestSpec, plan: SimPlan, **_: object) -> Valid:
        shapes.append((spec.nodes, spec.concurrency, spec.time_limit))
        return Valid()

    monkeypatch.setattr(shrink, "simulate", fake)
    shrinker = Shrinker.__new__(Shrinker)
    shrinker.original = argparse.Namespace(spec=TestSpec(nodes=5, concurrency=10, time_limit=30.0), plan=SimPlan())
    shrinker.fewest_nodes, shrinker.runs, shrinker.deadline = 3, 0, _time.monotonic() + 60
    shrinker.clock, shrinker.max_runs = _time.monotonic, None
    assert shrinker.fresh_starts(share=1.0, tries=2) == []
    assert sorted(set(shapes)) == [(3, 2, 4.0), (3, 3, 6.0), (5, 3, 6.0)] and len(shapes) == 6
    shapes.clear()
    assert shrinker.fresh_starts(share=1.0, tries=2, longer=True) == []
    assert sorted(set(shapes)) == [(5, 3, 15.0), (5, 10, 30.0)] and len(shapes) == 4

    asked: list[bool] = []
    monkeypatch.setattr(shrinker, "fresh_starts", lambda share, tries, longer=False: asked.append(longer) or [])
    monkeypatch.setattr(shrinker, "shrink_from", lambda start: None)
    monkeypatch.setattr(shrinker, "realised", lambda: None)
    shrinker.log, shrinker.best, shrinker.current = (lambda msg: None), shrinker.original, shrinker.original
    monkeypatch.setattr(shrinker, "progress", lambda force=False: None)
    shrinker.run()
    assert asked == [False, True]  # nothing short failed: the longer ones were looked at
    asked.clear()
    monkeypatch.setattr(
        shrinker, "fresh_starts", lambda share, tries, longer=False: asked.append(longer) or [shrinker.original]
    )
    monkeypatch.setattr(shrinker, "smaller", lambda a, b: False)
    shrinker.run()
    assert asked == [False]  # a short run failed the same way: no longer ones


def test_fault_groups_pair_starts_with_stops() -> None:
    events = [
        {"at": 1, "package": "kill", "f": "kill", "value": ["n1"]},
        {"at": 2, "package": "partition", "f": "start-partition", "value": {"kind": "one", "grudge": {}}},
        {"at": 3, "package": "kill", "f": "start", "value": None},
        {"at": 4, "package": "pause", "f": "pause", "value": "leader"},
    ]
    groups = fault_groups(events)
    assert [[e["f"] for e in g] for g in groups] == [["kill", "start"], ["start-partition"], ["pause"]]


def test_build_restricts_to_fewer_nodes_and_renumbers_clients() -> None:
    groups = [
        [
            {"at": 1, "package": "kill", "f": "kill", "value": ["n4", "n5"]},
            {"at": 2, "package": "kill", "f": "start", "value": None},
        ],
        [{"at": 3, "package": "pause", "f": "pause", "value": ["n2", "n5"]}],
    ]
    ops = [{"at": 5, "client": 7, "f": "read", "key": "r1", "value": None, "node": "n5"}]
    spec, plan = build((TestSpec(), SimPlan()), groups, ops, 3, 10.0)
    assert [e["f"] for e in plan.schedule or []] == ["pause"] and plan.schedule[0]["value"] == ["n2"]
    assert plan.ops == [{**ops[0], "client": 0, "node": "n2"}] and spec.concurrency == 1 and spec.nodes == 3
    assert spec.nemeses == ("pause",)


def test_packet_faults_pair_with_their_stop_and_keep_only_the_kept_nodes() -> None:
    shaped = {"behaviours": {"loss": {"percent": 10}}, "nodes": ["n2", "n5"]}
    events = [
        {"at": 1, "package": "packet", "f": "start-packet", "value": shaped},
        {"at": 2, "package": "packet", "f": "stop-packet", "value": None},
        {"at": 3, "package": "packet", "f": "start-packet", "value": {**shaped, "nodes": ["n5"]}},
    ]
    groups = fault_groups(events)
    assert [[e["f"] for e in g] for g in groups] == [["start-packet", "stop-packet"], ["start-packet"]]
    ops = [{"at": 5, "client": 0, "f": "read", "key": "r1", "value": None, "node": "n1"}]
    _, plan = build((TestSpec(), SimPlan()), groups, ops, 3, 10.0)
    assert [(e["f"], e["value"]) for e in plan.schedule or []] == [
        ("start-packet", {**shaped, "nodes": ["n2"]}),
        ("stop-packet", None),
    ]


def test_budget_parsing() -> None:
    assert parse_budget("90s") == 90 and parse_budget("5m") == 300 and parse_budget("2") == 2
    with pytest.raises(ValueError):
        parse_budget("soon")
    assert parse_max_runs("300") == 300 and parse_max_runs(7) == 7
    for bad in ("0", "-3", "lots", "2.5"):
        with pytest.raises(ValueError, match="--max-runs"):
            parse_max_runs(bad)


def test_schedule_without_ops_is_rejected() -> None:
    from checkers.errors import InputError

    with pytest.raises(InputError, match="ops"):
        from_schedule({"format": 2, "seed": 1, "nodes": 3, "concurrency": 1, "time-limit": 1, "nemesis": []})


def test_schedules_store_their_links_and_older_ones_replay_with_datagram_links(stale_run: Path) -> None:
    """New runs simulate TCP-like links and say so in schedule.json; a schedule stored before that has no
    "links" and must replay as it ran (messages lost at a partition), byte for byte."""
    from checkers.errors import InputError
    from harness.sim.runs import simulate

    doc = json.loads((stale_run / "schedule.json").read_text())
    assert doc["links"] == "tcp" and from_schedule(doc)[1].links == "tcp"
    older = {k: v for k, v in doc.items() if k != "links"}
    assert from_schedule(older)[1].links == "datagram"
    with pytest.raises(InputError, match="links"):
        from_schedule({**doc, "links": "carrier-pigeon"})
    tcp, datagram = simulate(*from_schedule(doc)), simulate(*from_schedule(older))
    assert tcp.sim.stats["retransmitted"] > 0 and datagram.sim.stats["retransmitted"] == 0
    assert tcp.digest != datagram.digest  # the partitions of this run met messages in flight


def test_register_runs_start_once_a_leader_is_known_to_every_node(stale_run: Path) -> None:
    """As a real run does: no fault or operation of the main phase falls in the first election, so a
    schedule found here can be driven on a real cluster, which only starts once it is ready."""
    from harness.sim.runs import simulate
    from harness.tools.replay_plan import ready_point

    doc = json.loads((stale_run / "schedule.json").read_text())
    assert doc["start"] == "ready"
    checked = simulate(*from_schedule(doc))
    ready_at, leader = ready_point(checked.sim.events, [f"n{i}" for i in range(1, doc["test"]["nodes"] + 1)])
    assert leader is not None and ready_at == checked.main_start > 0
    first = min(op.time for op in checked.sim.recorder.ops)
    assert first >= checked.main_start
    assert first == checked.main_start + min(x["at"] for x in doc["ops"] + doc["nemesis"])
    # register schedules stored before "start" started at boot and still replay so; queue runs always waited
    older = {k: v for k, v in doc.items() if k != "start"}
    assert from_schedule(older)[1].start == "boot"
    assert simulate(*from_schedule(older)).main_start == 0
    from harness.sim.runtime import SimRuntime

    # a workload with a setup (the queue's topic) always waited for a leader, whatever "start" says
    assert SimRuntime(TestSpec(workload="queue", nodes=3), SimPlan(start="boot")).waits is True


def test_observable_explore_and_shrink_keep_an_anomaly_a_real_cluster_can_see(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lazy-flush first shows only as the simulator's MajorityReachedHighWatermark invariant, which no
    real run can check: --observable explores on to a run the history checkers refute, and shrinks
    within that class, so the minimal schedule is one a docker replay can look for."""
    from harness.sim.invariants import NAMES

    args = cli("explore", "--budget", "90s", "--bug", "lazy-flush", "--time-limit", "20", "--seed", "0")
    args.store = str(tmp_path / "plain")
    assert run_explore(args) == 1
    plain = (tmp_path / "plain" / "latest").resolve()
    assert set(json.loads((plain / "results.json").read_text())["anomaly-types"]) <= set(NAMES)
    capsys.readouterr()
    assert run_shrink(argparse.Namespace(run_dir=str(plain), max_runs="400", quiet=True, observable=True)) == 254
    assert "are all simulator invariants" in capsys.readouterr().err

    args.store, args.observable = str(tmp_path / "observable"), True
    assert run_explore(args) == 1
    assert "only simulator invariants" in capsys.readouterr().err
    run = (tmp_path / "observable" / "latest").resolve()
    assert set(json.loads((run / "results.json").read_text())["anomaly-types"]) - set(NAMES)
    # counted in runs, not seconds: a loaded machine takes longer but ends at the same place
    assert run_shrink(argparse.Namespace(run_dir=str(run), max_runs="1400", quiet=True, observable=True)) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["observable"] is True and summary["anomaly-class"]
    assert not set(summary["anomaly-class"]) & set(NAMES)
    minimal = set(json.loads((run / "minimal" / "results.json").read_text())["anomaly-types"])
    assert minimal & set(summary["anomaly-class"])
    assert summary["after"]["fault-events"] <= 5 and summary["after"]["operations"] <= 50, summary


def test_other_timings_move_faults_late_in_order_and_keep_the_rest() -> None:
    """--robust's other timings: another seed, each fault 0-100 ms later (never reordered, never past the
    time limit); the run's own timing and the client operations are untouched."""
    schedule = [
        {"at": 1_000_000_000, "package": "kill", "f": "kill", "value": ["n1"]},
        {"at": 1_000_000_000, "package": "partition", "f": "start-partition", "value": {"n2": ["n3"]}},
        {"at": 1_050_000_000, "package": "kill", "f": "start", "value": None},
        {"at": 1_999_990_000, "package": "partition", "f": "stop-partition", "value": None},
    ]
    ops = [{"at": 5, "client": 0, "f": "read", "key": "r1", "value": None, "node": "n1"}]
    candidate = (TestSpec(seed=11, time_limit=2.0), SimPlan(schedule=schedule, ops=ops))
    assert other_timing(candidate, 0) is candidate
    moved_any = False
    for k in range(1, 8):
        spec, plan = other_timing(candidate, k)
        assert spec.seed == (11 + k * ROBUST_SEED_STEP) % 2**31 and plan.ops == ops
        assert plan.schedule is not None
        ats = [e["at"] for e in plan.schedule]
        assert ats == sorted(ats) and ats[-1] < 2_000_000_000
        for before, after in zip(schedule, plan.schedule):
            assert {**after, "at": before["at"]} == before
            assert before["at"] <= after["at"] <= max(before["at"], 0) + FAULT_LATE_NS or after["at"] == ats[-1]
        moved_any |= ats != [e["at"] for e in schedule]
        assert other_timing(candidate, k)[1].schedule == plan.schedule  # drawn from the seed: the same every time
    assert moved_any


def test_other_timings_start_the_main_phase_late_and_restart_slowly() -> None:
    """--robust's other timings start the main phase 0-1 s after the cluster is ready and let a killed node
    serve 0.3-1.2 s after its start, as on docker; the run's own timing keeps the simulator's instants."""
    candidate = (TestSpec(seed=11, time_limit=2.0), SimPlan(schedule=[], ops=[]))
    assert candidate[1].ready_delay == 0 and candidate[1].restart_delay == 0
    delays = [other_timing(candidate, k)[1] for k in range(1, 9)]
    assert all(0 <= p.ready_delay < READY_LATE_NS and RESTART_NS[0] <= p.restart_delay < RESTART_NS[1] for p in delays)
    assert len({p.ready_delay for p in delays}) == len(delays)  # drawn per timing
    assert [p.ready_delay for p in delays] == [other_timing(candidate, k)[1].ready_delay for k in range(1, 9)]


def test_simulation_honours_a_ready_delay_and_a_restart_delay() -> None:
    """The simulator's own knobs behind those timings: the main phase starts `ready_delay` after the cluster
    is ready, and a started node is back only `restart_delay` later (a kill before then cancels the start)."""
    from harness.sim.runtime import SimRuntime

    second = 1_000_000_000
    schedule = [
        {"at": 200_000_000, "package": "kill", "f": "kill", "value": ["n2"]},
        {"at": 400_000_000, "package": "kill", "f": "start", "value": None},
    ]
    spec = TestSpec(seed=3, time_limit=2.0, nodes=3, concurrency=1, nemeses=("kill",))
    base = SimRuntime(spec, SimPlan(schedule=schedule, ops=[]))
    base.run()
    slow = SimRuntime(spec, SimPlan(schedule=schedule, ops=[], ready_delay=700_000_000, restart_delay=300_000_000))
    slow.run()
    assert slow.main_start == base.main_start + 700_000_000

    def back(sim: SimRuntime) -> int:  # when n2 came back: its first event after the kill
        kill = sim.main_start + 200_000_000
        return min(e["time"] for e in sim.events if e["node"] == "n2" and e["time"] > kill)

    assert back(base) - base.main_start < 400_000_000 + second // 100
    assert back(slow) - slow.main_start >= 400_000_000 + 300_000_000
    # a kill while the node is still starting: it stays down until the next start
    faults = slow.faults
    faults.restart_delay = second
    node = faults.nodes["n1"]
    node.crash()
    faults.start(["n1"])
    faults.kill(["n1"])
    slow.sched.run_until(slow.sched.now + 2 * second)
    assert not node.alive
