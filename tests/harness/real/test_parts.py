"""Small pieces of the runner: hosts files, event merging, readiness rules, node.properties, CLI validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.db.nodes import NodeDB, merge_events
from harness.real.backends.base import Host
from harness.real.control.netns import NetnsTransport
from harness.real.ssh import SshTarget, parse_hosts


def test_hosts_file_parsing() -> None:
    text = "# cluster\n10.0.0.1\nkw@10.0.0.2:2222  # a comment\n\nnode3.example:22\n"
    assert parse_hosts(text) == [
        SshTarget("10.0.0.1", 22, None),
        SshTarget("10.0.0.2", 2222, "kw"),
        SshTarget("node3.example", 22, None),
    ]
    with pytest.raises(ValueError, match="line 1"):
        parse_hosts("10.0.0.1 10.0.0.2")
    with pytest.raises(ValueError, match="bad port"):
        parse_hosts("10.0.0.1:x")


def test_merge_keeps_each_nodes_order_even_when_its_clock_jumps_back() -> None:
    n1 = [{"node": "n1", "time": t, "i": i} for i, t in enumerate((10, 20, 5, 30))]  # clock reset after 20
    n2 = [{"node": "n2", "time": t, "i": i} for i, t in enumerate((1, 15, 25))]
    merged = merge_events([n1, n2])
    assert [e["i"] for e in merged if e["node"] == "n1"] == [0, 1, 2, 3]
    assert [e["i"] for e in merged if e["node"] == "n2"] == [0, 1, 2]
    assert merged[0]["node"] == "n2"


def _hosts(n: int) -> list[Host]:
    return [Host(f"n{i}", f"10.1.0.{i}", NetnsTransport(f"n{i}", None), f"/w/n{i}") for i in range(1, n + 1)]


def test_properties_and_spec() -> None:
    db = NodeDB(_hosts(3), bugs=["stale-read", "lazy-flush"], seed=5, env=lambda h: {"FAKETIME_X": h.name})
    props = dict(line.split("=", 1) for line in db.properties(db.hosts[1]).splitlines())
    assert props["node.id"] == "2" and props["process.roles"] == "controller"
    assert props["controller.quorum.voters"] == "1@10.1.0.1:9093,2@10.1.0.2:9093,3@10.1.0.3:9093"
    assert props["listeners"] == "CONTROLLER://0.0.0.0:9093,CLIENT://0.0.0.0:9092"
    assert props["log.dirs"] == "/w/n2/data" and props["kraftwerk.bugs"] == "lazy-flush,stale-read"
    spec = db.spec(db.hosts[1])
    assert spec.argv[1:] == ["-m", "nodes", "--config", "/w/n2/node.properties"]
    assert spec.env["FAKETIME_X"] == "n2" and spec.pidfile == "/w/n2/node.pid"
    local = NodeDB(_hosts(2), ports={"n1": (4001, 4002), "n2": (4003, 4004)}, listen_any=False)
    assert "CLIENT://10.1.0.2:4004" in local.properties(local.hosts[1])
    assert local.endpoints() == {"n1": ("10.1.0.1", 4002), "n2": ("10.1.0.2", 4004)}
    with pytest.raises(ValueError, match="n<id>"):
        NodeDB([Host("a", "1.2.3.4", NetnsTransport("a", None), "/w")])


def test_healthy_needs_every_node_following_the_leader_of_the_newest_epoch() -> None:
    lead = {"role": "leader", "epoch": 3, "leader": 1}
    follow = {"role": "follower", "epoch": 3, "leader": 1}
    assert NodeDB.healthy({"n1": lead, "n2": follow, "n3": follow}) == "n1"
    assert NodeDB.healthy({"n1": lead, "n2": follow, "n3": None}) is None
    assert NodeDB.healthy({"n1": lead, "n2": follow, "n3": {"role": "candidate", "epoch": 4, "leader": None}}) is None
    stale = {"role": "leader", "epoch": 2, "leader": 2}
    assert NodeDB.leader_of({"n1": lead, "n2": stale}) == ("n1", 3)


def test_real_backend_options_are_validated(tmp_path: Path) -> None:
    from harness.cli import build_parser
    from harness.commands.test import problem as _validate

    def problem(*argv: str) -> str | None:
        return _validate(build_parser().parse_args(["test", "--store", str(tmp_path), *argv]))

    assert "needs --ssh-hosts" in (problem("--backend", "ssh") or "")
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1\n10.0.0.2\n10.0.0.3\n")
    assert "lists 3 hosts but --nodes is 5" in (problem("--backend", "ssh", "--ssh-hosts", str(hosts)) or "")
    assert problem("--backend", "ssh", "--ssh-hosts", str(hosts), "--nodes", "3") is None
    assert "only for --backend ssh" in (problem("--backend", "docker", "--ssh-hosts", str(hosts)) or "")
    assert problem("--backend", "docker", "--workload", "queue", "--acks", "1") is None  # queue runs on real clusters
    too_few = problem("--backend", "docker", "--workload", "queue", "--nodes", "2")
    assert "--replication-factor must be between 1 and --nodes (2), got 3" in (too_few or "")
    assert problem("--backend", "sim", "--workload", "queue") is None


def test_wait_serving_polls_until_every_restarted_node_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    db = NodeDB(_hosts(3))
    asked: dict[str, int] = {}

    async def describe(name: str, timeout: float = 1.0) -> dict[str, object] | None:
        asked[name] = asked.get(name, 0) + 1
        if name == "n3":
            return None  # never comes back
        return {"role": "follower"} if asked[name] >= 3 else None  # answers from its third try

    monkeypatch.setattr(db, "describe", describe)
    assert asyncio.run(db.wait_serving(["n1", "n2"], timeout=5.0)) is True
    assert asked == {"n1": 3, "n2": 3}
    assert asyncio.run(db.wait_serving(["n2", "n3"], timeout=0.2)) is False
    assert asked["n2"] == 4 and asked["n3"] >= 2  # n2 is not asked again once it answered


def test_runner_nemesis_start_completes_once_the_nodes_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a replay, `start` returns only after the nodes it restarted answer; other faults do not wait."""
    import asyncio
    import random

    from harness.real.nemesis import RunnerNemesis

    waited: list[list[str]] = []

    async def serving(names: list[str]) -> bool:
        waited.append(names)
        return True

    async def no_leader() -> str | None:
        return None

    nemesis = RunnerNemesis(_hosts(3), {}, ["kill"], leader=no_leader, rng=random.Random(1), serving=serving)
    monkeypatch.setattr(nemesis.faults, "kill", lambda nodes: list(nodes))
    monkeypatch.setattr(nemesis.faults, "start", lambda nodes: list(nodes))
    assert asyncio.run(nemesis.apply({"f": "kill", "value": ["n2"]})).recorded == ["n2"]
    assert waited == []
    asyncio.run(nemesis.apply({"f": "start", "value": None}))
    assert waited == [["n2"]]
    nemesis.serving = None  # a normal run: nothing to wait for
    asyncio.run(nemesis.apply({"f": "start", "value": None}))
    assert waited == [["n2"]]
