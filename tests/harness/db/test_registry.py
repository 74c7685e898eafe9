"""The DB registry (harness.db.registry): declarations, the generic refusals, options, ports per host."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import types
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.commands.test import reproduce_command
from harness.core.spec import SpecError, TestSpec, from_args
from harness.db import registry as dbs
from harness.nemesis.schedule import PACKAGES
from harness.real.backends import registry as backends
from harness.real.backends.local import LocalBackend
from nodes.raft.bugs import ALL_BUGS
from workloads.options import options_of
from workloads.registry import KINDS as WORKLOADS


def test_every_db_declares_what_it_can_do() -> None:
    assert dbs.names()[0] == "kraftwerk" and set(dbs.names()) == set(dbs.MODULES)
    apis = {w.api for w in WORKLOADS.values()}
    for kind in dbs.kinds():
        assert kind.summary and callable(kind.factory) and kind.ports >= 0
        assert set(kind.backends) <= set(backends.NAMES) and set(kind.nemeses) <= set(PACKAGES)
        assert set(kind.apis) <= apis
        options = kind.options()  # every option has a default, and the defaults are fine
        assert dataclasses.is_dataclass(options) and options.problem() is None
        assert all(meta.flag.startswith("--") for _, meta in options_of(kind.options))
        assert kind.why_not("docker", ()) is None  # nothing on this machine is needed for docker
    flags = [meta.flag for cls in dbs.option_classes().values() for _, meta in options_of(cls)]
    assert len(flags) == len(set(flags))  # one command line holds every DB's options


def test_our_nodes_declare_their_bugs_by_part_and_only_they_run_on_the_simulator() -> None:
    nodes = dbs.kind("kraftwerk")
    assert set(nodes.bugs) == ALL_BUGS
    assert nodes.bugs["forget-vote"] == "raft" and nodes.bugs["stale-read"] == "kv"
    assert nodes.bugs["dedup-window-1"] == "idempotence" and nodes.bugs["hw-from-leader"] == "broker"
    assert nodes.bugs["marker-partial"] == "txn" and nodes.bugs["coordinator-no-reload"] == "group"
    assert nodes.bugs["skip-crc"] == "storage"
    assert [k.name for k in dbs.kinds() if "sim" in k.backends] == ["kraftwerk"]
    assert dbs.kind("etcd").bugs == {}


def test_unknown_db_names_the_known_ones() -> None:
    known = ", ".join(dbs.names())
    assert known.startswith("kraftwerk, etcd")
    with pytest.raises(dbs.UnknownDB, match=f"--db mongo: unknown \\(known: {known}\\)"):
        dbs.kind("mongo")
    assert dbs.problem("mongo", "sim") == f"--db mongo: unknown (known: {known})"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("etcd", "sim"), "--db etcd runs on --backend docker, netns or local, not sim"),
        (("etcd", "ssh"), "--db etcd runs on --backend docker, netns or local, not ssh"),
        (("etcd", "docker", "kafka"), "--db etcd does not serve the 'kafka' client API; it serves --workload register"),
        (("etcd", "docker", "kv", ["kill", "disk"]), "--nemesis disk: --db etcd does not support it"),
        (("etcd", "docker", "kv", [], ["stale-read"]), "--bug stale-read: not a seeded bug of --db etcd"),
        (("kraftwerk", "sim", "kv", [], ["no-such-bug"]), "--bug no-such-bug: not a seeded bug of --db kraftwerk"),
    ],
)
def test_generic_refusals_name_the_option_and_what_would_work(args: tuple, words: str) -> None:
    assert words in (dbs.problem(*args) or "")


def test_what_each_db_can_do_is_not_refused() -> None:
    assert dbs.problem("kraftwerk", "sim", "kafka", PACKAGES, sorted(ALL_BUGS)) is None
    assert dbs.problem("etcd", "netns", "kv", ["partition", "kill", "pause", "clock", "packet"]) is None
    assert "--db kraftwerk has it" in (dbs.problem("etcd", "docker", "kv", [], ["stale-read"]) or "")
    assert "workload queue" in (dbs.problem("etcd", "docker", "kafka", workload="queue") or "")
    bad = dataclasses.replace(dbs.kind("etcd").options(), read="stale")
    why = dbs.problem("etcd", "docker", options=bad)
    assert why == "--etcd-read stale: unknown (known: linearizable, serializable)"


def test_a_new_db_is_one_module_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DB that does not list the simulator is refused there by the registry, for the test command too."""

    @dataclasses.dataclass(frozen=True)
    class NoOptions:
        def problem(self) -> str | None:
            return None

    module = types.ModuleType("fake_db")
    module.KIND = dbs.DBKind(  # type: ignore[attr-defined]
        name="fakedb",
        summary="a fake DB",
        options=NoOptions,
        backends=("docker",),
        apis=("kv",),
        nemeses=("kill",),
        factory=lambda ctx: None,
        ports=3,
    )
    monkeypatch.setitem(sys.modules, "fake_db", module)
    monkeypatch.setitem(dbs.MODULES, "fakedb", "fake_db")
    assert dbs.kind("fakedb").ports == 3 and "fakedb" in dbs.option_classes()
    assert dbs.problem("fakedb", "sim") == "--db fakedb runs on --backend docker, not sim"
    with pytest.raises(SpecError, match="--db fakedb runs on --backend docker, not sim"):
        TestSpec(db="fakedb", backend="sim")  # the spec refuses it in the same one place
    monkeypatch.setitem(dbs.MODULES, "wrong", "fake_db")
    with pytest.raises(TypeError, match="must be the DBKind named 'wrong'"):
        dbs.kind("wrong")


def test_options_from_the_spec_and_from_stored_runs() -> None:
    etcd = TestSpec.of(backend="docker", db="etcd", read="serializable")
    assert etcd.db_options == dbs.kind("etcd").options(read="serializable")
    nodes = TestSpec.of(backend="local", lose_unsynced=True, fsync_delay=3, clock_source="monotonic", lease_reads=True)
    assert nodes.db_options.properties() == {
        "kraftwerk.volatile.writes": "true",
        "kraftwerk.fsync.delay.ms": "3",
        "clock.source": "monotonic",
        "kraftwerk.lease.reads": "true",
    }
    # runs stored before DBs had options of their own keep them beside the others; later ones under the DB's name
    assert dbs.stored_options("etcd", {"db": "etcd", "etcd-read": "serializable"}).read == "serializable"
    assert dbs.stored_options("etcd", {"db": "etcd", "etcd": {"etcd-read": "serializable"}}).read == "serializable"
    assert dbs.stored_options("kraftwerk", {"fsync-delay-ms": 7, "lease-reads": True}) == dataclasses.replace(
        dbs.kind("kraftwerk").options(), fsync_delay=7, lease_reads=True
    )
    with pytest.raises(ValueError, match="fsync-delay-ms"):
        dbs.stored_options("kraftwerk", {"fsync-delay-ms": "slow"})


def test_no_two_options_classes_share_a_field_name() -> None:
    """The test's, every workload's and every DB's options are named by field in TestSpec.of, with_options and
    the command line's values: one name, one option."""
    from harness.core.spec import _option_classes

    seen: dict[str, str] = {f.name: "TestSpec" for f in dataclasses.fields(TestSpec)}
    for cls in _option_classes():
        for f in dataclasses.fields(cls):
            assert f.name not in seen, f"{cls.__name__}.{f.name} is also {seen[f.name]}'s"
            seen[f.name] = cls.__name__


@pytest.mark.parametrize(
    "words",
    [
        ["--db", "etcd", "--etcd-read", "serializable", "--backend", "docker"],
        ["--backend", "local", "--lose-unsynced", "--fsync-delay", "5", "--clock-source", "monotonic"],
    ],
)
def test_db_options_on_the_command_line_and_back(words: list[str]) -> None:
    args = build_parser().parse_args(["test", *words])
    spec = from_args(args)
    line = reproduce_command(spec)
    assert all(w in shlex.split(line) for w in words)
    again = build_parser().parse_args(shlex.split(line)[1:])
    assert from_args(again) == spec


def test_local_backend_gives_each_host_the_ports_asked_for(tmp_path: Path) -> None:
    backend = LocalBackend(base_dir=tmp_path)
    with backend:
        backend.create(3, ports_per_host=3)
        ports = [p for name in ("n1", "n2", "n3") for p in backend.ports[name]]
        assert all(len(backend.ports[n]) == 3 for n in ("n1", "n2", "n3")) and len(set(ports)) == 9
    fixed = LocalBackend(directory=tmp_path / "fixed", first=2, base_port=20000)
    with fixed:
        fixed.create(2)  # our nodes' layout: node i's client port P+2(i-1), its controller port the next
        assert fixed.ports == {"n1": (20001, 20000), "n2": (20003, 20002)}
