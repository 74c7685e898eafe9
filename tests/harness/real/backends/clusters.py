"""Shared helpers for the real-backend tests: what they need, the image fixture, clusters, probe daemons, probes."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.real.backends.base import Backend, Host
from harness.real.control import DaemonSpec
from tests.requirements import forget, need, why_missing

PROBE_SOURCE = (Path(__file__).with_name("probe_daemon.py")).read_bytes()
PORT = 7000


def need_root() -> None:
    """Network namespaces: root and iproute2."""
    need("root", "iproute2")


def need_faketime() -> None:
    """netns nodes run on this machine: libfaketime must be here (installed with apt-get if we are root)."""
    if why_missing("libfaketime") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "libfaketime"]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
            subprocess.run(cmd, env=env, capture_output=True)
        forget("libfaketime")  # probe again after the install
    need("libfaketime")


def docker_client():  # noqa: ANN201 - docker is imported lazily
    """A client of the docker engine (the test is skipped without one, or fails under CI)."""
    need("docker")
    import docker

    return docker.from_env(timeout=120)


_IMAGE: list[str] = []


@pytest.fixture(scope="session")
def node_image() -> str:
    """Build the node image once per session (or reuse the one with the current content hash).

    Several test directories import this fixture; the tag is kept per process so the image is
    looked up (and, on a cold machine, built: ~1.5-2 min) only once per session.
    """
    docker_client()
    if not _IMAGE:
        from harness.real import image

        started = time.monotonic()
        result = image.build(log=lambda line: None)
        how = "built" if result.built else "reused"
        base = f", base by {result.base_method}" if result.base_built else ""
        print(f"\nnode image {result.tag}: {how} in {time.monotonic() - started:.1f}s{base}")
        _IMAGE.append(result.tag)
    return _IMAGE[0]


def make_backend(kind: str, image: str | None = None) -> Backend:
    if kind == "netns":
        need_root()
        from harness.real.backends.netns import NetnsBackend

        return NetnsBackend()
    from harness.real.backends.docker import DockerBackend

    return DockerBackend(image=image, client=docker_client())


def leftovers(kind: str, cluster_id: str) -> list[str]:
    """What of this cluster still exists (containers, networks / namespaces, links, directories)."""
    if kind == "netns":
        from harness.real.backends import netns

        return [x for x in netns.leftovers() if cluster_id in x]
    from harness.real.backends import docker as docker_backend

    return [x for x in docker_backend.leftovers(docker_client()) if cluster_id in x]


@pytest.fixture
def backend_kind(request: pytest.FixtureRequest) -> str:
    return request.param


def probe_spec(host: Host, env: dict[str, str] | None = None) -> DaemonSpec:
    """The stand-in node daemon of a host (echo server on PORT + clock file)."""
    return DaemonSpec(
        [host.python, f"{host.workdir}/probe.py", host.address, str(PORT), f"{host.workdir}/clock"],
        pidfile=f"{host.workdir}/probe.pid",
        logfile=f"{host.workdir}/probe.log",
        env=env or {},
    )


def start_probe(host: Host, env: dict[str, str] | None = None) -> int:
    host.control.put_file(f"{host.workdir}/probe.py", PROBE_SOURCE)
    pid = host.control.start_daemon(probe_spec(host, env))
    wait_for(lambda: can_connect(host, host), what=f"probe on {host.name}")
    return pid


def wait_for(cond, timeout: float = 10.0, what: str = "condition") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def can_connect(src: Host, dst: Host, timeout: float = 1.0) -> bool:
    """Whether a TCP connect from src to dst's probe port succeeds within timeout."""
    code = f"import socket; socket.create_connection(({dst.address!r}, {PORT}), {timeout}).close()"
    return src.control.run([src.python, "-c", code], timeout=timeout + 10).ok


def echoes(src: Host, dst: Host, timeout: float = 1.0) -> bool:
    """Whether dst's probe echoes a line from src within timeout (a paused process does not)."""
    code = (
        "import socket\n"
        f"s = socket.create_connection(({dst.address!r}, {PORT}), {timeout})\n"
        f"s.settimeout({timeout})\n"
        "s.sendall(b'ping')\n"
        "assert s.recv(4) == b'ping'\n"
    )
    return src.control.run([src.python, "-c", code], timeout=timeout + 10).ok


def clock_skew(host: Host) -> float:
    """Seconds the probe process's wall clock is off, from its clock file (monotonic time is shared)."""
    wall, mono = map(float, host.control.get_file(f"{host.workdir}/clock").split())
    return (wall - mono) - (time.time() - time.monotonic())


def fresh_clock_skew(host: Host, after: float | None = None) -> float:
    """clock_skew, once the probe has written its clock after `after` (monotonic time, default now)."""
    after = time.monotonic() if after is None else after
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        wall, mono = map(float, host.control.get_file(f"{host.workdir}/clock").split())
        if mono > after:
            return (wall - mono) - (time.time() - time.monotonic())
        time.sleep(0.05)
    raise AssertionError(f"{host.name}: probe stopped writing its clock")


BACKENDS = [
    pytest.param("netns", id="netns"),
    pytest.param("docker", id="docker", marks=[pytest.mark.docker, pytest.mark.slow]),
]


@contextlib.contextmanager
def cluster(kind: str, n: int, image: str | None) -> Iterator[tuple[Backend, list[Host]]]:
    """A fresh cluster of n hosts; on exit it is torn down and nothing of it may be left."""
    backend = make_backend(kind, image)
    with backend:
        yield backend, backend.create(n)
    assert leftovers(kind, backend.cluster_id) == []


def host_records(kind: str, hosts: list[Host]) -> list[dict[str, str]]:
    """JSON-able descriptions of hosts, so another process can control them (see hosts_from_records)."""
    records = []
    for h in hosts:
        target = getattr(h.control, "netns", None) if kind == "netns" else h.control.container.name  # type: ignore[attr-defined]
        records.append(
            {
                "kind": kind,
                "name": h.name,
                "address": h.address,
                "workdir": h.workdir,
                "target": target,
                "python": h.python,
                "pythonpath": h.pythonpath,
                "faketime_sitedir": h.faketime_sitedir,
            }
        )
    return records


def hosts_from_records(records: list[dict[str, str]]) -> list[Host]:
    hosts = []
    for r in records:
        if r["kind"] == "netns":
            from harness.real.control.netns import NetnsTransport

            control = NetnsTransport(r["name"], r["target"], python=r["python"])
        else:
            from harness.real.control.docker import DockerTransport

            control = DockerTransport(r["name"], r["target"])
        hosts.append(
            Host(
                r["name"],
                r["address"],
                control,
                r["workdir"],
                python=r["python"],
                pythonpath=r["pythonpath"],
                faketime_sitedir=r["faketime_sitedir"],
            )
        )
    return hosts
