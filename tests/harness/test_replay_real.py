"""`kraftwerk replay` on real clusters: stored schedule → plan → generator (times, nodes, client slots,
fault targets), the reproduction rule, bad options; a local-backend replay end to end."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkers.errors import InputError
from harness.cli import main
from harness.core.recorder import Recorder
from harness.core.spec import TestSpec
from harness.real.interpreter import Applied, Completion, Interpreter, monotonic_clock
from harness.tools.replay_plan import Plan, load_plan, ready_point, rename, renaming, replay_generator, reproduced
from tests.harness.real import realtest

MS = 1_000_000
S = 1_000_000_000


def state(node: str, t: int, epoch: int, leader: str | None) -> dict[str, Any]:
    return {"node": node, "time": t, "type": "state", "epoch": epoch, "role": "follower", "leader": leader}


def write_run(d: Path, backend: str, schedule: dict[str, Any], events: list[dict[str, Any]], **test: Any) -> Path:
    d.mkdir(parents=True)
    (d / "test.json").write_text(json.dumps({"name": "t", "backend": backend, "workload": "register", **test}))
    (d / "schedule.json").write_text(json.dumps(schedule))
    (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (d / "results.json").write_text(json.dumps({"valid": False, "anomaly-types": ["MonotonicEpoch", "node-fatal"]}))
    return d


def sim_schedule(**kw: Any) -> dict[str, Any]:
    doc = {
        "format": 1,
        "workload": "register",
        "seed": 5,
        "nodes": 3,
        "concurrency": 2,
        "time-limit": 10.0,
        "bugs": ["stale-read"],
        "nemesis": [
            {"at": 500 * MS, "package": "kill", "f": "kill", "value": ["n3"]},  # before the cluster was ready
            {
                "at": 3 * S,
                "package": "partition",
                "f": "start-partition",
                "value": {"kind": "x", "grudge": {"n1": ["n2"]}},
            },
            {"at": 4 * S, "package": "clock", "f": "bump-clock", "value": {"n2": {"delta-ms": 50, "drift-ppm": 0}}},
            {"at": 11 * S, "package": "kill", "f": "start", "value": None},  # past the time limit: never fired
        ],
        "ops": [
            {"at": 2 * S, "client": 1, "f": "write", "key": "r1", "value": 3, "node": "n2"},
            {"at": 2500 * MS, "client": 0, "f": "read", "key": "r1", "value": None, "node": "n1"},
            {"at": 10 * S, "client": 0, "f": "read", "key": "r1", "value": None, "node": "n1"},  # at the limit
        ],
    }
    doc.update(kw)
    return doc


READY = [state("n1", 0, 0, None), state("n2", 0, 0, None), state("n3", 0, 0, None)]
READY += [state("n2", 1_500 * MS, 1, "n2"), state("n1", 1_600 * MS, 1, "n2"), state("n3", 1_700 * MS, 1, "n2")]


def test_sim_plan_shifts_times_to_the_ready_cluster_and_drops_what_the_simulator_never_ran(tmp_path: Path) -> None:
    plan = load_plan(write_run(tmp_path / "run", "sim", sim_schedule(), READY))
    assert plan.source_backend == "sim" and plan.leader == "n2"
    assert plan.shift_ns == 1_700 * MS  # every node knows leader n2 at 1.7 s of simulated time
    assert plan.time_limit == pytest.approx(8.3)
    assert [(e["at"], e["f"]) for e in plan.events] == [
        (0, "kill"),
        (1_300 * MS, "start-partition"),
        (2_300 * MS, "bump-clock"),
    ]
    assert [(o["at"], o["client"], o["node"]) for o in plan.ops] == [(300 * MS, 1, "n2"), (800 * MS, 0, "n1")]
    assert plan.nemeses == ["clock", "kill", "partition"] and plan.bugs == ("stale-read",)
    target, mapped = plan.target()
    assert target == {"epoch-regression", "double-vote", "node-fatal"} and mapped
    assert any("shifted back by 1.700 s" in n for n in plan.notes)


def test_sim_plan_of_a_run_that_started_when_ready_is_not_shifted(tmp_path: Path) -> None:
    """Register runs simulated since "start": "ready" count their schedule from a ready cluster, as real
    runs do; their history (on the simulator's clock) is brought to that origin for the stored order."""
    doc = sim_schedule(start="ready", nemesis=sim_schedule()["nemesis"][1:3])
    run = write_run(tmp_path / "run", "sim", doc, READY)
    main_start = 1_700 * MS
    history = [
        {"index": 0, "time": main_start + 2 * S, "process": 1, "type": "invoke", "f": "write", "key": "r1", "value": 3},
        {"index": 1, "time": main_start + 2100 * MS, "process": 1, "type": "ok", "f": "write", "key": "r1", "value": 3},
        {"index": 2, "time": main_start + 2500 * MS, "process": 0, "type": "invoke", "f": "read", "key": "r1"},
    ]
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
    plan = load_plan(run)
    assert plan.shift_ns == 0 and plan.leader == "n2" and plan.time_limit == pytest.approx(10.0)
    assert [(e["at"], e["f"]) for e in plan.events] == [(3 * S, "start-partition"), (4 * S, "bump-clock")]
    read = next(o for o in plan.ops if o["f"] == "read")
    assert read["at"] == 2500 * MS and read["after"] == [0]  # the write had completed before the read began
    assert any("not shifted" in n for n in plan.notes)


def test_short_sim_plan_heals_when_the_stored_run_did(tmp_path: Path) -> None:
    """A minimal schedule whose main phase ends 0.2 s after its cluster was ready heals 0.2 s into the
    replay too (a kill then lasts as briefly as it did in the simulator), not after a padded second."""
    doc = sim_schedule(**{"time-limit": 1.9, "nemesis": [], "ops": []})
    plan = load_plan(write_run(tmp_path / "run", "sim", doc, READY))
    assert plan.time_limit == pytest.approx(0.2)


def test_real_plan_keeps_times_and_the_tests_nemeses(tmp_path: Path) -> None:
    doc = sim_schedule(nemesis=[{"at": 2 * S, "package": "pause", "f": "pause", "value": ["n1"]}])
    plan = load_plan(write_run(tmp_path / "run", "docker", doc, READY, nemesis=["pause", "kill"]))
    assert plan.shift_ns == 0 and plan.time_limit == 10.0
    assert [o["at"] for o in plan.ops] == [2 * S, 2500 * MS]
    assert plan.nemeses == ["kill", "pause"]  # heal and setup cover every package the test had


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workload": "kv"}, "unknown workload 'kv'"),
        ({"ops": [{"at": 0, "client": 2, "f": "read", "key": "r", "value": None, "node": "n1"}]}, "concurrency is 2"),
        ({"ops": [{"at": 0, "client": 0, "f": "read", "key": "r", "value": None, "node": "n9"}]}, "node 'n9'"),
        ({"nemesis": [{"at": 0, "f": "strobe-clock", "value": None}]}, "'strobe-clock' cannot be replayed"),
    ],
)
def test_unreplayable_runs_are_refused(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_plan(write_run(tmp_path / "run", "sim", sim_schedule(**change), READY))


def test_ready_point_needs_every_node_to_agree() -> None:
    events = READY[:4] + [state("n1", 1_600 * MS, 1, "n2")]
    assert ready_point(events, ["n1", "n2", "n3"]) == (None, None)
    assert ready_point(READY, ["n1", "n2", "n3"]) == (1_700 * MS, "n2")


def plan_of(nodes: int = 3, leader: str | None = "n1", **kw: Any) -> Plan:
    return Plan(
        Path("."),
        "sim",
        TestSpec(workload="register", seed=0, nodes=nodes, concurrency=1),
        1.0,
        [],
        [],
        [],
        leader=leader,
        **kw,
    )


def test_register_renaming_swaps_the_stored_leader_with_the_fresh_one() -> None:
    assert renaming(plan_of(), "n3") == {"n1": "n3", "n3": "n1"}
    assert renaming(plan_of(), "n1") == {} and renaming(plan_of(leader=None), "n1") == {}
    assert renaming(plan_of(), None) == {}


def test_rename_swaps_nodes_everywhere_but_keeps_kinds_and_leader_targets() -> None:
    m = renaming(plan_of(), "n3")
    assert rename(["n1", "n2"], m) == ["n3", "n2"]
    assert rename("leader", m) == "leader" and rename(None, m) is None
    grudge = {"kind": "n1", "grudge": {"n1": ["n2", "n3"], "n3": ["n1"]}}
    assert rename(grudge, m) == {"kind": "n1", "grudge": {"n3": ["n2", "n1"], "n1": ["n3"]}}
    assert rename({"n3": {"delta-ms": 5, "drift-ppm": 0}}, m) == {"n1": {"delta-ms": 5, "drift-ppm": 0}}


def test_reproduction_needs_an_invalid_verdict_of_the_same_class() -> None:
    t = frozenset({"nonlinearizable"})
    assert reproduced({"valid": False, "anomaly-types": ["nonlinearizable", "hw-regression"]}, t)
    assert not reproduced({"valid": False, "anomaly-types": ["hw-regression"]}, t)
    assert not reproduced({"valid": "unknown", "anomaly-types": []}, t)
    assert reproduced({"valid": False, "anomaly-types": ["x"]}, frozenset())


class Slow:
    """A fake client: records (thread, process, node, f, value, invoked ns); `slow` takes 0.3 s, `crash` is info."""

    timeout = 1.0

    def __init__(self, thread: int, process: int, seen: list[tuple[Any, ...]], clock: Any) -> None:
        self.thread, self.process, self.seen, self.clock = thread, process, seen, clock

    async def invoke(self, op: dict[str, Any]) -> Completion:
        self.seen.append((self.thread, self.process, op["node"], op["f"], op["value"], self.clock()))
        await asyncio.sleep(0.3 if op["value"] == "slow" else 0.001)
        return Completion("info" if op["value"] == "crash" else "ok", op["value"], None, op["node"])

    async def close(self) -> None:
        pass


def test_generator_drives_each_op_at_its_time_on_its_slot_and_node(tmp_path: Path) -> None:
    def op(at_ms: int, client: int, value: Any, node: str) -> dict[str, Any]:
        return {"at": at_ms * MS, "client": client, "f": "write", "key": "r1", "value": value, "node": node}

    ops = [
        op(50, 1, "crash", "n1"),
        op(100, 0, "slow", "n3"),
        op(150, 0, "late", "n2"),  # slot 0 is busy until ~400 ms: runs late, on slot 0 still
        op(200, 1, "after-crash", "n1"),  # slot 1 reopened as process 1 + concurrency
        op(900, 1, "too-late", "n2"),  # past the 0.8 s limit: not run
    ]
    events = [
        {"at": 120 * MS, "package": "kill", "f": "kill", "value": ["n1"]},
        {"at": 300 * MS, "package": "kill", "f": "start", "value": None},
    ]
    plan = Plan(
        Path("."), "sim", TestSpec(workload="register", seed=1, nodes=3, concurrency=2), 0.8, ["kill"], events, ops
    )
    seen: list[tuple[Any, ...]] = []
    applied: list[tuple[str, Any, int]] = []
    clock = monotonic_clock()

    async def nemesis(o: dict[str, Any]) -> Applied:
        applied.append((o["f"], o["value"], clock()))
        return Applied(o["value"], o["value"])

    interp = Interpreter(
        2,
        lambda t, p: Slow(t, p, seen, clock),
        nemesis,
        Recorder(clock, tmp_path / "h.jsonl"),
        clock,
        rng=random.Random(1),
    )

    async def go() -> int:
        start = clock()
        try:
            await interp.run(replay_generator(plan, {"n1": "n3", "n3": "n1"}))
        finally:
            await interp.close()
        return clock() - start

    took = asyncio.run(go())
    assert took >= 800 * MS  # the main phase lasts the time limit, so healing starts on time
    by_value = {s[4]: s for s in seen}
    assert set(by_value) == {"crash", "slow", "late", "after-crash"}
    assert by_value["crash"][:3] == (1, 1, "n3") and by_value["slow"][:3] == (0, 0, "n1")
    assert by_value["late"][:3] == (0, 0, "n2") and by_value["late"][5] >= by_value["slow"][5] + 290 * MS
    assert by_value["after-crash"][:3] == (1, 3, "n3")
    for value, at in (("crash", 50), ("slow", 100), ("after-crash", 200)):
        assert at * MS <= by_value[value][5] < (at + 250) * MS, value  # never early, not much late
    # a simulated run's heal at the limit (`start` of every killed node) comes at the end of the main phase
    assert [(f, v) for f, v, _ in applied] == [("kill", ["n3"]), ("start", None), ("start", None)]
    assert 120 * MS <= applied[0][2] < 370 * MS and 300 * MS <= applied[1][2] < 550 * MS
    assert applied[2][2] >= 800 * MS


@pytest.mark.parametrize("source", ["sim", "docker"])
def test_a_simulated_runs_heal_comes_at_the_limit_with_operations_in_flight(tmp_path: Path, source: str) -> None:
    """The simulator heals when its main phase ends, while client operations are still in flight (a read
    waiting on an isolated leader completes after the heal); a replay of it heals at the limit too, not once
    the operations completed. A real run healed after them: its replay leaves that to the heal phase."""
    ops = [{"at": 650 * MS, "client": 0, "f": "write", "key": "r1", "value": "slow", "node": "n1"}]
    # the clock package's leader fault: a partition, healed as one (and its clock reset)
    events = [{"at": 100 * MS, "package": "clock", "f": "start-partition", "value": {"n1": ["n2"]}}]
    plan = Plan(
        Path("."), source, TestSpec(workload="register", seed=1, nodes=3, concurrency=1), 0.8, ["clock"], events, ops
    )
    applied: list[tuple[str, int]] = []
    seen: list[tuple[Any, ...]] = []
    clock = monotonic_clock()

    async def nemesis(o: dict[str, Any]) -> Applied:
        applied.append((o["f"], clock()))
        return Applied(o["value"], o["value"])

    interp = Interpreter(
        1,
        lambda t, p: Slow(t, p, seen, clock),
        nemesis,
        Recorder(clock, tmp_path / "h.jsonl"),
        clock,
        rng=random.Random(1),
    )

    async def go() -> int:
        start = clock()
        try:
            await interp.run(replay_generator(plan))
        finally:
            await interp.close()
        return start

    start = asyncio.run(go())
    done = seen[0][5] + 300 * MS  # the slow write completes 0.3 s after it began, at about 0.95 s
    if source == "sim":
        assert [f for f, _ in applied] == ["start-partition", "stop-partition", "reset-clock"]
        assert 800 * MS <= applied[1][1] - start < done - start  # at the limit, before the write completed
    else:
        assert [f for f, _ in applied] == ["start-partition"]


def test_bad_options_name_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run", "sim", sim_schedule(), READY)
    assert main(["replay", str(run), "--times", "0", "--backend", "local"]) == 254
    assert "--times" in capsys.readouterr().err
    assert main(["replay", str(run), "--backend", "vm"]) == 254
    assert "--backend" in capsys.readouterr().err
    assert main(["replay", str(run), "--backend", "local", "--settle", "-1"]) == 254
    assert "--settle" in capsys.readouterr().err
    kv = write_run(tmp_path / "q", "sim", sim_schedule(workload="kv"), READY)
    assert main(["replay", str(kv), "--backend", "local", "--store", str(tmp_path / "s")]) == 254
    assert "unknown workload 'kv'" in capsys.readouterr().err


@pytest.mark.slow
def test_local_replay_of_a_simulated_run_and_of_the_replay(tmp_path: Path) -> None:
    """A short simulated kill run replayed on local processes, then that attempt replayed as a real run."""
    sim = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "sim", "--store", str(tmp_path / "sim")]
        + [
            "--nodes",
            "3",
            "--concurrency",
            "2",
            "--time-limit",
            "6",
            "--nemesis",
            "kill",
            "--interval",
            "1",
            "--seed",
            "4",
            "-q",
        ],
        cwd=realtest.ROOT,
        capture_output=True,
        text=True,
    )
    assert sim.returncode == 0, sim.stderr[-2000:]
    source = realtest.latest(tmp_path / "sim")
    plan = load_plan(source)
    store = tmp_path / "real"
    cmd = [sys.executable, "-m", "harness.cli", "replay", str(source), "--backend", "local", "--store", str(store)]
    r = subprocess.run(
        cmd + ["--times", "1", "--settle", "2.5"], cwd=realtest.ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]  # a valid run stays valid
    assert "reproduced in 0 of 1 attempts" in r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    attempt = Path(summary["runs"][0]["run"])
    schedule = realtest.check_run_layout(attempt, 3)
    test = json.loads((attempt / "test.json").read_text())
    assert test["backend"] == "local" and test["replay"]["of"] == str(source) and test["seed"] == 4
    # the final reads waited --settle after the heal (the stored run's own settle is 10 s by default)
    assert test["settle-seconds"] == 2.5
    assert json.loads((attempt / "results.json").read_text())["run"]["recovery-seconds"] >= 2.5
    assert plan.spec.settle == 10.0
    mapping = test["replay"].get("node-renaming", {})
    # the same operations, from the same client slots, on the same (renamed) nodes, none early
    want = [(o["client"], o["f"], o["key"], o["value"], rename(o["node"], mapping)) for o in plan.ops]
    got = [(o["client"], o["f"], o["key"], o["value"], o["node"]) for o in schedule["ops"]]
    assert sorted(got, key=str) == sorted(want, key=str)
    fired = schedule["nemesis"]
    assert len(plan.events) >= 2 and [e["f"] for e in fired] == [e["f"] for e in plan.events]
    for e, p in zip(fired, plan.events):
        if p["value"] not in ("leader", None):
            assert e["value"] == rename(p["value"], mapping)
        assert p["at"] <= e["at"] < p["at"] + 1 * S, (e, p)  # at its time (never early), give or take a restart
    # a simulator run's replay heals at the time limit, as the simulator does (replay_generator); the
    # runner's own heal phase then heals again, which restarts nothing
    assert [e["f"] for e in schedule["heal"]] == ["start", "start"]
    _, cluster = realtest.cluster_of(attempt)
    assert realtest.leftovers(cluster) == []
    # a real run replays on its own backend without --backend
    again = subprocess.run(
        [sys.executable, "-m", "harness.cli", "replay", str(attempt), "--store", str(store), "-q"],
        cwd=realtest.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    second = Path(json.loads(again.stdout.strip().splitlines()[-1])["runs"][0]["run"])
    assert json.loads((second / "test.json").read_text())["replay"]["source-backend"] == "local"
    assert len(json.loads((second / "schedule.json").read_text())["ops"]) == len(schedule["ops"])


def test_order_finds_what_completed_before_each_item_started() -> None:
    ops = [
        {"at": 10, "client": 0, "f": "write", "key": "k", "value": 1, "node": "n1"},
        {"at": 20, "client": 1, "f": "read", "key": "k", "value": None, "node": "n2"},  # 0 still open
        {"at": 40, "client": 1, "f": "read", "key": "k", "value": None, "node": "n2"},  # after 0 and the kill
    ]
    events = [{"at": 25, "package": "kill", "f": "kill", "value": ["n1"]}]
    history = [
        {"time": 10, "process": 0, "type": "invoke", "f": "write", "key": "k"},
        {"time": 20, "process": 1, "type": "invoke", "f": "read", "key": "k"},
        {"time": 22, "process": 1, "type": "ok", "f": "read", "key": "k"},
        {"time": 25, "process": "nemesis", "type": "info", "f": "kill"},
        {"time": 30, "process": 0, "type": "ok", "f": "write", "key": "k"},
        {"time": 40, "process": 3, "type": "invoke", "f": "read", "key": "k"},  # slot 1 reopened (concurrency 2)
        {"time": 41, "process": 3, "type": "ok", "f": "read", "key": "k"},
    ]
    from harness.tools.replay_plan import order

    order(ops, events, history, 2)
    assert [o["seq"] for o in ops] == [0, 1, 2] and events[0]["seq"] == 3
    assert [o["after"] for o in ops] == [[], [], [0, 3]]
    assert events[0]["after"] == [1]  # the first read had completed at 22, the write had not


def test_ordered_replay_waits_for_the_stored_happens_before(tmp_path: Path) -> None:
    ops = [
        {"seq": 0, "at": 20 * MS, "client": 0, "f": "write", "key": "k", "value": "slow", "node": "n1", "after": []},
        {"seq": 1, "at": 60 * MS, "client": 1, "f": "read", "key": "k", "value": None, "node": "n2", "after": [0]},
    ]
    events = [{"seq": 2, "at": 40 * MS, "package": "kill", "f": "kill", "value": ["n1"], "after": [0]}]
    for ordered in (True, False):
        plan = Plan(
            Path("."), "sim", TestSpec(workload="register", seed=1, nodes=3, concurrency=2), 0.5, ["kill"], events, ops
        )
        seen: list[tuple[Any, ...]] = []
        applied: list[int] = []
        clock = monotonic_clock()

        async def nemesis(o: dict[str, Any], applied: list[int] = applied, clock: Any = clock) -> Applied:
            applied.append(clock())
            return Applied(o["value"], o["value"])

        rec = Recorder(clock, tmp_path / f"h{ordered}.jsonl")
        interp = Interpreter(2, lambda t, p, s=seen, c=clock: Slow(t, p, s, c), nemesis, rec, clock)

        async def go(interp: Interpreter = interp, plan: Plan = plan, ordered: bool = ordered) -> None:
            try:
                await interp.run(replay_generator(plan, ordered=ordered))
            finally:
                await interp.close()

        asyncio.run(go())
        read = next(s for s in seen if s[3] == "read")
        if ordered:  # the write takes 0.3 s: the read and the kill wait for it, as in the stored run
            assert read[5] >= 320 * MS and applied[0] >= 320 * MS
        else:
            assert read[5] < 250 * MS and applied[0] < 250 * MS


def test_lazy_flush_plan_waits_for_the_stored_runs_flush_phase(tmp_path: Path) -> None:
    """The lazy-flush bug's flushes fall on whole seconds of the nodes' clock, in the simulator and on real
    nodes: a replay starts its main phase at the fraction of a second the stored run's began at, so a kill
    that came just before (or during) a flush in the simulator comes just before it on the real nodes too."""
    from harness.tools.replay import align_phase

    doc = sim_schedule(start="ready", bugs=["lazy-flush"], **{"main-start": 1_103 * MS})
    plan = load_plan(write_run(tmp_path / "run", "sim", doc, READY))
    assert plan.main_start == 1_103 * MS and plan.phase_period() == S
    assert plan.phase_wait(7 * S + 50 * MS) == 53 * MS  # 7.050 s → 7.103 s
    assert plan.phase_wait(7 * S + 103 * MS) == 0
    assert plan.phase_wait(7 * S + 200 * MS) == 903 * MS  # just missed it: the next second's
    slept: list[float] = []
    waited = align_phase(plan, "monotonic", slept.append)
    assert 0 <= waited < S and slept == ([waited / S] if waited else [])
    # other bugs have no clock-phased timer; runs stored before "main-start" cannot be aligned
    other = load_plan(write_run(tmp_path / "other", "sim", {**doc, "bugs": ["stale-read"]}, READY))
    assert other.phase_period() is None and other.phase_wait(7 * S) == 0
    old = {k: v for k, v in doc.items() if k != "main-start"}
    assert load_plan(write_run(tmp_path / "old", "sim", old, READY)).phase_wait(7 * S) == 0
