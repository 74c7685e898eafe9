"""How long a fault takes to land on a node: a process per command (`docker exec`, `ip netns exec`) against
the control agent.

For one node (a container of the node image; a network namespace), times (median and 90th
percentile over --repeat calls, in ms) of what the nemeses do: run a command (`true`), ask a
daemon's status, SIGSTOP a daemon's process group (pause), SIGKILL one and wait until it is gone
(kill), and write a file (the clock nemesis's faketime file). Each is measured through a
transport that keeps the agent and through one that never starts it (`use_agent=False`, as with
`KRAFTWERK_NO_AGENT=1`), in the same run.

Usage: .venv/bin/python benchmarks/control_latency.py [--repeat 20] [--backends docker,netns]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.real.backends.docker import DockerBackend  # noqa: E402
from harness.real.backends.netns import NetnsBackend  # noqa: E402
from harness.real.control.base import DaemonSpec, Transport  # noqa: E402
from harness.real.control.docker import DockerTransport  # noqa: E402
from harness.real.control.netns import NetnsTransport  # noqa: E402


def timed(fn: Callable[[], object], repeat: int, before: Callable[[], object] | None = None) -> list[float]:
    out = []
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def describe(ms: list[float]) -> str:
    ms = sorted(ms)
    return f"{statistics.median(ms):.1f} / {ms[int(0.9 * (len(ms) - 1))]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--backends", default="docker,netns")
    args = parser.parse_args()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {platform.node()} — {os.cpu_count()} cores; {uptime}; {args.repeat} calls each")
    for kind in args.backends.split(","):
        print(f"\n{kind}:\n")
        print("| operation | a process per command: median / p90 ms | control agent: median / p90 ms |")
        print("|---|---|---|")
        for op, (p, a) in measure(kind, args.repeat).items():
            print(f"| {op} | {p} | {a} |", flush=True)


def measure(kind: str, repeat: int) -> dict[str, list[str]]:
    backend = DockerBackend() if kind == "docker" else NetnsBackend()
    with backend:
        host = backend.create(["n1"])[0]
        agent = host.control
        if isinstance(agent, DockerTransport):
            plain: Transport = DockerTransport("n1", agent.container, use_agent=False)
        else:
            assert isinstance(agent, NetnsTransport)
            plain = NetnsTransport("n1", agent.netns, use_agent=False)
        assert plain.agent() is None and agent.agent() is not None
        rows: dict[str, list[str]] = {}
        for label, control in (("plain", plain), ("agent", agent)):
            w = host.workdir
            spec = DaemonSpec(["sleep", "1000"], f"{w}/{label}.pid", f"{w}/{label}.log")
            control.start_daemon(spec)
            rows.setdefault("run `true`", []).append(describe(timed(lambda c=control: c.run(["true"]), repeat)))
            rows.setdefault("daemon status", []).append(
                describe(timed(lambda c=control, s=spec: c.daemon_status(s.pidfile), repeat))
            )
            rows.setdefault("pause (SIGSTOP the group)", []).append(
                describe(timed(lambda c=control, s=spec: c.signal_daemon(s.pidfile, signal.SIGSTOP), repeat))
            )
            control.kill_daemon(spec.pidfile)
            rows.setdefault("kill (SIGKILL, wait until gone)", []).append(
                describe(
                    timed(
                        lambda c=control, s=spec: c.kill_daemon(s.pidfile),
                        repeat,
                        before=lambda c=control, s=spec: c.start_daemon(s),
                    )
                )
            )
            rows.setdefault("write a file", []).append(
                describe(timed(lambda c=control, w=w: c.put_file(f"{w}/faketime.rc", "+0\n"), repeat))
            )
        agent.close()
        return rows


if __name__ == "__main__":
    main()
