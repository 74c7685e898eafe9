"""The nemesis interpreter against a recording fake `Faults`: targets resolved once, heal-all generic."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.nemesis import partitions, schedule
from harness.nemesis.faults import Faults
from harness.nemesis.interpreter import Applied, NemesisInterpreter

NODES = ["n1", "n2", "n3", "n4", "n5"]


class RecordingFaults:
    """A Faults port that remembers every call and the state it leaves the cluster in."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.cut: dict[str, list[str]] = {}
        self.down: set[str] = set()
        self.stopped: set[str] = set()
        self.offsets: dict[str, float] = {}
        self.rates: dict[str, float] = {}
        self.strobing: set[str] = set()
        self.shaped: Any = None

    def partition(self, grudge: Mapping[str, list[str]]) -> dict[str, list[str]]:
        self.calls.append(("partition", grudge))
        self.cut = {k: list(v) for k, v in grudge.items() if v}
        return dict(self.cut)

    def heal(self) -> None:
        self.calls.append(("heal", None))
        self.cut = {}

    def kill(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("kill", list(nodes)))
        self.down.update(nodes)
        self.stopped.difference_update(nodes)
        return list(nodes)

    def start(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("start", list(nodes)))
        started = [n for n in nodes if n in self.down]
        self.down.difference_update(nodes)
        return started

    def pause(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("pause", list(nodes)))
        paused = [n for n in nodes if n not in self.down]
        self.stopped.update(paused)
        return paused

    def resume(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("resume", list(nodes)))
        resumed = [n for n in nodes if n in self.stopped]
        self.stopped.difference_update(nodes)
        return resumed

    def clock_bump(self, changes: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        self.calls.append(("clock_bump", changes))
        for n, c in changes.items():
            self.offsets[n] = self.offsets.get(n, 0) + c["delta-ms"]
            self.rates[n] = c.get("drift-ppm", 0)
        return {n: self.offsets[n] for n in changes}

    def clock_strobe(self, strobe: Mapping[str, Mapping[str, float]]) -> Mapping[str, Mapping[str, float]]:
        self.calls.append(("clock_strobe", strobe))
        self.strobing.update(strobe)
        return strobe

    def clock_rate(self, ppm: Mapping[str, float]) -> Mapping[str, float]:
        self.calls.append(("clock_rate", ppm))
        self.rates.update(ppm)
        return ppm

    def clock_reset(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("clock_reset", list(nodes)))
        off = [n for n in nodes if self.offsets.get(n) or self.rates.get(n) or n in self.strobing]
        for n in nodes:
            self.offsets.pop(n, None)
            self.rates.pop(n, None)
            self.strobing.discard(n)
        return off

    def packet_start(self, behaviours: Mapping[str, Any], nodes: Sequence[str], peers: Sequence[str]) -> Any:
        self.calls.append(("packet_start", (dict(behaviours), list(nodes), list(peers))))
        self.shaped = {"behaviours": dict(behaviours), "nodes": list(nodes)}
        return self.shaped

    def packet_stop(self) -> None:
        self.calls.append(("packet_stop", None))
        self.shaped = None

    def disk_fault(self, fault: str, nodes: Sequence[str], seed: int) -> dict[str, Any]:
        self.calls.append(("disk_fault", (fault, list(nodes), seed)))
        self.down.update(nodes)  # crashed, until started
        self.stopped.difference_update(nodes)
        return {n: {"fault": fault} for n in nodes}

    def clean(self) -> bool:
        skewed = any(self.offsets.values()) or any(self.rates.values()) or self.strobing
        return not (self.cut or self.down or self.stopped or skewed or self.shaped)


def interpreter() -> tuple[RecordingFaults, NemesisInterpreter]:
    fake = RecordingFaults()
    port: Faults = fake  # what the interpreter is given: any Faults
    return fake, NemesisInterpreter(port, NODES, random.Random(5))


def test_leader_targets_resolve_to_the_leader_or_to_nobody() -> None:
    fake, nem = interpreter()
    event = {"f": "kill", "value": "leader"}
    assert nem.needs_leader(event) and nem.needs_leader({"f": "pause", "value": None})
    assert nem.apply(event, "n3") == Applied(["n3"], ["n3"])
    assert nem.apply({"f": "pause", "value": "leader"}, None) == Applied([], [])  # no leader known: no target
    assert nem.apply({"f": "pause", "value": "leader"}, "n9") == Applied([], [])  # not a node of this cluster
    assert nem.apply({"f": "pause", "value": "all"}) == Applied(["n1", "n2", "n4", "n5"], NODES)  # n3 is down
    assert fake.calls[:2] == [("kill", ["n3"]), ("pause", [])]
    with pytest.raises(ValueError, match="unknown node.*'n7'"):
        nem.apply({"f": "kill", "value": ["n1", "n7"]})


def test_start_and_resume_without_targets_undo_what_is_down_and_paused_in_node_order() -> None:
    fake, nem = interpreter()
    nem.apply({"f": "kill", "value": ["n4", "n2"]})
    nem.apply({"f": "pause", "value": ["n5", "n1"]})
    assert nem.apply({"f": "start", "value": None}) == Applied(["n2", "n4"], None)
    assert nem.apply({"f": "resume", "value": None}) == Applied(["n1", "n5"], None)
    assert fake.calls[-2:] == [("start", ["n2", "n4"]), ("resume", ["n1", "n5"])]
    assert fake.clean() and not any(nem.in_force().values())


def test_partition_kinds_are_resolved_when_they_fire() -> None:
    fake, nem = interpreter()
    leader_kind = {"f": "start-partition", "value": {"kind": "leader"}}
    assert nem.needs_leader(leader_kind)
    applied = nem.apply(leader_kind, "n2")
    assert applied.recorded == partitions.isolate(NODES, "n2")
    assert applied.realised == {"kind": "leader", "grudge": partitions.isolate(NODES, "n2")}
    # a kind without a grudge draws its shape from the interpreter's stream, as partitions.make does
    applied = nem.apply({"f": "start-partition", "value": {"kind": "halves"}})
    assert applied.realised["grudge"] == partitions.make("halves", NODES, _after_one_draw())
    # a concrete grudge (even of kind leader: a stored run) is applied as it is, with empty entries left out
    grudge = {"n1": ["n2"], "n2": []}
    stored = {"kind": "leader", "grudge": grudge}
    assert not nem.needs_leader({"f": "start-partition", "value": stored})
    assert nem.apply({"f": "start-partition", "value": stored}) == Applied({"n1": ["n2"]}, stored)
    assert nem.apply({"f": "start-partition", "value": grudge}).recorded == {"n1": ["n2"]}  # a bare grudge
    assert nem.apply({"f": "stop-partition", "value": None}) == Applied(None, None)
    assert fake.cut == {}


def _after_one_draw() -> random.Random:
    """The interpreter's stream after the leader partition above (isolate draws nothing when the leader is known)."""
    return random.Random(5)


def test_clock_and_packet_events_reach_the_port() -> None:
    fake, nem = interpreter()
    nem.apply({"f": "bump-clock", "value": {"n1": {"delta-ms": 300, "drift-ppm": 1000}}})
    nem.apply({"f": "strobe-clock", "value": {"n2": {"delta-ms": 50, "period-ms": 10, "duration-s": 1}}})
    nem.apply({"f": "rate-clock", "value": {"n3": -500}})
    assert nem.skewed == {"n1", "n2", "n3"}
    assert nem.apply({"f": "reset-clock", "value": None}).recorded == ["n1", "n2", "n3"]
    applied = nem.apply({"f": "start-packet", "value": {"behaviours": {"loss": {"percent": 5}}, "nodes": ["n2"]}})
    assert fake.calls[-1] == ("packet_start", ({"loss": {"percent": 5}}, ["n2"], NODES))
    assert applied.recorded == {"behaviours": {"loss": {"percent": 5}}, "nodes": ["n2"]}
    nem.apply({"f": "start-packet", "value": None})  # Jepsen's default: delay, every node to every other
    assert fake.calls[-1] == ("packet_start", ({"delay": None}, NODES, NODES))
    assert nem.heal_events() == [{"f": "stop-packet", "value": None}]
    with pytest.raises(ValueError, match="unknown node"):
        nem.apply({"f": "bump-clock", "value": {"x1": {"delta-ms": 1}}})
    with pytest.raises(ValueError, match="unknown nemesis op 'flood'"):
        nem.apply({"f": "flood", "value": None})


def test_heal_events_cover_the_asked_packages_in_heal_order() -> None:
    _, nem = interpreter()
    assert nem.heal_events(["clock", "kill", "partition", "pause"]) == [
        {"f": "stop-partition", "value": None},
        {"f": "resume", "value": None},
        {"f": "start", "value": None},
        {"f": "reset-clock", "value": None},
    ]
    nem.apply({"f": "kill", "value": ["n1"]})
    assert nem.heal_events(["clock"]) == [{"f": "start", "value": None}, {"f": "reset-clock", "value": None}]


hand_events = st.one_of(
    st.builds(lambda v: {"f": "kill", "value": v}, st.one_of(st.just("leader"), st.lists(st.sampled_from(NODES)))),
    st.builds(lambda v: {"f": "pause", "value": v}, st.one_of(st.just("all"), st.lists(st.sampled_from(NODES)))),
    st.builds(lambda v: {"f": "start", "value": v}, st.one_of(st.none(), st.lists(st.sampled_from(NODES)))),
    st.builds(lambda v: {"f": "resume", "value": v}, st.one_of(st.none(), st.lists(st.sampled_from(NODES)))),
    st.builds(
        lambda ns, p: {"f": "rate-clock", "value": {n: p for n in ns}}, st.lists(st.sampled_from(NODES)), st.integers()
    ),
    st.builds(
        lambda ns: {"f": "strobe-clock", "value": {n: {"delta-ms": 9, "period-ms": 1, "duration-s": 1} for n in ns}},
        st.lists(st.sampled_from(NODES)),
    ),
    st.builds(lambda v: {"f": "reset-clock", "value": v}, st.lists(st.sampled_from(NODES))),
    st.builds(lambda k: {"f": "start-partition", "value": {"kind": k}}, st.sampled_from(partitions.KINDS)),
)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10_000),
    st.lists(st.sampled_from(schedule.PACKAGES), min_size=1, unique=True),
    st.lists(hand_events, max_size=12),
    st.randoms(use_true_random=False),
    st.one_of(st.none(), st.sampled_from(NODES)),
)
def test_any_schedule_then_heal_all_leaves_nothing_in_force(
    seed: int, packages: list[str], extra: list[dict[str, Any]], rng: random.Random, leader: str | None
) -> None:
    fake, nem = interpreter()
    events = [*schedule.generate(seed, NODES, packages, time_limit_s=30, interval_s=2), *extra]
    rng.shuffle(events)  # in any order: stops before starts, repeats, overlaps
    for event in events:
        nem.apply(event, leader if nem.needs_leader(event) else None)
    heal = nem.heal_events(packages)
    for event in heal:
        nem.apply(event)
    assert fake.clean(), fake.__dict__
    assert not any(nem.in_force().values())
    assert {e["f"] for e in heal} >= {schedule.HEAL[p] for p in packages}


def test_clock_faults_can_target_the_leader() -> None:
    fake, nem = interpreter()
    step = {"delta-ms": -20_000, "drift-ppm": 0}
    event = {"f": "bump-clock", "value": {"leader": step}}
    assert nem.needs_leader(event) and not nem.needs_leader({"f": "bump-clock", "value": {"n1": step}})
    assert nem.apply(event, "n4") == Applied({"n4": -20_000}, {"n4": step})  # schedule.json names the node
    assert fake.offsets == {"n4": -20_000} and nem.skewed == {"n4"}
    both = nem.apply({"f": "rate-clock", "value": {"n1": 100, "leader": 500}}, "n1")  # a named node's own entry
    assert both.realised == {"n1": 100}
    assert nem.apply({"f": "bump-clock", "value": {"leader": step}}, None).realised == {}  # no leader: nobody
    with pytest.raises(ValueError, match="needs"):
        nem.apply({"f": "bump-clock", "value": "leader"}, "n1")


def test_the_clock_nemesis_steps_an_isolated_leader_back_and_leaves_other_packages_alone() -> None:
    for seed in range(5):
        events = schedule.generate(seed, NODES, ["partition", "kill", "pause", "clock"], 60, 5.0)
        clock = [e for e in events if e["package"] == "clock"]
        starts = [i for i, e in enumerate(clock) if e["f"] == "start-partition"]
        assert starts, "no leader clock fault in a minute"
        for i in starts:  # cut the leader off, step its clock back, then reset clocks before healing
            cut, bump = clock[i], clock[i + 1]
            assert cut["value"] == {"kind": "leader"} and bump["f"] == "bump-clock"
            assert list(bump["value"]) == ["leader"] and bump["value"]["leader"]["delta-ms"] <= -8192
            assert 0 < bump["at"] - cut["at"] < schedule.SECOND // 2
            if i + 3 < len(clock):
                assert [e["f"] for e in clock[i + 2 : i + 4]] == ["reset-clock", "stop-partition"]
        # the clock package draws last: runs without it get the same faults as before it had leader faults
        without = schedule.generate(seed, NODES, ["partition", "kill", "pause"], 60, 5.0)
        assert without == [e for e in events if e["package"] != "clock"]
