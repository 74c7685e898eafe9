"""What the packet nemesis costs and does between two real nodes: no fault, iptables loss, and the NFQUEUE shaper.

Two hosts of a real backend (network namespaces, or containers): n1 runs a sink/echo server; n2
measures, with each packet fault on what n2 sends n1 (`harness.real.faults.net.PacketNemesis`,
method auto — the NFQUEUE shaper on a kernel without sch_netem):

- round trip of 1 byte (median / p90 over --trips, in ms, on one connection);
- bulk: --megabytes sent n2 → n1, one connection, in MB/s;
- TCP retransmitted segments of n2 during the bulk transfer, and what the fault recorded.

Every configuration is measured in the same run, on the same two hosts, one after another.

Usage: .venv/bin/python benchmarks/packet_shaper.py [--backend netns|docker] [--trips 200] [--megabytes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.real.backends.base import Host  # noqa: E402
from harness.real.control.base import DaemonSpec  # noqa: E402
from harness.real.faults.net import PacketNemesis  # noqa: E402

PORT = 7300
SERVER = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 7300)); s.listen()
def serve(c):
    # first byte: 'e' echo every byte back, 's' sink (reply one byte at the end)
    mode = c.recv(1)
    while (d := c.recv(1 << 16)):
        if mode == b'e':
            c.sendall(d)
        elif d.endswith(b'!'):
            c.sendall(b'k')
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""
CLIENT = """
import json, socket, sys, time
addr, trips, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tcp():
    return {k: int(v) for k, v in zip(*[l.split()[1:] for l in open('/proc/net/snmp') if l.startswith('Tcp:')])}
e = socket.create_connection((addr, 7300), 10); e.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
e.sendall(b'e'); rtts = []
for _ in range(trips):
    t = time.perf_counter(); e.sendall(b'x'); e.recv(1); rtts.append(time.perf_counter() - t)
before = tcp()["RetransSegs"]
s = socket.create_connection((addr, 7300), 10); s.sendall(b's'); chunk = b'y' * 65536
t = time.perf_counter(); left = size
while left > 0:
    n = min(left, len(chunk)); s.sendall(chunk[:n]); left -= n
s.sendall(b'!'); s.recv(1); bulk = time.perf_counter() - t
rtts.sort()
print(json.dumps({"rtt": rtts[len(rtts) // 2] * 1e3, "p90": rtts[int(0.9 * (len(rtts) - 1))] * 1e3,
                  "mbps": size / bulk / 1e6, "retrans": tcp()["RetransSegs"] - before}))
"""
CONFIGS: list[tuple[str, dict[str, Any] | None]] = [
    ("no fault", None),
    ("loss 2% (iptables statistic)", {"loss": {"percent": 2}}),
    ("shaper, delay 0 ms (queue round trip only)", {"delay": {"time-ms": 0, "jitter-ms": 0}}),
    ("shaper, delay 20 ms", {"delay": {"time-ms": 20, "jitter-ms": 0}}),
    ("shaper, duplicate 10%", {"duplicate": {"percent": 10}}),
    ("shaper, delay 5 ms + reorder 10%", {"delay": {"time-ms": 5, "jitter-ms": 0}, "reorder": {"percent": 10}}),
]


def measure(n2: Host, n1: Host, trips: int, size: int) -> dict[str, float]:
    out = n2.control.sh([n2.python, "-c", CLIENT, n1.address, str(trips), str(size)], timeout=600)
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="netns", choices=["netns", "docker"])
    parser.add_argument("--trips", type=int, default=200)
    parser.add_argument("--megabytes", type=float, default=20)
    args = parser.parse_args()
    size = int(args.megabytes * 1e6)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {platform.node()} — {os.cpu_count()} cores, kernel {platform.release()}; {uptime}")
    print(f"backend {args.backend}; {args.trips} round trips of 1 byte, {args.megabytes:g} MB bulk n2 → n1\n")
    if args.backend == "docker":
        from harness.real.backends.docker import DockerBackend
        from harness.real.image import build

        backend: Any = DockerBackend(image=build().tag)
    else:
        from harness.real.backends.netns import NetnsBackend

        backend = NetnsBackend()
    with backend:
        n1, n2 = backend.create(2)
        n1.control.put_file(f"{n1.workdir}/sink.py", SERVER)
        n1.control.start_daemon(
            DaemonSpec(
                [n1.python, f"{n1.workdir}/sink.py", n1.address], f"{n1.workdir}/sink.pid", f"{n1.workdir}/sink.log"
            )
        )
        wait = (
            "import socket, time\n"
            "for _ in range(100):\n"
            "    try:\n"
            f"        socket.create_connection(({n1.address!r}, {PORT}), 1).close(); break\n"
            "    except OSError:\n"
            "        time.sleep(0.1)\n"
        )
        n2.control.sh([n2.python, "-c", wait])
        packets = PacketNemesis([n1, n2])
        print("| fault on n2 → n1 | method | RTT median / p90 ms | bulk MB/s | retransmits | recorded at stop |")
        print("|---|---|---|---|---|---|")
        try:
            for label, behaviours in CONFIGS:
                method = "-"
                if behaviours is not None:
                    method = packets.start(behaviours, nodes=["n2"], peers=["n1"])["method"]
                try:
                    m = measure(n2, n1, args.trips, size)
                finally:
                    done = packets.stop().get("n2", {}) if behaviours is not None else {}
                counts = ", ".join(f"{k} {v}" for k, v in done.items() if v)
                print(
                    f"| {label} | {method} | {m['rtt']:.2f} / {m['p90']:.2f} | {m['mbps']:.1f} | {m['retrans']} "
                    f"| {counts or '-'} |",
                    flush=True,
                )
        finally:
            packets.teardown()


if __name__ == "__main__":
    main()
