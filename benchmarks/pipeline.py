"""Pipeline throughput (issue "Nightly chaos suites, CI gating, and the PySpark data pipeline"):

1. build a synthetic store: RUNS runs (default 1,000) of OPS client operations each (default 10,000,
   so 10 M operations), written directly as register histories that are linearizable by construction
   (each operation takes effect at its completion), a few with an injected stale read; plus
   events.jsonl, log dumps, test.json and results.json as `kraftwerk test` writes them;
2. `analyze` it with master local[*], and report runs/s and operations/s;
3. start a standalone Spark master and 2 workers (1 core each) on 127.0.0.1 from the pyspark
   package (`spark-class org.apache.spark.deploy.master.Master` / `…worker.Worker`), run the same
   job against spark://127.0.0.1:7077 into a fresh output directory, and stop them.

Usage: .venv/bin/python benchmarks/pipeline.py [--runs N] [--ops N] [--dir DIR] [--keep] [--skip-standalone]
Prints a Markdown table (for benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.pipeline.job import analyze  # noqa: E402

KEYS = 10
CONCURRENCY = 10
NODES = ("n1", "n2", "n3")
NIGHTS = 7
CONFIGS = (("partition",), ("kill",), ("partition", "kill", "pause", "clock"))


def _value(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)


def synth_run(args: tuple[str, int, int, bool]) -> int:
    """Write one synthetic run directory; returns its client operation count."""
    run_dir, seed, ops, stale = args
    rng = random.Random(seed)
    path = Path(run_dir)
    (path / "logs").mkdir(parents=True, exist_ok=True)
    ops_list = []  # (invoke_t, complete_t, process, key, f, value, crashed)
    t_end = 0
    for p in range(CONCURRENCY):
        t = rng.randrange(1_000_000)
        proc = p
        for _ in range(ops // CONCURRENCY):
            t += rng.randrange(100_000, 2_000_000)
            lat = rng.randrange(200_000, 20_000_000)
            key = f"r{rng.randrange(KEYS)}"
            r = rng.random()
            f = "read" if r < 0.5 else "write" if r < 0.8 else "cas"
            crashed = rng.random() < 0.002
            ops_list.append([t, t + lat, proc, key, f, None, crashed])
            t += lat
            if crashed:
                proc += CONCURRENCY  # a crashed client reopens under a new process id
        t_end = max(t_end, t)
    # effects at completion time: linearizable by construction
    state: dict[str, int | None] = {}
    results = []
    for op in sorted(ops_list, key=lambda o: o[1]):
        _, _, _, key, f, _, crashed = op
        cur = state.get(key)
        if f == "read":
            value, typ = cur, "ok"
            inv_value = None
        elif f == "write":
            value = inv_value = rng.randrange(5)
            state[key], typ = value, "ok"
        else:
            expected, new = (cur if rng.random() < 0.5 else rng.randrange(5)), rng.randrange(5)
            value = inv_value = [expected, new]
            if cur == expected and expected is not None:
                state[key], typ = new, "ok"
            else:
                typ = "fail"
        if crashed:
            typ = "info"
        results.append((op, inv_value, value, typ))
    if stale:
        reads = [i for i, (op, _, v, typ) in enumerate(results) if op[4] == "read" and typ == "ok" and v is not None]
        if reads:
            i = rng.choice(reads)
            op, inv_value, _, typ = results[i]
            results[i] = (op, inv_value, 99, typ)  # a value no one ever wrote
    events = []
    for op, inv_value, value, typ in results:
        t0, t1, proc, key, f, _, _ = op
        events.append((t0, 0, proc, key, f, inv_value, None))
        events.append((t1, 1, proc, key, f, value if typ == "ok" else inv_value, typ))
    windows = []
    t = rng.randrange(1_000_000_000, 5_000_000_000)
    while t < t_end:
        stop = t + rng.randrange(1_000_000_000, 5_000_000_000)
        windows.append((t, "start-partition", {"n1": ["n2", "n3"]}))
        windows.append((min(stop, t_end), "stop-partition", None))
        t = stop + rng.randrange(2_000_000_000, 8_000_000_000)
    lines = []
    stream = sorted(events, key=lambda e: (e[0], e[1]))
    nem = sorted(windows)
    j = 0
    for t, phase, proc, key, f, value, typ in stream:
        while j < len(nem) and nem[j][0] <= t:
            nt, nf, nv = nem[j]
            lines.append(
                f'{{"index": {len(lines)}, "time": {nt}, "process": "nemesis", "type": "info", "f": "{nf}", '
                f'"value": {json.dumps(nv)}}}\n'
            )
            j += 1
        kind = "invoke" if phase == 0 else typ
        node = "" if phase == 0 else f', "node": "n{proc % 3 + 1}"'
        lines.append(
            f'{{"index": {len(lines)}, "time": {t}, "process": {proc}, "type": "{kind}", "f": "{f}", '
            f'"key": "{key}", "value": {_value(value)}{node}}}\n'
        )
    (path / "history.jsonl").write_text("".join(lines), encoding="utf-8")
    ev = []
    hw = 0
    for epoch in range(1, rng.randrange(3, 7)):
        leader = rng.choice(NODES)
        for n in NODES:
            role = "leader" if n == leader else "follower"
            ev.append(
                {
                    "node": n,
                    "time": epoch * 1000,
                    "type": "state",
                    "epoch": epoch,
                    "role": role,
                    "leader": leader,
                    "voted_for": leader,
                }
            )
        for _ in range(10):
            hw += rng.randrange(1, 20)
            ev.append({"node": leader, "time": epoch * 1000 + hw, "type": "hw", "epoch": epoch, "hw": hw})
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev), encoding="utf-8")
    for n in NODES:
        (path / "logs" / f"{n}.jsonl").write_text(
            "".join(json.dumps({"offset": o, "epoch": 1, "digest": f"{o:016x}"}) + "\n" for o in range(hw)),
            encoding="utf-8",
        )
    nemesis = CONFIGS[seed % len(CONFIGS)]
    test = {
        "name": "register-synthetic",
        "workload": "register",
        "backend": "sim",
        "nemesis": list(nemesis),
        "nodes": 3,
        "concurrency": CONCURRENCY,
        "time-limit": 60.0,
        "interval": 5.0,
        "seed": seed,
        "bugs": ["stale-read"] if stale else [],
        "argv": ["synthetic"],
        "start-time": "",
    }
    (path / "test.json").write_text(json.dumps(test), encoding="utf-8")
    results_json = {
        "valid": not stale,
        "anomaly-types": ["nonlinearizable"] if stale else [],
        "run": {"reproduce": f"(synthetic run, seed {seed})"},
    }
    (path / "results.json").write_text(json.dumps(results_json), encoding="utf-8")
    return len(results)


def build_store(store: Path, runs: int, ops: int) -> tuple[int, float]:
    started = time.monotonic()
    jobs = []
    for i in range(runs):
        night = i * NIGHTS // runs
        stamp = f"202611{10 + night:02d}T{(i // 3600) % 24:02d}{(i // 60) % 60:02d}{i % 60:02d}.{i % 1000:03d}"
        jobs.append((str(store / "register-synthetic" / stamp), i, ops, i % 20 == 7))
    with multiprocessing.Pool(os.cpu_count() or 2) as pool:
        total = sum(pool.imap_unordered(synth_run, jobs, chunksize=4))
    return total, time.monotonic() - started


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


class Standalone:
    """A Spark standalone master and workers on loopback, started from the pyspark package."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "4g") -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.procs: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
            "PYSPARK_PYTHON": sys.executable,
        }
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed when the process ends
        proc = subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(proc)

    def __enter__(self) -> Standalone:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            "7077",
            "--webui-port",
            "18080",
        )
        _wait_port(7077, 120)
        for i in range(self.workers):
            self._start(
                f"worker{i + 1}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(18081 + i),
                "--work-dir",
                str(self.workdir / f"work{i + 1}"),
                "spark://127.0.0.1:7077",
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            text = (self.workdir / "master.log").read_text(errors="replace")
            if text.count("Registering worker") >= self.workers:
                return self
            time.sleep(0.5)
        raise RuntimeError("workers did not register with the master (see master.log)")

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_job(store: Path, out: Path, master: str, conf: dict[str, str]) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    result = analyze(store, out, master=master, spark_conf=conf, log=lambda m: print(f"  {m}", file=sys.stderr))
    seconds = time.monotonic() - started
    totals = result.rollups["totals"][0]
    return {
        "runs": result.analysed,
        "ops": result.ops,
        "errors": result.errors,
        "invalid": totals["invalid"],
        "seconds": seconds,
        "spark-start": result.timings.get("spark-start", 0.0),
        **{f"t:{k}": v for k, v in result.timings.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ops", type=int, default=10_000, help="client operations per run")
    ap.add_argument("--dir", default="/tmp/kraftwerk-pipeline-bench")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic store between invocations")
    ap.add_argument("--skip-standalone", action="store_true")
    args = ap.parse_args()
    base = Path(args.dir)
    store = base / "store"
    marker = base / "store.json"
    spec = {"runs": args.runs, "ops": args.ops}
    if args.keep and marker.exists() and json.loads(marker.read_text()) == spec:
        total = sum(1 for _ in store.glob("*/*/history.jsonl")) * args.ops
        gen_s = 0.0
        print(f"reusing {store}", file=sys.stderr)
    else:
        shutil.rmtree(base, ignore_errors=True)
        store.mkdir(parents=True)
        print(f"writing {args.runs} runs × {args.ops} operations into {store}…", file=sys.stderr)
        total, gen_s = build_store(store, args.runs, args.ops)
        marker.write_text(json.dumps(spec))
    size = sum(p.stat().st_size for p in store.rglob("*.jsonl"))
    print(f"store: {total} operations, {size / 1e9:.2f} GB of JSON Lines, built in {gen_s:.0f} s", file=sys.stderr)
    rows = []
    print("local[*]…", file=sys.stderr)
    local = run_job(store, base / "out-local", "local[*]", {"spark.driver.memory": "6g"})
    rows.append(("local[*]", local))
    if not args.skip_standalone:
        print("standalone master + 2 workers…", file=sys.stderr)
        with Standalone(base / "standalone"):
            conf = {
                "spark.driver.memory": "3g",
                "spark.executor.memory": "4g",
                "spark.executor.cores": "1",
                "spark.cores.max": "2",
            }
            cluster = run_job(store, base / "out-standalone", "spark://127.0.0.1:7077", conf)
        rows.append(("spark://127.0.0.1:7077 (2 workers × 1 core)", cluster))
    cpu = platform.processor() or platform.machine()
    print(
        f"\n### Pipeline throughput ({args.runs} runs, {total:,} operations, {size / 1e9:.2f} GB JSONL; "
        f"{os.cpu_count()} CPUs {cpu}, Python {platform.python_version()})\n"
    )
    print("| master | runs | operations | wall s | Spark start s | runs/s | ops/s | invalid runs | malformed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        print(
            f"| {name} | {r['runs']} | {r['ops']:,} | {r['seconds']:.0f} | {r['spark-start']:.0f} | "
            f"{r['runs'] / r['seconds']:.1f} | {r['ops'] / r['seconds']:,.0f} | {r['invalid']} | {r['errors']} |"
        )
    print("\nStage times (s):\n")
    stages = [k for k in rows[0][1] if k.startswith("t:")]
    print("| master | " + " | ".join(k[2:] for k in stages) + " |")
    print("|---|" + "---|" * len(stages))
    for name, r in rows:
        print(f"| {name} | " + " | ".join(f"{r.get(k, 0):.0f}" for k in stages) + " |")


if __name__ == "__main__":
    main()
