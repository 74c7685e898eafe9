"""The network layer's throughput, before and after a change, side by side in one run.

Each round starts the request server (`nodes.runtime.server.Server`) of one source tree in its own
process, with an echo handler (the handler costs almost nothing, so the figure is the network
layer's: accept, read, frame, request channel, handler hand-off, response write), and drives it
from a separate client process: C connections, each a closed loop of one request in flight at a
time (Kafka clients' default for idempotent producers), for --seconds. Trees alternate round by
round (`--baseline` first, then this tree), so a load that comes and goes on the machine hits both.

Usage: .venv/bin/python benchmarks/socket_server.py --baseline /tmp/base [--rounds 3] [--seconds 3]
       (make the baseline with `git worktree add --detach /tmp/base <commit>`)
       [--cases 1x100,16x100,16x16384] [--processors 1,3]  (processor counts for trees that have them)
Prints a Markdown table: requests/s (median and best over rounds), p50/p99 latency of the median
round, and server CPU seconds per 1,000 requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = r"""
import asyncio, dataclasses, json, resource, sys
from nodes.runtime.server import Server, ServerConfig

async def echo(req):
    return bytes(req.body)

async def main():
    kw = json.loads(sys.argv[1])
    names = {f.name for f in dataclasses.fields(ServerConfig)}
    server = Server(echo, ServerConfig(host="127.0.0.1", port=0, **{k: v for k, v in kw.items() if k in names}))
    await server.start()
    print(json.dumps({"port": server.port, "has": sorted(names)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    m = server.metrics()
    await server.close(timeout=1.0)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"cpu": ru.ru_utime + ru.ru_stime, "metrics": m}), flush=True)

asyncio.run(main())
"""


def _frame(correlation_id: int, body: bytes) -> bytes:
    client_id = b"bench"
    header = struct.pack(">hhih", 0, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(header) + len(body)) + header + body


async def _connection(port: int, size: int, deadline: float, latencies: list[float]) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b"x" * size
    done = 0
    corr = 0
    try:
        while time.perf_counter() < deadline:
            corr += 1
            start = time.perf_counter()
            writer.write(_frame(corr, body))
            (n,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.readexactly(n)
            if struct.unpack_from(">i", frame)[0] != corr:
                raise RuntimeError("response out of order")
            latencies.append(time.perf_counter() - start)
            done += 1
    finally:
        writer.close()
    return done


async def _drive(port: int, conns: int, size: int, seconds: float) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    start = time.perf_counter()
    counts = await asyncio.gather(*(_connection(port, size, start + seconds, latencies) for _ in range(conns)))
    return sum(counts), time.perf_counter() - start, latencies


def one_round(tree: Path, conns: int, size: int, seconds: float, processors: int | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    kw = {"num_handlers": 8, "max_in_flight_per_connection": 1}
    if processors is not None:
        kw["num_processors"] = processors
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, json.dumps(kw)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tree,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = json.loads(proc.stdout.readline())
        if processors is not None and "num_processors" not in hello["has"]:
            raise SystemExit(f"{tree} has no num_processors: leave --processors out for it")
        requests, elapsed, latencies = asyncio.run(_drive(hello["port"], conns, size, seconds))
        proc.stdin.close()
        bye = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    if bye["metrics"]["responses_sent"] < requests:
        raise RuntimeError(f"server answered {bye['metrics']['responses_sent']} of {requests}")
    latencies.sort()
    return {
        "rps": requests / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "cpu_per_1k": bye["cpu"] / requests * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the earlier commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cases", default="1x100,16x100,16x16384", help="CONNSxBYTES,… (default: %(default)s)")
    parser.add_argument("--processors", default="1,3", help="processor counts for this tree (default: %(default)s)")
    args = parser.parse_args()
    if not (args.baseline / "nodes" / "runtime" / "server.py").is_file():
        print(f"--baseline {args.baseline}: no nodes/runtime/server.py there", file=sys.stderr)
        return 254
    cases = [tuple(int(x) for x in case.split("x")) for case in args.cases.split(",")]
    variants: list[tuple[str, Path, int | None]] = [("baseline", args.baseline, None)]
    variants += [(f"this tree, {p} processor(s)", ROOT, p) for p in (int(x) for x in args.processors.split(","))]
    results: dict[tuple[str, int, int], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for conns, size in cases:
            for name, tree, procs in variants:
                res = one_round(tree, conns, size, args.seconds, procs)
                results.setdefault((name, conns, size), []).append(res)
                print(f"round {r + 1}/{args.rounds} {conns}x{size} {name}: {res['rps']:.0f} req/s", file=sys.stderr)
    load = os.getloadavg()[0]
    print(f"\n{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, load {load:.1f}\n")
    print("| connections × bytes | server | req/s median | req/s best | p50 ms | p99 ms | server CPU s / 1k req |")
    print("|---|---|---|---|---|---|---|")
    for conns, size in cases:
        for name, _tree, _procs in variants:
            runs = sorted(results[(name, conns, size)], key=lambda x: x["rps"])
            med = runs[len(runs) // 2]
            print(
                f"| {conns} × {size} | {name} | {statistics.median(x['rps'] for x in runs):,.0f} | "
                f"{runs[-1]['rps']:,.0f} | {med['p50_ms']:.2f} | {med['p99_ms']:.2f} | {med['cpu_per_1k']:.3f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
