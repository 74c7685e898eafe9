"""Clock faults on real hosts with libfaketime: one timestamp file per node, rewritten atomically.

Node processes must be started with `ClockNemesis.env(host)`: LD_PRELOAD of
libfaketimeMT, FAKETIME_TIMESTAMP_FILE=<workdir>/faketime, FAKETIME_NO_CACHE=1
(every clock read sees the file's current content) and, by default,
FAKETIME_DONT_FAKE_MONOTONIC=1 — only the wall clock moves, so timeouts and the
event loop keep working. `monotonic=True` fakes CLOCK_MONOTONIC as well. Go programs read the
clock without libc: they run under `clocktrace` (harness.real.faults.clocktrace), which answers
their wall-clock reads from the same file.

The file holds a relative offset ("+12.5s", "-0.300s", "+0") and optionally a
rate ("+0s x1.020000", for drift). bump = add to the node's offset; strobe = a
small loop on the node alternating two offsets for a while; reset = "+0".
Teardown stops strobes and deletes the files. Changing the rate restarts the
faked timeline from the process start, so drift comes with a step the size of
(process age × rate change), as with a real clock being slewed abruptly.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.real.backends.base import Host
from harness.real.control.base import DaemonSpec
from harness.real.faults.common import NemesisError, Undoable, on_hosts

LIB_GLOB = " ".join(
    f"{d}/faketime/libfaketimeMT.so.1" for d in ("/usr/lib/*", "/usr/lib", "/usr/local/lib", "/usr/lib64")
)


def faketime_spec(offset_s: float, rate: float = 1.0) -> str:
    """The libfaketime file content for an offset in seconds and a clock rate."""
    spec = "+0" if abs(offset_s) < 5e-7 else f"{offset_s:+.6f}s"
    if abs(rate - 1.0) > 1e-12:
        spec = f"{spec if spec != '+0' else '+0s'} x{rate:.6f}"
    return spec


class ClockNemesis(Undoable):
    """Per-node wall-clock offsets (and optional drift) for processes started with `env(host)`."""

    label = "clock nemesis (libfaketime)"

    def __init__(self, hosts: Sequence[Host], monotonic: bool = False) -> None:
        super().__init__()
        self.hosts = {h.name: h for h in hosts}
        self.monotonic = monotonic
        self.offsets: dict[str, float] = {n: 0.0 for n in self.hosts}
        self.rates: dict[str, float] = {n: 1.0 for n in self.hosts}
        self.libs: dict[str, str] = {}

    # ------------------------------------------------------------------ wiring
    @staticmethod
    def path(host: Host) -> str:
        return f"{host.workdir}/faketime"

    @staticmethod
    def strobe_pidfile(host: Host) -> str:
        return f"{host.workdir}/faketime-strobe.pid"

    def setup(self) -> None:
        """Find libfaketime on every host and write "+0" files (before node processes start)."""
        self._armed()

        def prepare(h: Host) -> str:
            out = h.control.run(f'for f in {LIB_GLOB}; do [ -e "$f" ] && echo "$f" && break; done', timeout=30)
            lib = out.stdout.strip()
            if not lib:
                raise NemesisError(f"{h.name}: libfaketime not found (apt-get install libfaketime)")
            h.control.put_file(self.path(h), "+0\n")
            return lib

        self.libs = on_hosts(self.hosts.values(), prepare)

    @classmethod
    def attached(cls, hosts: Sequence[Host], libs: Mapping[str, str]) -> ClockNemesis:
        """The clocks of a cluster another process prepared (`prepare_left_running`): `env` for restarts, no
        setup, nothing to tear down."""
        clock = cls(hosts)
        clock.libs = {n: lib for n, lib in libs.items() if n in clock.hosts}
        return clock

    def prepare_left_running(self) -> dict[str, str]:
        """For a cluster that outlives this process (`kraftwerk cluster up`): find libfaketime and write "+0"
        files as `setup` does, but leave them when this process exits. The libraries per node ({} if a host
        has no libfaketime: that cluster's clocks cannot be moved, and its nodes run on true time)."""
        try:
            self.setup()
        except NemesisError:
            self.libs = {}
        self._disarmed()
        return dict(self.libs)

    def env(self, host: Host | str) -> dict[str, str]:
        """Environment for a node process whose clock this nemesis controls."""
        h = self.hosts[host] if isinstance(host, str) else host
        if h.name not in self.libs:
            raise NemesisError("ClockNemesis.setup() must run before node processes are started")
        env = {
            "LD_PRELOAD": self.libs[h.name],
            "FAKETIME_TIMESTAMP_FILE": self.path(h),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DISABLE_SHM": "1",
            "NO_FAKE_STAT": "1",
        }
        if not self.monotonic:
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            # libfaketime 0.9.10 would otherwise treat pthread_cond_timedwait's CLOCK_MONOTONIC
            # deadlines as wall-clock ones, stalling CPython's GIL hand-over for up to seconds
            env["FAKETIME_FORCE_MONOTONIC_FIX"] = "0"
        paths = [p for p in (h.faketime_sitedir, h.pythonpath) if p]
        if paths:
            env["PYTHONPATH"] = ":".join(paths)
        return env

    def _write(self, names: Iterable[str]) -> None:
        def write(h: Host) -> None:
            h.control.put_file(self.path(h), faketime_spec(self.offsets[h.name], self.rates[h.name]) + "\n")

        on_hosts([self.hosts[n] for n in names], write)

    # ------------------------------------------------------------------ faults
    def bump(self, deltas_ms: Mapping[str, float]) -> dict[str, float]:
        """Move each node's wall clock by delta milliseconds (cumulative); returns the new offsets in ms."""
        for n, ms in deltas_ms.items():
            if n not in self.hosts:
                raise ValueError(f"unknown node {n!r}")
            self.offsets[n] += float(ms) / 1000.0
        self._write(deltas_ms)
        return {n: round(self.offsets[n] * 1000.0, 3) for n in deltas_ms}

    def drift(self, ppm: Mapping[str, float]) -> None:
        """Set each node's clock rate to 1 + ppm/1e6 (0 restores the real rate)."""
        for n, v in ppm.items():
            self.rates[n] = 1.0 + float(v) / 1e6
        self._write(ppm)

    def apply(self, changes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """The schedule's bump-clock value: {node: {"delta-ms": d, "drift-ppm": p}}."""
        for n, change in changes.items():
            if n not in self.hosts:
                raise ValueError(f"unknown node {n!r}")
            self.offsets[n] += float(change.get("delta-ms", 0)) / 1000.0
            self.rates[n] = 1.0 + float(change.get("drift-ppm", 0) or 0) / 1e6
        self._write(changes)
        return {n: {"offset-ms": round(self.offsets[n] * 1000, 3), "rate": self.rates[n]} for n in changes}

    def strobe(self, spec: Mapping[str, Mapping[str, float]]) -> None:
        """Flip each node's clock between its offset and offset+delta every period, for a duration.

        spec: {node: {"delta-ms": d, "period-ms": p, "duration-s": s}} (Jepsen's strobe-clock).
        Runs as a loop on the node itself; it ends by writing the node's normal offset back.
        """

        def run(h: Host) -> None:
            s = spec[h.name]
            delta, period = float(s["delta-ms"]) / 1000.0, max(float(s["period-ms"]), 1.0) / 1000.0
            flips = max(1, int(float(s["duration-s"]) / period))
            base = faketime_spec(self.offsets[h.name], self.rates[h.name])
            shifted = faketime_spec(self.offsets[h.name] + delta, self.rates[h.name])
            f = shlex.quote(self.path(h))
            loop = (
                f"i=0; while [ $i -lt {flips} ]; do "
                f"if [ $((i % 2)) -eq 0 ]; then v={shlex.quote(shifted)}; else v={shlex.quote(base)}; fi; "
                f'printf "%s\\n" "$v" > {f}.strobe && mv -f {f}.strobe {f}; sleep {period:.3f}; i=$((i + 1)); done; '
                f'printf "%s\\n" {shlex.quote(base)} > {f}.strobe && mv -f {f}.strobe {f}'
            )
            h.control.stop_daemon(self.strobe_pidfile(h), timeout=2)
            h.control.start_daemon(
                DaemonSpec(["sh", "-c", loop], self.strobe_pidfile(h), f"{h.workdir}/faketime-strobe.log")
            )

        for n in spec:
            if n not in self.hosts:
                raise ValueError(f"unknown node {n!r}")
        on_hosts([self.hosts[n] for n in spec], run)

    def _stop_strobes(self, names: Iterable[str]) -> None:
        on_hosts([self.hosts[n] for n in names], lambda h: h.control.stop_daemon(self.strobe_pidfile(h), timeout=2))

    def reset(self, nodes: Iterable[str] | None = None) -> list[str]:
        """Back to true time ("+0", rate 1) on these nodes (default all); the nodes that were skewed."""
        names = list(nodes) if nodes is not None else list(self.hosts)
        skewed = [n for n in names if self.offsets[n] or self.rates[n] != 1.0]
        if not self.libs:
            return skewed
        self._stop_strobes(names)
        for n in names:
            self.offsets[n], self.rates[n] = 0.0, 1.0
        self._write(names)
        return skewed

    heal = reset

    def check_offsets(self) -> dict[str, float]:
        """Measured wall-clock offset of each node in ms, as a fresh process under the same faketime env sees it.

        On the node, one process with and one without libfaketime each print wall minus monotonic
        time; their difference is the offset, free of command latency. (With `monotonic=True` both
        clocks are faked, so the faked wall clock is compared with this machine's instead.)
        """
        probe = "import time; print(repr(time.time() - time.monotonic()))"

        def measure(h: Host) -> float:
            if self.monotonic:
                before = time.time()
                fake = h.control.run([h.python, "-c", "import time; print(repr(time.time()))"], env=self.env(h))
                real = (before + time.time()) / 2
            else:
                real_run = h.control.run([h.python, "-c", probe], timeout=30)
                fake = h.control.run([h.python, "-c", probe], env=self.env(h), timeout=30)
                real = float(real_run.stdout.strip()) if real_run.ok else float("nan")
            if not fake.ok:
                raise NemesisError(f"{h.name}: clock check failed: {fake.stderr.strip()}")
            return round((float(fake.stdout.strip()) - real) * 1000.0, 1)

        return on_hosts(self.hosts.values(), measure)

    def teardown(self) -> None:
        """Stop strobes and delete every faketime file (processes still running fall back to real time)."""
        if self.libs:

            def clean(h: Host) -> None:
                h.control.stop_daemon(self.strobe_pidfile(h), timeout=2)
                h.control.remove(self.path(h), f"{self.path(h)}.strobe", f"{h.workdir}/faketime-strobe.log")

            on_hosts(self.hosts.values(), clean)
        self.offsets = {n: 0.0 for n in self.hosts}
        self.rates = {n: 1.0 for n in self.hosts}
        self.libs = {}
        self._disarmed()
