"""The control interface behaves the same over every transport: local, ip netns exec, docker exec, SSH."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest

from harness.real.backends.base import Host
from harness.real.control import CommandError, CommandTimeout, ControlError, DaemonSpec
from harness.real.control.netns import NetnsTransport
from tests.harness.real.backends import clusters
from tests.harness.real.control import sshd

KINDS = [
    pytest.param("local", id="local"),
    pytest.param("netns", id="netns"),
    pytest.param("docker", id="docker", marks=[pytest.mark.docker, pytest.mark.slow]),
    pytest.param("ssh", id="ssh", marks=[pytest.mark.docker, pytest.mark.slow]),
]


@pytest.fixture(scope="module", params=KINDS)
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    kind = request.param
    if kind == "local":
        with tempfile.TemporaryDirectory(prefix="kraftwerk-local-") as d:
            yield Host("local", "127.0.0.1", NetnsTransport("local", None), d, python=sys.executable)
        return
    if kind == "ssh":
        image = request.getfixturevalue("node_image")
        with sshd.ssh_cluster(image, 1) as (_backend, hosts, _ssh_hosts):
            yield hosts[0]
        return
    image = request.getfixturevalue("node_image") if kind == "docker" else None
    with clusters.cluster(kind, 1, image) as (_backend, hosts):
        yield hosts[0]


def test_run_argv_and_shell(host: Host) -> None:
    r = host.control.run(["printf", "%s|", "a b", "$HOME", "it's"])
    assert r.ok and r.stdout == "a b|$HOME|it's|"
    r = host.control.run("echo out; echo err >&2; exit 3")
    assert (r.exit_status, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.ok
    with pytest.raises(CommandError, match="exited 3"):
        host.control.run("exit 3", check=True)
    assert host.control.sh("echo hi") == "hi\n"


def test_env_and_cwd(host: Host) -> None:
    r = host.control.run('echo "$KW_A/$KW_B"; pwd', env={"KW_A": "x y", "KW_B": "$(no)"}, cwd="/tmp")
    assert r.stdout.splitlines() == ["x y/$(no)", "/tmp"]


def test_timeout_kills_the_command(host: Host) -> None:
    marker = f"31.{uuid.uuid4().int % 10**8:08d}"
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        host.control.run(f"sleep {marker}; echo not reached", timeout=0.5)
    assert time.monotonic() - started < 9
    time.sleep(0.5)
    assert marker not in host.control.run("ps -eo args").stdout


def test_files_round_trip(host: Host) -> None:
    path = f"{host.workdir}/sub/dir/blob.bin"
    data = bytes(range(256)) * 10
    host.control.put_file(path, data, mode=0o600)
    assert host.control.get_file(path) == data
    assert host.control.sh(["stat", "-c", "%a", path]).strip() == "600"
    host.control.put_file(path, "replaced\n")
    assert host.control.get_file(path) == b"replaced\n"
    assert host.control.sh(["ls", "-A", f"{host.workdir}/sub/dir"]).split() == ["blob.bin"]  # no temp files
    assert host.control.exists(path)
    host.control.remove(f"{host.workdir}/sub")
    assert not host.control.exists(path)
    with pytest.raises(ControlError):
        host.control.get_file(f"{host.workdir}/missing")


def test_daemon_life_cycle(host: Host) -> None:
    w = host.workdir
    script = f"trap 'echo graceful > {w}/term; exit 0' TERM; echo started; while :; do sleep 0.05; done"
    spec = DaemonSpec(["sh", "-c", script], f"{w}/d.pid", f"{w}/d.log", env={"KW_X": "1"})
    pid = host.control.start_daemon(spec)
    st = host.control.daemon_status(spec.pidfile)
    assert st.running and st.pid == pid and not st.paused
    with pytest.raises(ControlError, match="already running"):
        host.control.start_daemon(spec)

    assert host.control.pause_daemon(spec.pidfile) == pid
    clusters.wait_for(lambda: host.control.daemon_status(spec.pidfile).paused, what="SIGSTOP")
    assert host.control.resume_daemon(spec.pidfile) == pid
    clusters.wait_for(lambda: not host.control.daemon_status(spec.pidfile).paused, what="SIGCONT")

    assert host.control.kill_daemon(spec.pidfile) == pid
    assert not host.control.daemon_status(spec.pidfile).running
    assert host.control.kill_daemon(spec.pidfile) is None  # already dead: nothing to do
    assert not host.control.exists(f"{w}/term")  # SIGKILL: no handler ran

    pid2 = host.control.start_daemon(spec)
    assert pid2 != pid
    host.control.pause_daemon(spec.pidfile)  # a paused daemon still stops gracefully
    assert host.control.stop_daemon(spec.pidfile, timeout=5) == pid2
    assert host.control.get_file(f"{w}/term") == b"graceful\n"
    assert not host.control.exists(spec.pidfile)
    assert host.control.get_file(spec.logfile).count(b"started") == 2
    host.control.remove(f"{w}/term", spec.logfile)


def test_stale_pidfile_is_not_signalled(host: Host) -> None:
    pidfile = f"{host.workdir}/stale.pid"
    # pid 1 exists everywhere, but its start time is not 12345: a recycled pid, never signalled
    host.control.put_file(pidfile, "1 12345\n")
    assert not host.control.daemon_status(pidfile).running
    assert host.control.signal_daemon(pidfile, signal.SIGKILL) is None
    host.control.remove(pidfile)


def test_local_timeout_kills_process_group() -> None:
    t = NetnsTransport("local", None)
    marker = f"32.{uuid.uuid4().int % 10**8:08d}"
    with pytest.raises(CommandTimeout):
        t.run(f"sleep {marker} & sleep {marker}; wait", timeout=0.3)
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps


def test_netns_transport_requires_root_message() -> None:
    if os.geteuid() == 0:
        pytest.skip("only meaningful without root")
    from harness.real.backends.base import BackendError
    from harness.real.backends.netns import NetnsBackend

    with pytest.raises(BackendError, match="needs root"):
        NetnsBackend()


def test_daemon_that_cannot_start_is_reported(host: Host) -> None:
    spec = DaemonSpec(["/nonexistent/kw-binary"], f"{host.workdir}/bad.pid", f"{host.workdir}/bad.log")
    with pytest.raises(ControlError, match="cannot start"):
        host.control.start_daemon(spec)
    assert not host.control.daemon_status(spec.pidfile).running


@pytest.mark.docker
@pytest.mark.slow
def test_docker_agent_serves_commands_and_plain_exec_takes_over_when_it_dies(node_image: str) -> None:
    """A docker transport drives its container through one long-lived agent; if the agent dies, the next
    command starts another, and once that keeps failing (or with KRAFTWERK_NO_AGENT) plain exec does the work."""
    from harness.real.control import docker as docker_control

    with clusters.cluster("docker", 1, node_image) as (_backend, hosts):
        control = hosts[0].control
        assert isinstance(control, docker_control.DockerTransport)
        first = control.agent()
        assert first is not None and control.sh("echo via agent") == "via agent\n"
        assert control.sh("pgrep -fc '^python3 -u -c'").strip() == "1"  # the agent: python3 -u -c SOURCE agent
        control.run("pkill -f '^python3 -u -c'")
        clusters.wait_for(lambda: first.broken is not None, what="the agent's stream to close")
        assert control.sh("echo again") == "again\n" and control.agent() is not first
        pidfile, spec_log = f"{hosts[0].workdir}/a.pid", f"{hosts[0].workdir}/a.log"
        pid = control.start_daemon(DaemonSpec(["sleep", "300"], pidfile, spec_log))
        assert control.daemon_status(pidfile).pid == pid and control.kill_daemon(pidfile) == pid
        control._agent_started = control.agent_starts  # as if it had died too often
        control.close()
        assert control.agent() is None and control.sh("echo plain exec") == "plain exec\n"
        pid = control.start_daemon(DaemonSpec(["sleep", "300"], pidfile, spec_log))
        assert control.kill_daemon(pidfile) == pid and not control.daemon_status(pidfile).running
