"""`kraftwerk cluster`: option errors exit 254 naming the option; a small cluster goes up, kill/start, down."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.real import cluster_local
from tests.requirements import need

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["cluster"], "choose an action"),
        (["cluster", "up", "--backend", "local", "--nodes", "0", "--dir", "D"], "--nodes"),
        (["cluster", "up", "--backend", "local"], "--dir"),
        (["cluster", "up", "--backend", "kube", "--dir", "D"], "--backend"),
        (["cluster", "up", "--backend", "docker", "--dir", "D", "--base-port", "9000"], "--base-port"),
        (["cluster", "up", "--backend", "netns", "--dir", "D", "--base-port", "9000"], "--base-port"),
        (["cluster", "up", "--backend", "netns", "--dir", "D", "--bug", "nope"], "--bug"),
        (
            ["cluster", "up", "--backend", "docker", "--dir", "D", "--override", "log.retention.ms=5"],
            "log.retention.ms",
        ),
        (["cluster", "up", "--backend", "local", "--dir", "D", "--bug", "nope"], "--bug"),
        (["cluster", "up", "--backend", "local", "--dir", "D", "--base-port", "x"], "--base-port"),
        (["cluster", "up", "--backend", "local", "--dir", "D", "--override", "novalue"], "--override"),
        (["cluster", "up", "--backend", "local", "--dir", "D", "--override", "log.retention.ms=5"], "log.retention.ms"),
        (["cluster", "kill", "--dir", "D"], "--node"),
        (["cluster", "kill", "--dir", "D", "--node", "1", "--leader", "t:0"], "not allowed with"),
        (["cluster", "kill", "--dir", "D", "--leader", "t"], "--leader"),
        (["cluster", "kill", "--dir", "D", "--node", "1"], "no cluster in"),
        (["cluster", "start", "--dir", "D", "--node", "1"], "no cluster in"),
        (["cluster", "down", "--timeout", "0"], "--timeout"),
        (["cluster", "down", "--dir", "D", "--cluster", "abc"], "not allowed with"),
    ],
)
def test_bad_options_exit_254_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    args = [str(tmp_path / "c") if a == "D" else a for a in args]
    assert main(args) == 254
    assert fragment in capsys.readouterr().err
    assert not any(p.name == "cluster.json" for p in tmp_path.rglob("*"))  # nothing was started


def test_down_is_idempotent_without_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "down", "--dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"stopped": [], "killed": []}


@pytest.mark.slow
def test_up_kill_start_down(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    try:
        r = kraftwerk("cluster", "up", "--backend=local", "--nodes=2", "--dir", str(directory), "--bug=stale-read")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert set(doc) == {"bootstrap", "nodes"} and [n["id"] for n in doc["nodes"]] == [1, 2]
        assert doc["bootstrap"] == ",".join(f"{n['host']}:{n['port']}" for n in doc["nodes"])
        hosts = {n["host"] for n in doc["nodes"]}
        assert hosts == {"127.0.0.2", "127.0.0.3"} or hosts == {"127.0.0.1"}
        state = json.loads((directory / "cluster.json").read_text())
        assert state["bugs"] == ["stale-read"] and all(n["state"] == "running" for n in state["nodes"])
        assert "kraftwerk.bugs=stale-read" in (directory / "n1" / "node.properties").read_text()

        again = kraftwerk("cluster", "up", "--backend", "local", "--nodes", "2", "--dir", str(directory))
        assert again.returncode == 254 and "already running" in again.stderr

        r = kraftwerk("cluster", "kill", "--dir", str(directory), "--node", "2")
        assert r.returncode == 0, r.stderr
        killed = json.loads(r.stdout)
        assert killed["killed"] is True and not _alive(killed["pid"])
        r = kraftwerk("cluster", "kill", "--dir", str(directory), "--node", "2")  # already dead: nothing to do
        assert r.returncode == 0 and json.loads(r.stdout)["killed"] is False
        assert kraftwerk("cluster", "kill", "--dir", str(directory), "--node", "7").returncode == 254

        r = kraftwerk("cluster", "start", "--dir", str(directory), "--node", "2")
        assert r.returncode == 0, r.stderr
        started = json.loads(r.stdout)
        assert started["started"] is True and _alive(started["pid"])
        status = cluster_local.LocalCluster.attach(directory).describe(2)
        assert status is not None and status["broker"]["fenced"] is False

        pids = list(cluster_local.LocalCluster.attach(directory).pids().values())
        assert all(pids)
        r = kraftwerk("cluster", "down", "--dir", str(directory))
        assert r.returncode == 0, r.stderr
        assert sorted(json.loads(r.stdout)["stopped"]) == [1, 2]
        assert not any(_alive(pid) for pid in pids)
        assert "stopped (exit code 0)" in (directory / "n1" / "node.out").read_text()
        r = kraftwerk("cluster", "down", "--dir", str(directory))
        assert r.returncode == 0 and json.loads(r.stdout) == {"stopped": [], "killed": []}
    finally:
        if (directory / "cluster.json").exists():
            cluster_local.down(directory, timeout=5)


def test_a_cluster_that_cannot_start_is_cleaned_up(tmp_path: Path) -> None:
    # node 1's data directory belongs to another node id: it exits at once, the others are killed
    directory = tmp_path / "c"
    (directory / "n1" / "data").mkdir(parents=True)
    (directory / "n1" / "data" / "meta.properties").write_text("node.id=9\n")
    with pytest.raises(cluster_local.ClusterError, match="node 1 exited during start-up") as err:
        cluster_local.up(directory, 2, timeout=20)
    assert err.value.code == 255 and "belongs to node.id=9" in str(err.value)
    state = json.loads((directory / "cluster.json").read_text())
    assert all(n["state"] == "failed" and not _alive(n["pid"]) for n in state["nodes"])


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie is dead


@pytest.mark.slow
def test_down_without_dir_removes_what_a_crashed_command_left(tmp_path: Path) -> None:
    """A netns cluster whose state file is lost (as after a crash) is still found and removed by its labels."""
    from tests.harness.real import realtest

    need("root", "iproute2")
    r = kraftwerk("cluster", "up", "--backend", "netns", "--nodes", "3", "--dir", str(tmp_path / "c"), timeout=120)
    assert r.returncode == 0, r.stderr
    cid = json.loads(r.stdout)["cluster"]
    (tmp_path / "c" / "cluster.json").unlink()
    assert realtest.leftovers(cid), "the cluster should be running"
    r = kraftwerk("cluster", "down", "--cluster", cid, timeout=120)  # without --cluster: every leftover
    assert r.returncode == 0, r.stderr
    assert any(cid in item for item in json.loads(r.stdout)["removed"])
    assert realtest.leftovers(cid) == []


@pytest.mark.slow
def test_up_on_a_used_dir_is_refused_unless_fresh_and_fresh_serves_only_the_new_brokers(tmp_path: Path) -> None:
    """The earlier cluster's raft log would bring its broker registrations (and ports) back: refused, or removed."""
    from kafka import KafkaAdminClient

    directory = tmp_path / "c"
    try:
        first = kraftwerk("cluster", "up", "--backend", "local", "--nodes", "1", "--dir", str(directory))
        assert first.returncode == 0, first.stderr
        old_port = json.loads(first.stdout)["nodes"][0]["port"]
        assert kraftwerk("cluster", "down", "--dir", str(directory)).returncode == 0

        refused = kraftwerk("cluster", "up", "--backend", "local", "--nodes", "1", "--dir", str(directory))
        assert refused.returncode == 254 and "--fresh" in refused.stderr and refused.stdout == ""
        assert (directory / "n1" / "data").is_dir()  # refusing loses nothing

        fresh = kraftwerk(
            "cluster", "up", "--backend", "local", "--nodes", "1", "--dir", str(directory), "--fresh",
            "--base-port", str(old_port + 10),
        )  # fmt: skip
        assert fresh.returncode == 0, fresh.stderr
        assert "removed the earlier cluster's data" in fresh.stderr and "n1/" in fresh.stderr
        doc = json.loads(fresh.stdout)
        assert doc["nodes"][0]["port"] == old_port + 10
        admin = KafkaAdminClient(bootstrap_servers=doc["bootstrap"], request_timeout_ms=10_000)
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert [(b["host"], b["port"]) for b in brokers] == [(doc["nodes"][0]["host"], old_port + 10)]
    finally:
        if (directory / "cluster.json").exists():
            cluster_local.down(directory, timeout=5)
