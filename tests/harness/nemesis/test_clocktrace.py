"""clocktrace (harness.real.faults.clocktrace): the clock nemesis's faults reach a Go program (etcd) that libfaketime
cannot, through the same faketime file; kill and pause of the traced program work as without it."""

from __future__ import annotations

import asyncio
import email.utils
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from harness.db.etcd import EtcdDB
from harness.real.backends.local import LocalBackend
from harness.real.faults import clocktrace
from harness.real.faults.clock import ClockNemesis
from tests.requirements import need

need_gcc = pytest.mark.needs("gcc")
need_etcd = pytest.mark.needs("etcd")

# a Go-free probe for the control file's grammar: each wall clock it can read, minus the real one (ms)
PROBE = r"""
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
static long long ns(struct timespec t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }
int main(void) {
    struct timespec rt, coarse, mono; struct timeval tv;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_REALTIME_COARSE, &coarse);
    gettimeofday(&tv, NULL);
    long t = time(NULL);
    clock_gettime(CLOCK_MONOTONIC, &mono);  /* not trapped */
    printf("%lld %lld %lld %lld %lld\n", ns(rt) / 1000000, ns(coarse) / 1000000,
           tv.tv_sec * 1000LL + tv.tv_usec / 1000, t * 1000LL, ns(mono) / 1000000);
    return 7;
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("gcc")
    d = tmp_path_factory.mktemp("probe")
    (d / "probe.c").write_text(PROBE)
    subprocess.run(["gcc", "-O2", "-o", str(d / "probe"), str(d / "probe.c")], check=True)
    return d / "probe"


def skews_ms(probe: Path, control: Path | None, *extra: str) -> list[float]:
    """(realtime, realtime-coarse, gettimeofday, time) of the probe under clocktrace, minus the real time (ms) at
    that moment (from its CLOCK_MONOTONIC reading, which clocktrace leaves alone)."""
    wall_minus_mono = (time.time() - time.monotonic()) * 1000
    args = [*(["--file", str(control)] if control else []), *extra, "--", str(probe)]
    r = subprocess.run([str(clocktrace.binary()), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 7, r.stderr  # the program's own exit status
    values = [float(x) for x in r.stdout.split()]
    real = values[4] + wall_minus_mono
    return [v - real for v in values[:4]]


@need_gcc
def test_control_file_grammar_and_every_wall_clock_call(probe: Path, tmp_path: Path) -> None:
    control = tmp_path / "faketime"
    for spec, want_s in [("+0", 0), ("+90s", 90), ("-2h", -7200), ("+1.5m", 90), ("+1d", 86400), ("-0.25", -0.25)]:
        control.write_text(spec + "\n")
        skews = skews_ms(probe, control)
        # time() truncates to the second
        assert all(abs(s - want_s * 1000) < 1500 for s in skews), (spec, skews)
        assert all(abs(s - want_s * 1000) < 50 for s in skews[:3]), (spec, skews)
    # no control file: the real time; a spec it cannot use (an absolute date): the real time, and it says so
    assert all(abs(s) < 1500 for s in skews_ms(probe, tmp_path / "missing"))
    control.write_text("@2020-01-01 00:00:00\n")
    r = subprocess.run([str(clocktrace.binary()), "--file", str(control), str(probe)], capture_output=True, text=True)
    assert "cannot use" in r.stderr and r.returncode == 7
    # the libfaketime environment: FAKETIME_TIMESTAMP_FILE is the default control file, and is not passed on
    control.write_text("+3600s x1.000000\n")
    env = {**os.environ, "FAKETIME_TIMESTAMP_FILE": str(control), "LD_PRELOAD": "/nonexistent/libfaketimeMT.so.1"}
    r = subprocess.run(
        [str(clocktrace.binary()), "sh", "-c", f"echo $FAKETIME_TIMESTAMP_FILE/$LD_PRELOAD; {probe}"],
        capture_output=True,
        text=True,
        env=env,
    )
    lines = r.stdout.splitlines()
    assert lines[0] == "/" and r.returncode == 7, r.stderr
    probe_real = float(lines[1].split()[4]) + (time.time() - time.monotonic()) * 1000
    assert abs(float(lines[1].split()[0]) - probe_real - 3_600_000) < 50
    # bad options exit 254 naming them
    r = subprocess.run([str(clocktrace.binary()), "--check-ms", "soon", "true"], capture_output=True, text=True)
    assert r.returncode == 254 and "--check-ms soon" in r.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_skew_s(port: int, timeout: float = 2.0) -> float:
    """etcd's wall clock minus ours, from the Date header of its HTTP answer (1 s resolution)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        t0 = time.time()
        conn.request("GET", "/version")
        answer = conn.getresponse()
        answer.read()
        t1 = time.time()
    finally:
        conn.close()
    date = email.utils.parsedate_to_datetime(answer.headers["Date"]).timestamp()
    return date - (t0 + t1) / 2


def answers(port: int, timeout: float) -> bool:
    try:
        etcd_skew_s(port, timeout)
        return True
    except OSError:
        return False


def tracer_of(pid: int) -> int | None:
    """The clocktrace process tracing pid (its child)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[1] == str(pid) and "(clocktrace)" in stat:
                return int(entry)
    return None


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


@need_gcc
@need_etcd
def test_etcd_wall_clock_follows_the_clock_nemesis_and_kill_pause_still_work(tmp_path: Path) -> None:
    """One etcd member started as the harness starts it with clock faults (EtcdDB(clock=True) over the clock
    nemesis's environment): its HTTP Date header and its log timestamps move with bump, drift, strobe and
    reset; pause holds it and resume frees it; kill -9 of the group kills etcd and its tracer; a restart is
    traced again; a paused member stops on SIGTERM; kill -9 of the tracer kills etcd."""
    host = LocalBackend.host_at("n1", "127.0.0.1", str(tmp_path / "n1"), "python3", "")
    peer, client = free_port(), free_port()
    clock = ClockNemesis([host])
    clock.setup()
    db = EtcdDB([host], ports={"n1": (peer, client)}, listen_any=False, env=clock.env, clock=True, poll_interval=0.2)
    pidfile = db.pidfile(host)
    try:
        clock.bump({"n1": 3_600_000})
        db.setup()
        started = time.time()
        db.start_all()
        asyncio.run(db.wait_ready(20))
        assert abs(etcd_skew_s(client) - 3600) < 2
        log = Path(db.logfile(host)).read_text()
        first = next(json.loads(x) for x in log.splitlines() if '"starting an etcd server"' in x)
        assert abs(datetime.fromisoformat(first["ts"].replace("Z", "+00:00")).timestamp() - started - 3600) < 30
        assert "vDSO hidden" in log and "clock offset +3600.000000 s" in log

        clock.bump({"n1": -3 * 3_600_000})  # to -2 h
        time.sleep(0.05)
        assert abs(etcd_skew_s(client) + 7200) < 2

        clock.drift({"n1": 10_000_000})  # rate 11: the faked timeline restarts from clocktrace's start
        a, ta = etcd_skew_s(client), time.time()
        time.sleep(1.0)
        b, tb = etcd_skew_s(client), time.time()
        assert abs((b - a) - 10 * (tb - ta)) < 3 and a > -7200 + 10 * (ta - started - 3)
        clock.reset(["n1"])
        time.sleep(0.05)
        assert abs(etcd_skew_s(client)) < 2
        low, high = db.skews["n1"]  # what the raft-status poller saw (the run's collect-notes)
        assert low < -7000 and high > 3590

        clock.strobe({"n1": {"delta-ms": 60_000, "period-ms": 150, "duration-s": 1.5}})
        seen = set()
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:
            seen.add(round(etcd_skew_s(client) / 60))
            time.sleep(0.03)
        assert seen == {0, 1}, seen  # both sides of the strobe
        clock.reset(["n1"])

        pid = host.control.daemon_status(pidfile).pid
        assert pid is not None and Path(f"/proc/{pid}/comm").read_text().strip() == "etcd"  # the pidfile names etcd
        tracer = tracer_of(pid)
        assert tracer is not None and os.getpgid(tracer) != os.getpgid(pid)  # out of the group the harness signals
        host.control.pause_daemon(pidfile)
        time.sleep(0.3)
        assert not answers(client, 0.5) and host.control.daemon_status(pidfile).paused
        host.control.resume_daemon(pidfile)
        assert answers(client, 3.0) and not host.control.daemon_status(pidfile).paused
        assert abs(etcd_skew_s(client)) < 2

        host.control.kill_daemon(pidfile)
        assert gone(pid, 2) and gone(tracer, 2)

        clock.bump({"n1": 120_000})  # a restart is traced again, with the clock as it stands
        host.control.start_daemon(db.spec(host))
        asyncio.run(db.wait_ready(20))
        assert abs(etcd_skew_s(client) - 120) < 2
        pid = host.control.daemon_status(pidfile).pid
        tracer = tracer_of(pid)
        host.control.pause_daemon(pidfile)  # a paused member still stops gracefully (SIGTERM, then SIGCONT)
        time.sleep(0.2)
        began = time.monotonic()
        host.control.stop_daemon(pidfile, timeout=8)
        assert time.monotonic() - began < 8 and gone(tracer, 2)
        assert "received signal; shutting down" in Path(db.logfile(host)).read_text().rsplit("vDSO hidden", 1)[-1]

        host.control.start_daemon(db.spec(host))
        asyncio.run(db.wait_ready(20))
        pid = host.control.daemon_status(pidfile).pid
        tracer = tracer_of(pid)
        assert pid is not None and tracer is not None
        os.kill(tracer, signal.SIGKILL)  # PTRACE_O_EXITKILL: etcd must not run on untraced
        assert gone(pid, 2)
    finally:
        db.stop_all(timeout=5)
        clock.teardown()


def test_etcd_runs_under_clocktrace_only_with_clock_faults(tmp_path: Path) -> None:
    host = LocalBackend.host_at("n1", "10.0.0.1", str(tmp_path), "python3", "")
    plain = EtcdDB([host]).spec(host)
    traced = EtcdDB([host], clock=True).spec(host)
    assert plain.argv[0] == "etcd"
    assert traced.argv[:2] == [f"{tmp_path}/clocktrace", "--"] and traced.argv[2:] == list(plain.argv)
    assert traced.pidfile == plain.pidfile  # the pidfile names etcd itself (clocktrace becomes it)
