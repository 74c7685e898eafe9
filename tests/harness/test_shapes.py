"""Cluster shapes (`--controllers N --controller-roles dedicated|combined`): the option, the nemesis targets it
adds, the simulator's layout and the real nodes' node.properties."""

from __future__ import annotations

import random
from typing import Any

import pytest

from harness.core.shape import Shape
from harness.core.spec import SpecError, TestSpec
from harness.db.nodes import NodeDB
from harness.nemesis.interpreter import NemesisInterpreter
from harness.nemesis.schedule import generate
from harness.real.backends.base import Host
from harness.real.control.netns import NetnsTransport
from harness.sim.runs import simulate
from harness.sim.runtime import SimRuntime
from nodes.broker import BrokerNode
from tests.harness.nemesis.test_interpreter import RecordingFaults

EVERY_NEMESIS = ("partition", "kill", "pause", "clock", "packet", "disk")
SHAPES = {  # --controllers 3 --nodes 5: two brokers when the controllers are dedicated
    "dedicated": {"controllers": 3, "controller_roles": "dedicated", "replication_factor": 2},
    "combined": {"controllers": 3, "controller_roles": "combined"},
}


# ------------------------------------------------------------------ the option


def test_shape_roles() -> None:
    dedicated, combined, default = Shape(5, 3), Shape(5, 3, "combined"), Shape(5)
    assert dedicated.voter_ids == combined.voter_ids == [1, 2, 3]
    assert default.voter_ids == [1, 2, 3, 4, 5] and not default.separate
    assert dedicated.broker_names == ["n4", "n5"]
    assert combined.broker_names == default.broker_names == ["n1", "n2", "n3", "n4", "n5"]
    assert [dedicated.process_roles(i) for i in (1, 4)] == ["controller", "broker"]
    assert [combined.process_roles(i) for i in (1, 4)] == ["controller,broker", "broker"]
    assert default.process_roles(4) == "controller,broker" and default.process_roles(4, brokers=False) == "controller"
    assert dedicated.groups() == {"controllers": ["n1", "n2", "n3"], "brokers": ["n4", "n5"]}


@pytest.mark.parametrize("roles", ["dedicated", "combined"])
def test_option_round_trips_through_test_json_and_the_command_line(roles: str) -> None:
    spec = TestSpec.of(workload="queue", nodes=5, seed=4, **SHAPES[roles])
    assert TestSpec.from_json(spec.to_json()) == spec
    assert TestSpec.from_argv(spec.to_argv()) == spec
    assert spec.to_json()["controllers"] == 3 and spec.to_json()["controller-roles"] == roles
    assert spec.config()["controllers"] == 3
    assert spec.shape == Shape(5, 3, roles)


def test_default_shape_is_every_node_a_combined_voter_and_left_out_of_the_configuration() -> None:
    spec = TestSpec(workload="queue", seed=1)
    assert not spec.shape.separate
    assert "--controllers" not in spec.to_argv() and "--controller-roles" not in spec.to_argv()
    assert "controllers" not in spec.config() and "controller-roles" not in spec.config()
    # a test.json stored before the option existed reads as the default shape
    doc = {k: v for k, v in spec.to_json().items() if k not in ("controllers", "controller-roles")}
    assert TestSpec.from_json(doc) == spec


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workload": "queue", "controllers": 6}, "--controllers must be between 1 and --nodes (5), got 6"),
        ({"workload": "queue", "controllers": -1}, "--controllers must be between 1 and --nodes (5), got -1"),
        ({"workload": "queue", "controllers": 5}, "--controllers 5 --controller-roles dedicated leaves no broker"),
        ({"workload": "queue", "controller_roles": "combined"}, "--controller-roles needs --controllers N"),
        ({"workload": "register", "controllers": 3}, "--controllers: --workload register has no brokers"),
        ({"workload": "queue", "controllers": 3}, "--replication-factor 3 needs 3 brokers"),
        ({"workload": "queue", "controllers": 2, "db": "etcd"}, "--controllers: only our nodes"),
        ({"workload": "queue", "controllers": 1, "nemeses": ("disk",)}, "--controllers 1 --nemesis disk: a single"),
    ],
)
def test_bad_shapes_are_refused_naming_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        TestSpec.of(seed=1, **options)


def test_bad_shape_on_the_command_line_exits_254(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["test", "--workload", "queue", "--controllers", "9", "--time-limit", "1"]) == 254
    assert "--controllers must be between 1 and --nodes" in capsys.readouterr().err


def test_controller_roles_is_a_choice() -> None:
    with pytest.raises(SpecError, match="--controller-roles"):
        TestSpec.from_argv(["--workload", "queue", "--controllers", "3", "--controller-roles", "both"])


# ------------------------------------------------------------------ nemesis targets


def _interpreter(shape: Shape) -> tuple[NemesisInterpreter, RecordingFaults]:
    faults = RecordingFaults()
    return NemesisInterpreter(faults, shape.names, random.Random(0), shape.groups()), faults  # type: ignore[arg-type]


def test_role_targets_resolve() -> None:
    nemesis, _ = _interpreter(Shape(5, 3))
    assert nemesis.targets("controllers", None) == ["n1", "n2", "n3"]
    assert nemesis.targets("brokers", None) == ["n4", "n5"]
    event = {"f": "kill", "value": "active-controller"}
    assert nemesis.needs_controller(event) and not nemesis.needs_leader(event)
    applied = nemesis.apply(event, None, "n2")
    assert applied.realised == ["n2"] and nemesis.down == {"n2"}
    assert nemesis.apply({"f": "pause", "value": "active-controller"}, None, None).realised == []  # none known
    assert nemesis.apply({"f": "pause", "value": "brokers"}).realised == ["n4", "n5"]
    disk = {"f": "start-disk", "value": {"fault": "torn", "nodes": "active-controller", "seed": 1}}
    assert nemesis.needs_controller(disk) and not nemesis.needs_leader(disk)
    packet = {"f": "start-packet", "value": {"behaviours": {"loss": {"percent": 5}}, "nodes": "controllers"}}
    nemesis.apply(packet)
    assert nemesis.packets is not None


def test_without_a_shape_role_targets_mean_every_node() -> None:
    nemesis = NemesisInterpreter(RecordingFaults(), ["n1", "n2", "n3"], random.Random(0))  # type: ignore[arg-type]
    assert nemesis.targets("controllers", None) == nemesis.targets("brokers", None) == ["n1", "n2", "n3"]


def test_schedules_draw_role_targets_only_for_a_shape_in_roles() -> None:
    names = [f"n{i}" for i in range(1, 6)]
    roles = {"active-controller", "controllers", "brokers"}

    def targets(events: list[dict[str, Any]]) -> set[Any]:
        out = set()
        for e in events:
            value = e["value"]
            if e["f"] == "start-disk":
                value = value["nodes"]
            if e["f"] in ("kill", "pause", "start-disk") and isinstance(value, str):
                out.add(value)
        return out

    plain = generate(3, names, ["kill", "pause", "disk"], 600, 5.0)
    shaped = generate(3, names, ["kill", "pause", "disk"], 600, 5.0, roles=True)
    assert not targets(plain) & roles
    assert targets(shaped) >= roles
    assert generate(3, names, ["kill", "pause", "disk"], 600, 5.0, roles=False) == plain


# ------------------------------------------------------------------ the simulator


def _spec(roles: str, seed: int = 11, time_limit: float = 10.0) -> TestSpec:
    return TestSpec.of(
        workload="queue", nodes=5, seed=seed, time_limit=time_limit, nemeses=EVERY_NEMESIS, **SHAPES[roles]
    )


def test_simulated_dedicated_layout_builds_controllers_and_observers() -> None:
    sim = SimRuntime(_spec("dedicated"))
    assert sim.voter_ids == [1, 2, 3]
    assert list(sim.workload.nodes) == ["n4", "n5"]
    cores = {n.name: n.make_core() for n in sim.nodes.values()}
    assert all(type(c) is BrokerNode for c in cores.values())
    assert [c.is_broker for c in cores.values()] == [False, False, False, True, True]
    assert [c.raft.observer for c in cores.values()] == [False, False, False, True, True]


@pytest.mark.parametrize("roles", ["dedicated", "combined"])
def test_simulated_shape_every_nemesis_valid_and_deterministic(roles: str) -> None:
    spec = _spec(roles)
    sent_to: set[str] = set()
    runtime = SimRuntime(spec)
    send = runtime.transport.send

    def recording(link: str, request: Any, deliver: Any) -> None:
        sent_to.add(request.node)
        send(link, request, deliver)

    runtime.transport.send = recording  # type: ignore[method-assign]
    first = runtime.run()
    again = SimRuntime(spec).run()
    assert first.stats["history-sha256"] == again.stats["history-sha256"]
    assert first.schedule == again.schedule
    # the clients talked to the brokers only; partitions live on brokers only
    brokers = set(spec.shape.broker_names)
    assert sent_to and sent_to <= brokers
    assert first.assignment and all(set(r) <= brokers for r in first.assignment.values())
    assert first.invariants["valid"] is True, first.invariants
    assert "ObserverNeverVotesOrLeads" in first.invariants["checked"]
    verdict = simulate(spec, check_time_limit=60).results
    assert verdict["valid"] is True, verdict
    assert verdict["queue"]["stats"]["sends"]["ok"] > 50


def test_simulated_active_controller_kill_moves_the_quorum_leader() -> None:
    spec = _spec("dedicated", time_limit=8.0)
    schedule = [
        {"at": 2_000_000_000, "package": "kill", "f": "kill", "value": "active-controller"},
        {"at": 5_000_000_000, "package": "kill", "f": "start", "value": None},
    ]
    from harness.sim.cluster import SimPlan

    result = SimRuntime(spec, SimPlan(schedule=schedule)).run()
    killed = [op.value for op in result.recorder.ops if op.f == "kill" and op.process == "nemesis"]
    assert killed and killed[0] and killed[0][0] in ("n1", "n2", "n3"), killed
    assert result.invariants["valid"] is True


# ------------------------------------------------------------------ the real nodes' configuration


def _properties(db: NodeDB, name: str) -> dict[str, str]:
    h = next(h for h in db.hosts if h.name == name)
    return dict(line.split("=", 1) for line in db.properties(h).splitlines())


def _hosts(n: int) -> list[Host]:
    return [Host(f"n{i}", f"10.1.0.{i}", NetnsTransport(f"n{i}", None), f"/w/n{i}") for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("roles", "first", "last"), [("dedicated", "controller", "broker"), ("combined", "controller,broker", "broker")]
)
def test_node_properties_write_the_shape(roles: str, first: str, last: str) -> None:
    db = NodeDB(_hosts(5), broker=True, shape=Shape(5, 3, roles))
    n1, n5 = _properties(db, "n1"), _properties(db, "n5")
    assert n1["process.roles"] == first and n5["process.roles"] == last
    voters = "1@10.1.0.1:9093,2@10.1.0.2:9093,3@10.1.0.3:9093"
    assert n1["controller.quorum.voters"] == n5["controller.quorum.voters"] == voters
    assert n1["listeners"] == "CONTROLLER://0.0.0.0:9093,CLIENT://0.0.0.0:9092"
    assert n5["listeners"] == "BROKER://0.0.0.0:9093,CLIENT://0.0.0.0:9092"  # no controller listener
    assert n5["advertised.listeners"] == "BROKER://10.1.0.5:9093,CLIENT://10.1.0.5:9092"
    assert ("advertised.listeners" in n1) == (roles == "combined")
    assert db.broker_names() == Shape(5, 3, roles).broker_names


def test_node_properties_default_shape_unchanged() -> None:
    for shape in (None, Shape(3)):
        db = NodeDB(_hosts(3), broker=True, shape=shape)
        props = _properties(db, "n2")
        assert props["process.roles"] == "controller,broker"
        assert props["controller.quorum.voters"] == "1@10.1.0.1:9093,2@10.1.0.2:9093,3@10.1.0.3:9093"


def test_shrink_keeps_enough_nodes_for_the_shape() -> None:
    from harness.tools.shrink import _runs_on

    dedicated, combined = _spec("dedicated"), _spec("combined")
    assert [n for n in range(3, 6) if _runs_on(dedicated, n)] == [5]  # three controllers and two brokers
    assert [n for n in range(3, 6) if _runs_on(combined, n)] == [3, 4, 5]
