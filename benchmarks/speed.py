"""Every speed figure of issue 29 in one run, on one machine, this tree beside a baseline tree.

Rows (each measured in a fresh child process, with this tree's or the baseline's code on its path):
- sim-register, sim-queue, sim-txn: one simulated test (5 nodes, 10 clients, the default nemeses
  `all` unless --nemesis), the simulation alone (SimRuntime.run, no check, no report): simulated
  seconds per CPU second of that process and per wall second;
- explore: `kraftwerk explore --runs N --time-limit 10` in one process (every run simulated, checked
  and stored): simulated seconds per CPU second of the whole process, and its ratio to sim-register
  (the target: within 20 %);
- analyze: `kraftwerk analyze STORE --master local[2]` of a store of --analyze-runs register runs
  (10 s each, built once with `explore --keep all` into --work and reused): operations per second per
  core (operations / wall / 2), wall and CPU seconds of the whole process tree;
- checkers: `benchmarks/checkers.py` (our `kraftwerk check` processes beside Porcupine's test binary,
  alternating): the kraftwerk/Porcupine ratio on the etcd corpus and on kv c50, best of --repeat;
- verdict: `kraftwerk test --backend sim --workload register --time-limit 60`, whole process: how long
  after the simulation's end (its "simulated … in …" line) the verdict line is printed, and the whole
  process's wall and CPU seconds.

Each row runs --repeat times per tree, the trees alternating (who goes first swaps each round); the
table shows the best and the median. The baseline is a detached `git worktree` of --base (default: the
commit issue 29 started from) made in --work. The load average is printed before and after.

Usage: .venv/bin/python benchmarks/speed.py [--base REV | --no-base] [--rows sim-register,…] [--repeat 3]
       [--analyze-runs 1000] [--porcupine BIN] [--work DIR]
Prints a Markdown table for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "d648a2a"  # main when issue 29's speed work resumed (2026-11-28)
ROWS = ("sim-register", "sim-queue", "sim-txn", "explore", "analyze", "checkers", "verdict")
TARGETS = {
    "sim-register": "≥ 300× per CPU s",
    "sim-queue": "≥ 200× per CPU s",
    "sim-txn": "≥ 100× per CPU s",
    "explore": "within 20 % of sim-register per CPU s",
    "analyze": "≥ 20,000 ops/s per core",
    "checkers": "≤ 0.5× Porcupine on both",
    "verdict": "verdict ≤ 1.5 s after the simulation ends",
}
SIM_ARGS = {
    "sim-register": ["--workload", "register", "--time-limit", "60"],
    "sim-queue": ["--workload", "queue", "--time-limit", "60"],
    "sim-txn": ["--workload", "queue", "--txn", "--time-limit", "20"],
}
# the simulation alone, in the child: the spec a `kraftwerk test` command line gives, run without a check
SIM_CHILD = """
import json, sys, time
from harness.core.spec import TestSpec
from harness.sim.runtime import SimRuntime
spec = TestSpec.from_argv(sys.argv[1:])
cpu, wall = time.process_time(), time.perf_counter()
stats = SimRuntime(spec).run().stats
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"virtual": stats["virtual-seconds"], "cpu": cpu, "wall": wall, "operations": stats["operations"]}))
"""
Sample = dict[str, float]


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    return env


def _run(argv: list[str], tree: Path, on_line: Callable[[float, str], None] | None = None) -> tuple[str, str, Sample]:
    """Run a child in `tree`: stdout, stderr, and its wall and CPU seconds (its waited-for descendants too)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            cwd=tree,
            env=_env(tree),
            stdout=out,
            stderr=subprocess.PIPE if on_line else err,
            text=on_line is not None,
        )
        if on_line is not None:
            assert proc.stderr is not None
            for line in proc.stderr:
                on_line(time.perf_counter() - started, line)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)} (in {tree}) exited {code}:\n{stderr[-2000:]}")
    return stdout, stderr, {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime}


def sim(row: str, tree: Path, seed: int, nemesis: str) -> Sample:
    argv = [sys.executable, "-c", SIM_CHILD, *SIM_ARGS[row], "--seed", str(seed), "--nemesis", nemesis]
    stdout, _, _ = _run(argv, tree)
    doc = json.loads(stdout.strip().splitlines()[-1])
    return {
        "value": doc["virtual"] / doc["cpu"],
        "per-wall": doc["virtual"] / doc["wall"],
        "cpu": doc["cpu"],
        "wall": doc["wall"],
    }


def explore(tree: Path, work: Path, runs: int, seed: int) -> Sample:
    store = Path(tempfile.mkdtemp(prefix="explore-", dir=work))
    argv = [sys.executable, "-m", "harness.cli", "explore", "--runs", str(runs), "--time-limit", "10"]
    argv += ["--seed", str(seed), "--store", str(store), "--keep", "all"]
    _, _, took = _run(argv, tree)
    virtual = sum(json.loads(p.read_text())["run"]["virtual-seconds"] for p in store.rglob("results.json"))
    shutil.rmtree(store)
    return {"value": virtual / took["cpu"], "per-wall": virtual / took["wall"], **took}


def analyze_store(work: Path, runs: int) -> Path:
    """A store of `runs` 10 s register runs (seeds 10000…), built once by this tree's `explore` and reused."""
    store = work / f"analyze-store-{runs}"
    if (store / ".complete").exists():
        return store
    shutil.rmtree(store, ignore_errors=True)  # a build that did not complete
    print(f"building the analyze store: {runs} runs into {store}", file=sys.stderr, flush=True)
    argv = [sys.executable, "-m", "harness.cli", "explore", "--runs", str(runs), "--time-limit", "10"]
    _run([*argv, "--seed", "10000", "--store", str(store), "--keep", "all"], ROOT)
    (store / ".complete").write_text("")
    return store


def analyze(tree: Path, work: Path, store: Path) -> Sample:
    out = Path(tempfile.mkdtemp(prefix="analyze-", dir=work))
    argv = [sys.executable, str(ROOT / "benchmarks" / "cputime.py"), "--", sys.executable, "-m", "harness.cli"]
    argv += ["analyze", str(store), "--out", str(out), "--master", "local[2]"]
    _, stderr, took = _run(argv, tree)
    shutil.rmtree(out)
    ops = re.search(r"\((\d+) operations\)", stderr)
    cpu = re.search(r"([\d.]+) CPU s", stderr)
    if ops is None:
        raise RuntimeError(f"analyze printed no operation count:\n{stderr[-2000:]}")
    tree_cpu = float(cpu.group(1)) if cpu else took["cpu"]
    return {
        "value": int(ops.group(1)) / took["wall"] / 2,
        "ops": int(ops.group(1)),
        "wall": took["wall"],
        "cpu": tree_cpu,
    }


def checkers(tree: Path, porcupine: str) -> Sample:
    """One round of benchmarks/checkers.py (this tree's script, run with `tree`'s code on the path)."""
    script = ROOT / "benchmarks" / "checkers.py"
    stdout, _, took = _run(
        [sys.executable, str(script), "--porcupine", porcupine, "--rounds", "1", "--tree", str(tree)], tree
    )
    ratios = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 3 and cells[0].startswith(("etcd corpus", "kv c50")):
            ratios["etcd" if cells[0].startswith("etcd") else "c50"] = float(cells[3].rstrip("×"))
    if set(ratios) != {"etcd", "c50"}:
        raise RuntimeError(f"checkers.py printed no ratios:\n{stdout[-2000:]}")
    return {"value": max(ratios.values()), "etcd": ratios["etcd"], "c50": ratios["c50"], **took}


def verdict(tree: Path, work: Path, seed: int) -> Sample:
    marks: dict[str, float] = {}

    def on_line(at: float, line: str) -> None:
        if line.startswith("simulated "):
            marks.setdefault("simulated", at)
        elif line.startswith(("Everything looks good", "Analysis invalid", "results: ")):
            marks.setdefault("verdict", at)

    store = Path(tempfile.mkdtemp(prefix="verdict-", dir=work))
    argv = [sys.executable, "-m", "harness.cli", "test", "--backend", "sim", "--workload", "register"]
    argv += ["--time-limit", "60", "--seed", str(seed), "--store", str(store)]
    _, _, took = _run(argv, tree, on_line)
    shutil.rmtree(store)
    if set(marks) != {"simulated", "verdict"}:
        raise RuntimeError(f"no simulated/verdict lines seen: {marks}")
    return {"value": marks["verdict"] - marks["simulated"], **took}


def _commit(tree: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree, capture_output=True, text=True
    )
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def base_tree(rev: str, work: Path) -> Path:
    """A detached worktree of `rev` in `work` (made once)."""
    full = subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = work / f"base-{full[:12]}"
    if not (tree / "harness").is_dir():
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-f", str(tree), full], cwd=ROOT, check=True, capture_output=True
        )
    return tree


def _fmt(row: str, samples: list[Sample]) -> str:
    if not samples:
        return "—"
    values = [s["value"] for s in samples]
    lower_is_better = row in ("checkers", "verdict")
    best = min(values) if lower_is_better else max(values)
    pick = next(s for s in samples if s["value"] == best)
    med = statistics.median(values)
    if row.startswith("sim-") or row == "explore":
        return f"**{best:.0f}×** (median {med:.0f}×; {pick['per-wall']:.0f}× per wall s; CPU {pick['cpu']:.2f} s)"
    if row == "analyze":
        detail = f"{pick['ops']:,} ops, wall {pick['wall']:.1f} s, CPU {pick['cpu']:.1f} s"
        return f"**{best:,.0f}** (median {med:,.0f}; {detail})"
    if row == "checkers":
        return f"**{best:.2f}×** (etcd {pick['etcd']:.2f}×, c50 {pick['c50']:.2f}×; median worst {med:.2f}×)"
    return f"**{best:.2f} s** (median {med:.2f} s; whole process wall {pick['wall']:.2f} s, CPU {pick['cpu']:.2f} s)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default=BASE, help=f"the baseline commit (default {BASE})")
    p.add_argument("--no-base", action="store_true", help="measure this tree only")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated from {','.join(ROWS)} (default: all)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each row per tree (default 3)")
    p.add_argument("--seed", type=int, default=1, help="the simulated tests' seed (default 1)")
    p.add_argument("--nemesis", default="all", help="the simulated tests' --nemesis (default all)")
    p.add_argument("--explore-runs", type=int, default=60, help="runs of the explore row (default 60)")
    p.add_argument("--analyze-runs", type=int, default=1000, help="runs in the analyze store (default 1000)")
    p.add_argument("--analyze-store", default=None, metavar="DIR", help="analyze this store instead of building one")
    p.add_argument("--porcupine", default=os.environ.get("PORCUPINE_TEST"), help="Porcupine's test binary")
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "kraftwerk-speed"), help="scratch directory")
    args = p.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if bad := [r for r in rows if r not in ROWS]:
        p.error(f"--rows: unknown {', '.join(bad)} (known: {', '.join(ROWS)})")
    if "checkers" in rows and not (args.porcupine and Path(args.porcupine).is_file()):
        p.error("--porcupine: the checkers row needs Porcupine's test binary (see benchmarks/checkers.py)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    trees = {"this tree": ROOT}
    if not args.no_base:
        trees["base"] = base_tree(args.base, work)
    store = None
    if "analyze" in rows:
        store = Path(args.analyze_store) if args.analyze_store else analyze_store(work, args.analyze_runs)

    def measure(row: str, tree: Path) -> Sample:
        if row.startswith("sim-"):
            return sim(row, tree, args.seed, args.nemesis)
        if row == "explore":
            return explore(tree, work, args.explore_runs, args.seed)
        if row == "analyze":
            assert store is not None
            return analyze(tree, work, store)
        if row == "checkers":
            return checkers(tree, args.porcupine)
        return verdict(tree, work, args.seed)

    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    results: dict[str, dict[str, list[Sample]]] = {row: {name: [] for name in trees} for row in rows}
    for row in rows:
        for i in range(args.repeat):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                sample = measure(row, trees[name])
                results[row][name].append(sample)
                print(f"{row} [{name}] round {i + 1}: {sample['value']:.3f}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()

    print(
        f"machine: {platform.node()} — {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.platform()}"
    )
    print(
        f"run: {started}, {args.repeat} alternating rounds per row; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print("trees: " + ", ".join(f"{name} = {_commit(tree)}" for name, tree in trees.items()) + "\n")
    header = ["work", "target", *trees]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        cells = [row, TARGETS[row], *(_fmt(row, results[row][name]) for name in trees)]
        print("| " + " | ".join(cells) + " |")
    if "explore" in rows and "sim-register" in rows:
        for name in trees:
            ex = max(s["value"] for s in results["explore"][name])
            reg = max(s["value"] for s in results["sim-register"][name])
            print(f"\nexplore / sim-register per CPU s, {name}: {ex / reg:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
