"""docker and netns backends: hosts with addresses that reach each other, and nothing left after any exit."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.real.backends.base import BackendError
from harness.real.faults import RealNemesis
from tests.harness.real.backends import clusters

ROOT = Path(__file__).resolve().parents[4]


def _image(request: pytest.FixtureRequest, kind: str) -> str | None:
    return request.getfixturevalue("node_image") if kind == "docker" else None


@pytest.mark.parametrize("kind", clusters.BACKENDS)
def test_hosts_have_addresses_and_reach_each_other(kind: str, request: pytest.FixtureRequest) -> None:
    with clusters.cluster(kind, 3, _image(request, kind)) as (backend, hosts):
        assert [h.name for h in hosts] == ["n1", "n2", "n3"]
        addrs = [ipaddress.ip_address(h.address) for h in hosts]
        assert len(set(addrs)) == 3
        assert len({ipaddress.ip_network(f"{a}/24", strict=False) for a in addrs}) == 1
        for h in hosts:
            assert h.address in h.control.sh("ip -o -4 addr show dev eth0")
            clusters.start_probe(h)
        for a in hosts:
            for b in hosts:
                assert clusters.echoes(a, b), f"{a.name} -> {b.name}"
        # the harness machine itself reaches every node (clients will run here)
        for h in hosts:
            with socket.create_connection((h.address, clusters.PORT), 2) as s:
                s.sendall(b"hi")
                assert s.recv(2) == b"hi"
        if kind == "docker":
            assert hosts[0].control.sh("hostname").strip() == "n1"
            # nodes resolve each other by name on the private network
            assert hosts[0].control.sh(["getent", "hosts", "n2"]).split()[0] == hosts[1].address
            c = backend.client.containers.get(f"kraftwerk-{backend.cluster_id}-n1")
            assert c.attrs["HostConfig"]["CapAdd"] == ["NET_ADMIN"]
            assert c.attrs["HostConfig"]["Privileged"] is False
            net = backend.client.networks.get(backend.network_name)
            assert net.attrs["Internal"] is True and net.attrs["Labels"]["org.kraftwerk.cluster"] == backend.cluster_id
        with pytest.raises(BackendError, match="already created"):
            backend.create(1)


@pytest.mark.parametrize("kind", clusters.BACKENDS)
def test_exception_mid_test_leaves_nothing(kind: str, request: pytest.FixtureRequest) -> None:
    backend = clusters.make_backend(kind, _image(request, kind))
    with pytest.raises(RuntimeError, match="boom"), backend:
        hosts = backend.create(2)
        with RealNemesis(hosts, daemons=clusters.probe_spec) as nemesis:
            for h in hosts:
                clusters.start_probe(h, nemesis.clock.env(h))
            nemesis.invoke({"f": "start-partition", "value": {"grudge": {"n1": ["n2"]}}})
            nemesis.invoke({"f": "bump-clock", "value": {"n2": {"delta-ms": 5000}}})
            nemesis.invoke({"f": "pause", "value": ["n1"]})
            raise RuntimeError("boom")
    assert clusters.leftovers(kind, backend.cluster_id) == []
    assert backend.hosts == []


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.harness.real.backends.child_harness", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _await_ready(proc: subprocess.Popen[str]) -> dict:
    assert proc.stdout is not None
    head = json.loads(proc.stdout.readline() or "null")
    line = proc.stdout.readline().strip()
    if line != "READY":
        proc.kill()
        raise AssertionError(f"child harness failed: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return head


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("kind", clusters.BACKENDS)
def test_signal_to_child_harness_tears_everything_down(
    kind: str, sig: signal.Signals, request: pytest.FixtureRequest
) -> None:
    if kind == "netns":
        clusters.need_root()
    image = _image(request, kind)
    proc = _spawn(["own", kind, *([image] if image else [])])
    try:
        cluster_id = _await_ready(proc)["cluster"]
        assert clusters.leftovers(kind, cluster_id) != []
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0  # interrupted, not finished
    assert clusters.leftovers(kind, cluster_id) == [], proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize("kind", clusters.BACKENDS)
def test_down_removes_what_a_killed_run_left(kind: str, request: pytest.FixtureRequest) -> None:
    image = _image(request, kind)
    if kind == "netns":
        clusters.need_root()
    proc = _spawn(["own", kind, *([image] if image else [])])
    try:
        cluster_id = _await_ready(proc)["cluster"]
        proc.kill()  # SIGKILL: no handler, no atexit — everything stays behind
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = clusters.leftovers(kind, cluster_id)
    assert left, "a SIGKILLed harness should leave its cluster behind"
    if kind == "netns":
        from harness.real.backends import netns

        removed = netns.down(cluster_id)
    else:
        from harness.real.backends import docker as docker_backend

        removed = docker_backend.down(cluster_id, clusters.docker_client())
    assert removed
    assert clusters.leftovers(kind, cluster_id) == []


def test_down_command_lists_and_removes_leftovers() -> None:
    clusters.need_root()
    from harness.real.backends.netns import NetnsBackend

    backend = NetnsBackend()
    backend.create(1)  # not torn down: as if the run had crashed
    try:
        out = subprocess.run(
            [sys.executable, "-m", "harness.real.backends", "leftovers", "--backend", "netns"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"kw-{backend.cluster_id}-n1" in out
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.real.backends",
                "down",
                "--backend",
                "netns",
                "--cluster",
                backend.cluster_id,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"netns kw-{backend.cluster_id}-n1" in out
        assert clusters.leftovers("netns", backend.cluster_id) == []
    finally:
        backend.teardown()


def test_netns_needs_root_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.real.backends import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(BackendError, match="needs root"):
        netns.NetnsBackend()


def test_registry_rebuilds_a_running_clusters_control_transports(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kraftwerk cluster kill/start` reach the nodes of a cluster another process started through the
    registry: each backend that can says how (docker: its container; netns: its namespace)."""
    from types import SimpleNamespace

    from harness.real.backends import docker, registry
    from harness.real.control.docker import DockerTransport
    from harness.real.control.netns import NetnsTransport

    ns = registry.control("netns", "abc123", "n2")
    assert isinstance(ns, NetnsTransport) and ns.node == "n2" and ns.netns == "kw-abc123-n2"
    asked: list[str] = []

    def get(name: str) -> object:
        asked.append(name)
        if name.endswith("-n9"):
            raise LookupError("404 Not Found")
        return SimpleNamespace(name=name, client=SimpleNamespace(api=None))

    monkeypatch.setattr(docker, "_client", lambda: SimpleNamespace(containers=SimpleNamespace(get=get)))
    container = registry.control("docker", "abc123", "n1")
    assert isinstance(container, DockerTransport) and container.container.name == "kraftwerk-abc123-n1"
    with pytest.raises(BackendError, match="container of node n9 is gone"):
        registry.control("docker", "abc123", "n9")
    assert asked == ["kraftwerk-abc123-n1", "kraftwerk-abc123-n9"]
    for kind in ("local", "ssh", "sim"):
        with pytest.raises(BackendError, match="cannot reach the nodes"):
            registry.control(kind, "abc123", "n1")
