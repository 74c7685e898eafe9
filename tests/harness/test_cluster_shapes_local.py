"""`kraftwerk cluster up --controllers N --controller-roles` on the local backend: bad shapes are refused naming
the option (exit 254, nothing started), and a 3-controller 2-broker cluster records its shape so the later verbs
lay it out as `up` did: bootstrap lists the brokers, `kill --controller` kills the active controller, `start`
brings a controller-only node back, the fault keeper's `controllers` target names n1..n3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.local_kafka_cluster import kraftwerk


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--nodes", "3", "--controllers", "3"], "--controller-roles dedicated leaves no broker"),
        (["--nodes", "3", "--controllers", "4"], "--controllers must be between 1 and --nodes (3), got 4"),
        (["--nodes", "3", "--controllers", "1", "--controller-roles", "both"], "--controller-roles must be one of"),
        (["--nodes", "3", "--controller-roles", "combined"], "--controller-roles needs --controllers N"),
    ],
)
def test_bad_shapes_are_refused_naming_the_option(tmp_path: Path, options: list[str], named: str) -> None:
    r = kraftwerk("cluster", "up", "--backend", "local", "--dir", str(tmp_path / "c"), *options)
    assert r.returncode == 254 and named in r.stderr, r.stderr
    assert not (tmp_path / "c" / "cluster.json").exists()


@pytest.mark.slow
def test_a_shaped_local_cluster_keeps_its_shape_across_verbs(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    r = kraftwerk("cluster", "up", "--backend", "local", "--nodes", "5", "--controllers", "3", "--dir", d)
    try:
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        roles = {n["id"]: n["roles"] for n in info["nodes"]}
        assert roles == {1: "controller", 2: "controller", 3: "controller", 4: "broker", 5: "broker"}
        brokers = [f"{n['host']}:{n['port']}" for n in info["nodes"] if n["id"] > 3]
        assert info["bootstrap"] == ",".join(brokers)
        shape = json.loads((tmp_path / "c" / "cluster.json").read_text())["shape"]
        assert shape == {"nodes": 5, "controllers": 3, "roles": "dedicated"}

        r = kraftwerk("cluster", "kill", "--dir", d, "--controller")
        assert r.returncode == 0, r.stderr
        killed = json.loads(r.stdout)
        assert killed["killed"] and killed["node"] in (1, 2, 3)
        r = kraftwerk("cluster", "start", "--dir", d, "--node", str(killed["node"]))  # no broker to unfence
        assert r.returncode == 0 and json.loads(r.stdout)["started"], r.stderr

        r = kraftwerk("cluster", "pause", "--dir", d, "--target", "controllers")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["result"] == ["n1", "n2", "n3"]
        r = kraftwerk("cluster", "heal", "--dir", d)
        assert r.returncode == 0, r.stderr
    finally:
        down = kraftwerk("cluster", "down", "--dir", d)
        assert down.returncode == 0, down.stderr
