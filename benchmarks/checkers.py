"""Checker speed beside Porcupine: whole `kraftwerk check` processes and Porcupine's own tests, in one run.

Corpora (the reference histories in `tests/data/histories/porcupine/test_data`):
- the etcd corpus: every non-empty `jepsen/etcd_*.log`, cas-register — beside Porcupine's
  `TestEtcdJepsen*` (the same 102 logs; etcd_095 is empty and has no test);
- the kv c50 pair: `kv/c50-ok.txt` + `kv/c50-bad.txt`, kv-append — beside Porcupine's
  `TestKv50Clients*` (TestKv50ClientsOk, TestKv50ClientsBad).

Ours is one whole process per corpus: `python -m harness.cli check FILES --model M --quiet`
(interpreter start, imports, parsing, checking, JSON output), run the way an installed
`kraftwerk` runs: its bytecode cache may be written (PYTHONDONTWRITEBYTECODE is dropped from the
child's environment) and one untimed warm-up run of each side comes first. Porcupine's is one
whole test-binary process per corpus (`porcupine.test -test.run REGEX`, cwd = the corpus, whose
`test_data/` is Porcupine's own). The two alternate within every round (who goes first swaps each
round), over --rounds rounds; the script prints best and median wall seconds and the ratios
kraftwerk/Porcupine (wall seconds; CPU seconds too, which a loaded machine disturbs less). It
never compares with a stored figure. Every run's verdicts are checked:
ours against MANIFEST.tsv, Porcupine's by its exit status (its tests assert the verdicts).

Getting Porcupine (Go; nothing of it is copied into this project, only its test binary runs):

    apt-get install -y golang-go                       # Debian's Go
    git clone https://github.com/anishathalye/porcupine /tmp/porcupine
    cd /tmp/porcupine && go test -c -o porcupine.test .  # no dependencies beyond the standard library

Usage: .venv/bin/python benchmarks/checkers.py --porcupine /tmp/porcupine/porcupine.test [--rounds N]
       (or PORCUPINE_TEST=/tmp/porcupine/porcupine.test). Without the binary it says so and exits 2.
`--extras` adds the Knossos corpus (ours only) and in-process queue/epoch checker throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
H = ROOT / "tests" / "data" / "histories"
PORCUPINE_DATA = H / "porcupine"
EXIT_NO_PORCUPINE = 2


TREE = ROOT  # whose `kraftwerk check` runs: this tree, or --tree (benchmarks/speed.py's baseline)


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(TREE)
    return env


def _timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, float, int, str]:
    """Run one process: wall seconds, CPU seconds (user + system, with its waited-for children),
    peak RSS MiB, exit code, stdout."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, proc.returncode, text


def expected_verdicts() -> dict[str, bool]:
    """MANIFEST.tsv's expected verdict per file (valid/invalid rows only)."""
    out = {}
    lines = (H / "MANIFEST.tsv").read_text().splitlines()[1:]
    for row in (line.split("\t") for line in lines):
        if row[5] in ("valid", "invalid"):
            out[str(H / row[0])] = row[5] == "valid"
    return out


class Corpus:
    def __init__(self, name: str, files: list[str], model: str, porcupine_regex: str | None) -> None:
        self.name, self.files, self.model, self.regex = name, files, model, porcupine_regex
        self.ours: list[float] = []
        self.theirs: list[float] = []
        self.ours_cpu: list[float] = []
        self.theirs_cpu: list[float] = []
        self.peak_mb = 0.0
        self.verdicts = {"valid": 0, "invalid": 0, "unknown": 0}

    def run_ours(self, expected: dict[str, bool]) -> float:
        argv = [sys.executable, "-m", "harness.cli", "check", *self.files, "--model", self.model, "--quiet"]
        wall, cpu, rss, code, out = _timed(argv, TREE, _child_env())
        self.ours_cpu.append(cpu)
        if code not in (0, 1):
            raise SystemExit(f"kraftwerk check failed on {self.name} (exit {code})")
        results = [json.loads(line) for line in out.splitlines()]
        self.verdicts = {"valid": 0, "invalid": 0, "unknown": 0}
        for r in results:
            self.verdicts[{True: "valid", False: "invalid"}.get(r["valid"], "unknown")] += 1
            want = expected.get(r["file"])
            if want is not None and r["valid"] is not want:
                raise SystemExit(f"verdict changed: {r['file']} is {r['valid']}, MANIFEST.tsv says {want}")
        self.peak_mb = max(self.peak_mb, rss)
        return wall

    def run_theirs(self, binary: str) -> float:
        assert self.regex is not None
        wall, cpu, _, code, out = _timed([binary, "-test.run", self.regex], PORCUPINE_DATA)
        self.theirs_cpu.append(cpu)
        if code != 0:
            raise SystemExit(f"Porcupine's {self.regex} failed (exit {code}):\n{out[-2000:]}")
        return wall


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×"


def bench_side_by_side(corpora: list[Corpus], binary: str, rounds: int) -> None:
    expected = expected_verdicts()
    for c in corpora:  # warm-up: bytecode cache, page cache
        c.run_ours(expected)
        c.run_theirs(binary)
        c.ours_cpu.clear()
        c.theirs_cpu.clear()
    for r in range(rounds):
        for c in corpora:
            if r % 2 == 0:
                c.ours.append(c.run_ours(expected))
                c.theirs.append(c.run_theirs(binary))
            else:
                c.theirs.append(c.run_theirs(binary))
                c.ours.append(c.run_ours(expected))


def bench_queue(n_sends: int) -> tuple[float, int]:
    from checkers.history import History, Op
    from checkers.queue import check_queue

    rnd = random.Random(1)
    ops: list[Op] = []
    logs: dict[str, list[int]] = {f"t0-{k}": [] for k in range(8)}
    for v in range(n_sends):
        key = f"t0-{rnd.randrange(8)}"
        p = v % 16
        ops.append(Op(len(ops), "invoke", p, "send", v, key=key, line=len(ops) + 1))
        logs[key].append(v)
        ops.append(Op(len(ops), "ok", p, "send", [len(logs[key]) - 1, v], key=key, line=len(ops) + 1))
    for k, log in enumerate(logs.values()):
        key = f"t0-{k}"
        ops.append(Op(len(ops), "invoke", 100 + k, "poll", None, key=key, line=len(ops) + 1))
        ops.append(Op(len(ops), "ok", 100 + k, "poll", [[o, v] for o, v in enumerate(log)], key=key, line=len(ops) + 1))
    history = History(ops, "bench")
    history.operations()
    started = time.perf_counter()
    result = check_queue(history)
    elapsed = time.perf_counter() - started
    assert result["valid"] is True, result.get("anomaly-types")
    return elapsed, len(ops)


def bench_epochs(n: int) -> tuple[float, int]:
    from checkers.epochs import check_events

    events = []
    for i in range(n // 3):
        e = i // 50 + 1
        lead = f"n{e % 3 + 1}"
        events.append({"node": lead, "type": "state", "epoch": e, "role": "leader", "leader": lead, "voted_for": lead})
        events.append({"node": "n4", "type": "state", "epoch": e, "role": "follower", "leader": lead})
        events.append({"node": "n4", "type": "hw", "epoch": e, "hw": i})
    started = time.perf_counter()
    result = check_events(events)
    elapsed = time.perf_counter() - started
    assert result["valid"] is True
    return elapsed, len(events)


def _extras(rounds: int) -> None:
    knossos = sorted(str(p) for p in (H / "knossos/data/cas-register").rglob("*.edn"))
    c = Corpus(f"knossos cas-register corpus ({len(knossos)} files)", knossos, "cas-register", None)
    expected = expected_verdicts()
    c.run_ours(expected)
    walls = [c.run_ours(expected) for _ in range(rounds)]
    v = ", ".join(f"{n} {k}" for k, n in c.verdicts.items() if n)
    print()
    print("| corpus (kraftwerk only) | best (s) | median (s) | peak RSS (MiB) | verdicts |")
    print("|---|---|---|---|---|")
    print(f"| {c.name} | {min(walls):.3f} | {statistics.median(walls):.3f} | {c.peak_mb:.0f} | {v} |")
    q_s, q_n = bench_queue(500_000)
    e_s, e_n = bench_epochs(600_000)
    print()
    print("| checker throughput (in process) | size | seconds | rate |")
    print("|---|---|---|---|")
    print(f"| queue checker, valid history | {q_n:,} ops | {q_s:.2f} | {q_n / q_s:,.0f} ops/s |")
    print(f"| epoch checker, valid stream | {e_n:,} events | {e_s:.2f} | {e_n / e_s:,.0f} events/s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--porcupine",
        default=os.environ.get("PORCUPINE_TEST"),
        metavar="BINARY",
        help="Porcupine's test binary built with `go test -c` (default: $PORCUPINE_TEST)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--extras", action="store_true", help="also the Knossos corpus and checker throughput")
    parser.add_argument(
        "--tree", default=str(ROOT), metavar="DIR", help="the kraftwerk checkout whose checker runs (default: this one)"
    )
    args = parser.parse_args()
    global TREE
    TREE = Path(args.tree).resolve()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    binary = args.porcupine
    if not binary or not os.access(binary, os.X_OK):
        where = f" ({binary} is not an executable file)" if binary else ""
        print(
            f"Porcupine's test binary is not there{where}: give --porcupine BINARY or PORCUPINE_TEST.\n"
            "Build it: apt-get install -y golang-go; git clone https://github.com/anishathalye/porcupine; "
            "cd porcupine && go test -c -o porcupine.test .",
            file=sys.stderr,
        )
        return EXIT_NO_PORCUPINE
    if not (H / "MANIFEST.tsv").exists():
        print(f"the reference histories are missing from {H}", file=sys.stderr)
        return EXIT_NO_PORCUPINE
    jepsen = PORCUPINE_DATA / "test_data" / "jepsen"
    etcd = sorted(str(p) for p in jepsen.glob("etcd_*.log") if p.stat().st_size > 0)
    kv = PORCUPINE_DATA / "test_data" / "kv"
    corpora = [
        Corpus(f"etcd corpus ({len(etcd)} logs, cas-register)", etcd, "cas-register", "^TestEtcdJepsen"),
        Corpus(
            "kv c50-ok + c50-bad (kv-append)",
            [str(kv / "c50-ok.txt"), str(kv / "c50-bad.txt")],
            "kv-append",
            "^TestKv50Clients(Ok|Bad)$",
        ),
    ]
    load_before = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    bench_side_by_side(corpora, binary, args.rounds)
    load_after = os.getloadavg()[0]
    go = subprocess.run(["go", "version"], capture_output=True, text=True, check=False).stdout.strip() or "go: ?"
    print(
        f"machine: {platform.node()} — {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}; {go}"
    )
    print(
        f"run: {started}, {args.rounds} alternating rounds, load average {load_before:.2f} before, "
        f"{load_after:.2f} after"
    )
    print()
    print(
        "| corpus | kraftwerk best (s) | Porcupine best (s) | ratio best | kraftwerk median (s) "
        "| Porcupine median (s) | ratio median | CPU best, kraftwerk / Porcupine (s) "
        "| kraftwerk peak RSS (MiB) | kraftwerk verdicts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in corpora:
        ob, tb = min(c.ours), min(c.theirs)
        om, tm = statistics.median(c.ours), statistics.median(c.theirs)
        v = ", ".join(f"{n} {k}" for k, n in c.verdicts.items() if n)
        print(
            f"| {c.name} | {ob:.3f} | {tb:.3f} | {_ratio(ob, tb)} | {om:.3f} | {tm:.3f} | {_ratio(om, tm)} "
            f"| {min(c.ours_cpu):.2f} / {min(c.theirs_cpu):.2f} | {c.peak_mb:.0f} | {v} |"
        )
    if args.extras:
        _extras(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
