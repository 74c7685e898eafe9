"""TestSpec: validated without side effects, test.json round trip, named random streams."""

from __future__ import annotations

import argparse
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.queue import ANOMALY_TYPES
from harness.cli import build_parser
from harness.core.spec import ACKS, BACKENDS, WORKLOADS, SpecError, TestSpec
from harness.core.streams import STREAMS, stream
from harness.nemesis.partitions import KINDS
from harness.nemesis.schedule import ALL, PACKAGES
from nodes.raft.bugs import ALL_BUGS

names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=12)


@st.composite
def specs(draw: st.DrawFn) -> TestSpec:
    nodes = draw(st.integers(1, 15))
    replication = draw(st.integers(1, nodes))
    backend = draw(st.sampled_from(BACKENDS))
    return TestSpec(
        workload=draw(st.sampled_from(WORKLOADS)),
        backend=backend,
        nemeses=tuple(draw(st.lists(st.sampled_from(PACKAGES), unique=True))),
        partition_kinds=tuple(draw(st.lists(st.sampled_from(KINDS), min_size=1, unique=True))),
        nodes=nodes,
        concurrency=draw(st.integers(1, 1000)),
        time_limit=draw(st.floats(0.001, 86400)),
        interval=draw(st.floats(0.001, 1e6)),
        seed=draw(st.integers(0, 2**63)),
        bugs=tuple(draw(st.lists(st.sampled_from(sorted(ALL_BUGS))))),
        lose_unsynced=draw(st.booleans()),
        fsync_delay=draw(st.integers(0, 10_000)),
        check_time_limit=draw(st.floats(0.001, 1e6)),
        acks=draw(st.sampled_from(list(ACKS))),
        min_isr=draw(st.integers(1, replication)),
        replication_factor=replication,
        partitions=draw(st.integers(1, 100)),
        unclean=draw(st.booleans()),
        allow=tuple(draw(st.lists(st.sampled_from(ANOMALY_TYPES)))),
        ssh_hosts=draw(names) if backend == "ssh" else draw(st.none() | (names if backend == "sim" else st.none())),
        ssh_user=draw(names),
        ssh_key=draw(st.none() | names),
        ssh_known_hosts=draw(st.none() | names),
        name=draw(st.just("") | names),
        settle=draw(st.floats(0, 1e4)),
        clock_source=draw(st.sampled_from(("wall", "monotonic"))),
    )


@settings(max_examples=300)
@given(specs())
def test_test_json_round_trips(spec: TestSpec) -> None:
    """to_json is what test.json holds (through real JSON text); from_json gives the same spec back."""
    doc = json.loads(json.dumps(spec.to_json()))
    assert TestSpec.from_json(doc) == spec
    assert TestSpec.from_json({**doc, "argv": ["kraftwerk"], "start-time": "now", "replay": {}}) == spec


def test_test_json_keeps_its_keys() -> None:
    """The keys docs/formats.md "test.json" names and the pipeline reads are there, named as before; queue and ssh
    keys only when used."""
    doc = TestSpec(seed=7, bugs=("stale-read",)).to_json()
    assert list(doc) == [
        "name",
        "workload",
        "backend",
        "nemesis",
        "nodes",
        "concurrency",
        "time-limit",
        "interval",
        "seed",
        "bugs",
        "check-time-limit",
        "clock-source",
    ]
    assert doc["clock-source"] == "wall"
    assert doc["name"] == "register-sim" and doc["nemesis"] == list(ALL) and doc["bugs"] == ["stale-read"]
    queue = TestSpec(workload="queue", backend="docker", partition_kinds=("leader",), lose_unsynced=True).to_json()
    for key in ("acks", "min-isr", "replication-factor", "partitions", "unclean", "allow", "partition-kinds"):
        assert key in queue
    assert queue["lose-unsynced"] is True and "ssh-hosts" not in queue


def test_options_that_do_not_apply_take_their_defaults() -> None:
    assert TestSpec(acks="1", partitions=7) == TestSpec()  # queue options of a register test
    assert TestSpec(ssh_user="me") == TestSpec()  # ssh options off the ssh backend
    assert TestSpec(bugs=("lazy-flush", "stale-read", "lazy-flush")).bugs == ("lazy-flush", "stale-read")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nodes": 0}, "--nodes must be between 1 and 15, got 0"),
        ({"concurrency": 0}, "--concurrency"),
        ({"time_limit": 0}, "--time-limit"),
        ({"interval": -1}, "--interval"),
        ({"backend": "k8s"}, "--backend k8s"),
        ({"workload": "bank"}, "--workload bank"),
        ({"bugs": ("nope",)}, "--bug nope: unknown"),
        ({"nemeses": ("flood",)}, "--nemesis: unknown flood"),
        ({"partition_kinds": ("ring",)}, "--partition-kinds: unknown ring"),
        ({"workload": "queue", "nodes": 2}, "--replication-factor must be between 1 and --nodes (2), got 3"),
        ({"workload": "queue", "allow": ("nonsense",)}, "--allow nonsense"),
        ({"backend": "ssh"}, "--backend ssh needs --ssh-hosts FILE"),
        ({"clock_source": "tsc"}, "--clock-source must be one of wall, monotonic, got 'tsc'"),
        ({"backend": "docker", "ssh_hosts": "h"}, "--ssh-hosts is only for --backend ssh"),
    ],
)
def test_a_bad_option_is_named(options: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TestSpec(**options)


def test_building_from_the_command_line_changes_nothing() -> None:
    """The namespace is read, not filled in (no `nemeses`, no `partition_kinds_parsed` added)."""
    args = build_parser().parse_args(["test", "--nemesis", "kill,pause", "--partition-kinds", "leader", "--seed", "4"])
    before = dict(vars(args))
    spec = TestSpec.from_args(args)
    assert vars(args) == before
    assert (spec.nemeses, spec.partition_kinds, spec.seed) == (("kill", "pause"), ("leader",), 4)
    with pytest.raises(SpecError, match="--nemesis"):
        TestSpec.from_args(argparse.Namespace(**{**before, "nemesis": "kill,flood"}))
    with pytest.raises(SpecError, match="--bug"):  # checked before the nemesis, as `kraftwerk test` always did
        TestSpec.from_args(argparse.Namespace(**{**before, "nemesis": "flood", "bug": ["nope"]}))
    with pytest.raises(SpecError, match="test.json: nodes"):
        TestSpec.from_json({"nodes": "five"})


def test_streams_keep_their_seed_strings() -> None:
    """Named streams are the very `random.Random`s the seed strings always gave (same histories)."""
    spec = TestSpec(seed=42)
    assert spec.rng("nemesis").random() == random.Random("nemesis-42").random()
    assert stream("client", 42, 3, 13).random() == random.Random("client-42-3-13").random()
    assert stream("link", 0.5, "n1", "n2").random() == random.Random("0.5-n1-n2").random()
    assert spec.rng("nemesis").random() != spec.rng("nemesis-run").random()
    with pytest.raises(KeyError, match="unknown random stream"):
        stream("nemesis-typo", 42)
    assert "nemesis" in STREAMS


def test_the_streams_main_added_keep_their_seed_strings() -> None:
    """packets, interpreter, interpreter-final, setup, transport: the strings the simulator and runner used."""
    for name in ("packets", "interpreter", "interpreter-final", "setup", "transport", "nemesis-run"):
        assert stream(name, 9).random() == random.Random(f"{name}-9").random()


def test_workloads_draw_the_workload_and_client_streams() -> None:
    """workloads/ may not import harness, so they seed these streams themselves: with the same keys."""
    from workloads import registry

    for name in ("register", "queue"):
        w = registry.make(name, ["n1", "n2", "n3"], 42)
        assert w.ops.rng.random() == stream("workload", 42).random()  # type: ignore[attr-defined]
        assert w.client(3, 13).rng.random() == stream("client", 42, 3, 13).random()  # type: ignore[attr-defined]
