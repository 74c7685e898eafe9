"""TestSpec: validated without side effects, one serialisation (test.json, the command line), named streams."""

from __future__ import annotations

import argparse
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.queue import ANOMALY_TYPES
from checkers.txn_queue import ANOMALY_TYPES as TXN_ANOMALY_TYPES
from harness.cli import build_parser
from harness.core.spec import SpecError, TestSpec, from_args
from harness.core.streams import STREAMS, stream
from harness.db import registry as dbs
from harness.db.kraftwerk import NodesOptions
from harness.nemesis.partitions import KINDS
from harness.nemesis.schedule import ALL, PACKAGES
from harness.real.backends.registry import NAMES as BACKENDS
from nodes.raft.bugs import ALL_BUGS
from workloads import registry
from workloads.queue.options import QueueOptions
from workloads.register import RegisterOptions

names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=12)
seconds = st.floats(0.001, 86400, allow_nan=False)


@st.composite
def queue_options(draw: st.DrawFn, nodes: int) -> QueueOptions:
    replication = draw(st.integers(1, nodes))
    txn = draw(st.booleans())
    return QueueOptions(
        acks="all" if txn else draw(st.sampled_from(("all", "1", "0"))),
        min_isr=draw(st.integers(1, replication)),
        replication_factor=replication,
        partitions=draw(st.integers(1, 100)),
        unclean=draw(st.booleans()),
        sub_via="assign" if txn else draw(st.sampled_from(("assign", "subscribe"))),
        txn=txn,
        allow=tuple(draw(st.lists(st.sampled_from(TXN_ANOMALY_TYPES if txn else ANOMALY_TYPES), unique=True))),
    )


@st.composite
def specs(draw: st.DrawFn) -> TestSpec:
    nodes = draw(st.integers(1, 15))
    backend = draw(st.sampled_from(BACKENDS))
    workload = draw(st.sampled_from(registry.NAMES))
    options = draw(queue_options(nodes)) if workload == "queue" else RegisterOptions()
    parts = dbs.kind("kraftwerk").bugs
    reachable = sorted(b for b in ALL_BUGS if parts[b] in options.exercises())
    return TestSpec(
        workload=workload,
        backend=backend,
        nemeses=tuple(draw(st.lists(st.sampled_from(PACKAGES), unique=True))),
        partition_kinds=tuple(draw(st.lists(st.sampled_from(KINDS), min_size=1, unique=True))),
        nodes=nodes,
        concurrency=draw(st.integers(1, 1000)),
        time_limit=draw(seconds),
        interval=draw(st.floats(0.001, 1e6)),
        rate=draw(st.floats(0.001, 100_000)),
        seed=draw(st.integers(0, 2**63)),
        bugs=tuple(draw(st.lists(st.sampled_from(reachable)))),
        check_time_limit=draw(st.floats(0.001, 1e6)),
        ssh_hosts=draw(names) if backend == "ssh" else None,
        ssh_user=draw(names),
        ssh_key=draw(st.none() | names),
        ssh_known_hosts=draw(st.none() | names),
        name=draw(st.just("") | names),
        settle=draw(st.floats(0, 1e4)),
        workload_options=options,
        db_options=NodesOptions(
            lose_unsynced=draw(st.booleans()),
            fsync_delay=draw(st.integers(0, 10_000)),
            clock_source=draw(st.sampled_from(("wall", "monotonic"))),
            lease_reads=draw(st.booleans()),
        ),
    )


@settings(max_examples=300)
@given(specs())
def test_test_json_and_the_command_line_round_trip(spec: TestSpec) -> None:
    """from_json(to_json(s)) == s through real JSON text, and the reproduce command's options give s back."""
    doc = json.loads(json.dumps(spec.to_json()))
    assert TestSpec.from_json(doc) == spec
    assert TestSpec.from_json({**doc, "argv": ["kraftwerk"], "start-time": "now", "replay": {}}) == spec
    assert TestSpec.from_argv(spec.to_argv()) == spec
    assert spec.reproduce().startswith("kraftwerk test --workload ")


def test_the_reproduce_command_parses_as_kraftwerk_test() -> None:
    """The words `kraftwerk test` itself parses (the CLI's parser, not only from_argv's) give the spec back."""
    spec = TestSpec(workload="queue", seed=3, workload_options=QueueOptions(acks="1", allow=("lost-write",)))
    args = build_parser().parse_args(["test", *spec.to_argv()])
    assert from_args(args) == spec
    assert "--name" not in spec.to_argv()  # the default name is not spelled out
    assert TestSpec.from_argv(["--name=-odd", "--seed", "1"]).name == "-odd"


def test_test_json_keeps_its_keys() -> None:
    """The keys docs/formats.md "test.json" names and the pipeline reads are there, named as before; the
    workload's own keys only for its workload, ssh keys only on the ssh backend."""
    doc = TestSpec(seed=7, bugs=("stale-read",)).to_json()
    for key in ("name", "workload", "backend", "nemesis", "nodes", "concurrency", "time-limit", "interval", "seed"):
        assert key in doc
    for key in ("bugs", "check-time-limit", "rate", "settle-seconds", "partition-kinds", "db"):
        assert key in doc
    assert doc["kraftwerk"]["clock-source"] == "wall"  # the DB's own options, under its name
    assert doc["name"] == "register-sim" and doc["nemesis"] == list(ALL) and doc["bugs"] == ["stale-read"]
    assert "acks" not in doc and "ssh-hosts" not in doc
    queue = TestSpec.of(workload="queue", backend="docker", partition_kinds=("leader",), lose_unsynced=True).to_json()
    for key in ("acks", "min-isr", "replication-factor", "partitions", "unclean", "allow", "sub-via", "txn"):
        assert key in queue
    assert queue["kraftwerk"]["lose-unsynced"] is True and queue["partition-kinds"] == ["leader"]
    assert "ssh-hosts" not in queue


def test_older_test_json_still_loads() -> None:
    """Runs stored by earlier versions: acks as the producer's number, no replication factor (then min(3, nodes)),
    keys missing (their defaults)."""
    old = {"workload": "queue", "nodes": 2, "seed": 1, "acks": -1, "allow": ["lost-write"], "min-isr": 1}
    spec = TestSpec.from_json(old)
    assert spec.workload_options == QueueOptions(acks="all", replication_factor=2, min_isr=1, allow=("lost-write",))
    assert TestSpec.from_json({"seed": 5}) == TestSpec(seed=5)


def test_options_that_do_not_apply_take_their_defaults() -> None:
    assert TestSpec(ssh_user="me") == TestSpec()  # ssh options off the ssh backend
    assert TestSpec(bugs=("lazy-flush", "stale-read", "lazy-flush")).bugs == ("lazy-flush", "stale-read")
    assert TestSpec(workload="queue").workload_options == QueueOptions()
    with pytest.raises(SpecError, match="takes QueueOptions, not RegisterOptions"):
        TestSpec(workload="queue", workload_options=RegisterOptions())


def test_with_options_changes_the_test_and_its_workload_options() -> None:
    spec = TestSpec(workload="queue", seed=2)
    assert spec.with_options(acks="1", nodes=3).workload_options.acks == "1"
    assert spec.with_options(workload="register").workload_options == RegisterOptions()
    with pytest.raises(SpecError, match="no option.s. acks for --workload register --db kraftwerk"):
        TestSpec().with_options(acks="1")
    assert TestSpec().with_options(fsync_delay=5).db_options.fsync_delay == 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nodes": 0}, "--nodes must be between 1 and 15, got 0"),
        ({"concurrency": 0}, "--concurrency"),
        ({"time_limit": 0}, "--time-limit"),
        ({"interval": -1}, "--interval"),
        ({"rate": 0}, "--rate"),
        ({"backend": "k8s"}, "--backend k8s"),
        ({"workload": "bank"}, "--workload bank"),
        ({"bugs": ("nope",)}, "--bug nope: not a seeded bug of --db kraftwerk"),
        ({"nemeses": ("flood",)}, "--nemesis: unknown flood"),
        ({"partition_kinds": ("ring",)}, "--partition-kinds: unknown ring"),
        ({"workload": "queue", "nodes": 2}, "--replication-factor must be between 1 and --nodes (2), got 3"),
        ({"workload": "queue", "workload_options": QueueOptions(allow=("nonsense",))}, "--allow nonsense"),
        ({"workload": "queue", "workload_options": QueueOptions(txn=True, acks="1")}, "--txn needs --acks all"),
        ({"backend": "ssh"}, "--backend ssh needs --ssh-hosts FILE"),
        ({"db_options": NodesOptions(clock_source="tsc")}, "--clock-source must be one of wall, monotonic, got 'tsc'"),
        ({"backend": "docker", "ssh_hosts": "h"}, "--ssh-hosts is only for --backend ssh"),
        ({"db": "etcd"}, "--db etcd runs on --backend docker, netns or local, not sim"),
    ],
)
def test_a_bad_option_is_named(options: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TestSpec(**options)


def test_building_from_the_command_line_changes_nothing() -> None:
    """The namespace is read, not filled in; a bad value is named; an option of another workload is refused."""
    parser = build_parser()
    args = parser.parse_args(["test", "--nemesis", "kill,pause", "--partition-kinds", "leader", "--seed", "4"])
    before = dict(vars(args))
    spec = from_args(args)
    assert vars(args) == before
    assert (spec.nemeses, spec.partition_kinds, spec.seed) == (("kill", "pause"), ("leader",), 4)
    assert from_args(parser.parse_args(["test"])).seed != from_args(parser.parse_args(["test"])).seed  # fresh
    with pytest.raises(SpecError, match="--bug nope"):
        from_args(argparse.Namespace(**{**before, "bug": ["nope"]}))
    with pytest.raises(
        SpecError, match="--txn is an option of --workload queue, not of --workload register --db kraftwerk"
    ):
        from_args(parser.parse_args(["test", "--txn"]))
    with pytest.raises(SpecError, match="test.json: nodes"):
        TestSpec.from_json({"nodes": "five"})
    with pytest.raises(SpecError, match="--nemesis"):
        TestSpec.from_argv(["--nemesis", "kill,flood"])


def test_every_command_that_runs_tests_takes_the_same_test_options() -> None:
    """test, explore, replay and shrink: one generated set of test options (--rate among them)."""

    def flags(verb: str) -> set[str]:
        sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
        return {s for a in sub.choices[verb]._actions for s in a.option_strings}

    # --test-count is how many times `test` runs the test, not an option of the test
    test = flags("test") - {"--store", "-q", "--quiet", "-h", "--help", "--test-count"}
    assert "--rate" in test and "--acks" in test and "--txn" in test and "--sub-via" in test
    for verb in ("explore", "replay", "shrink"):
        assert test <= flags(verb), f"{verb} lacks {sorted(test - flags(verb))}"


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
    for name in registry.NAMES:
        w = TestSpec(workload=name, seed=42, nodes=3).make_workload(["n1", "n2", "n3"], 2.0)
        assert w.ops.rng.random() == stream("workload", 42).random()  # type: ignore[attr-defined]
        assert w.client(3, 13).rng.random() == stream("client", 42, 3, 13).random()  # type: ignore[attr-defined]
