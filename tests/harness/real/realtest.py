"""Helpers for the real-cluster tests (tests/harness/test_real_*.py): run `kraftwerk test`, inspect runs, leftovers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[3]


def kraftwerk_test(store: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`kraftwerk test … --store STORE` in a child process (stderr kept for the assertion messages)."""
    cmd = [sys.executable, "-m", "harness.cli", "test", "--store", str(store), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def start_kraftwerk_test(store: Path, log: IO[bytes], *args: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "harness.cli", "test", "--store", str(store), *args]
    # a suite started in the background (`cmd &`) has SIGINT ignored, and the child would inherit that
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def latest(store: Path) -> Path:
    return (store / "latest").resolve()


def results(run: Path) -> dict[str, Any]:
    return json.loads((run / "results.json").read_text())


def history_lines(run: Path) -> list[dict[str, Any]]:
    path = run / "history.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line being written right now
            break
    return out


def wait_for_faults(store: Path, proc: subprocess.Popen[bytes], fs: set[str], timeout: float = 120) -> Path:
    """Wait until the running test's history shows client ops and nemesis ops of every f in `fs`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"kraftwerk test exited early with {proc.returncode}"
        if (store / "latest").exists():
            run = latest(store)
            ops = history_lines(run)
            seen = {o["f"] for o in ops if o.get("process") == "nemesis"}
            if fs <= seen and sum(1 for o in ops if o.get("type") == "ok") > 20:
                return run
        time.sleep(0.2)
    raise AssertionError(f"no {sorted(fs)} faults within {timeout}s")


def interrupt(
    proc: subprocess.Popen[bytes], sig: int = signal.SIGINT, timeout: float = 120, log: Path | None = None
) -> int:
    """Send `sig` and wait for the exit status; on a hang, fail with every thread's stack (the CLI
    dumps them on SIGUSR1) and the end of the harness's log."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        proc.wait()
        tail = log.read_text(errors="replace")[-12000:] if log is not None else "(no log)"
        raise AssertionError(f"kraftwerk still running {timeout}s after {signal.Signals(sig).name}:\n{tail}") from None


def cluster_of(run: Path) -> tuple[str, str]:
    doc = json.loads((run / "cluster.json").read_text())
    return doc["backend"], doc["cluster"]


def leftovers(cluster: str) -> list[str]:
    """Everything of one cluster still on this machine: containers, networks, namespaces, links,
    directories (node workdirs hold the faketime files), iptables chains, and node processes."""
    found: list[str] = []
    try:
        from harness.real.backends import docker as docker_backend

        found += [x for x in docker_backend.leftovers() if cluster in x]
    except Exception as e:  # noqa: BLE001 - no docker here: nothing of docker can be left
        if "no docker engine" not in str(e):
            raise
    if os.geteuid() == 0:
        from harness.real.backends import netns

        found += [x for x in netns.leftovers() if cluster in x]
        rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout
        found += [f"iptables: {line}" for line in rules.splitlines() if cluster in line]
    from harness.real.backends import local

    found += [x for x in local.leftovers() if cluster in x]
    for base in (Path("/var/tmp/kraftwerk/netns"), local.BASE_DIR):
        found += [f"faketime file {p}" for p in base.glob(f"{cluster}/*/faketime*")]
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    found += [f"process {line}" for line in procs.splitlines() if cluster in line and "nodes" in line]
    return found


def check_run_layout(run: Path, nodes: int) -> dict[str, Any]:
    """The store layout of docs/design.md "Store" for a finished real run; returns schedule.json."""
    for name in ("test.json", "history.jsonl", "events.jsonl", "results.json", "schedule.json", "cluster.json"):
        assert (run / name).is_file(), name
    observed = json.loads((run / "run.json").read_text())  # the phases in the history's time base
    (start, end), heal, (final, last) = (
        observed["phases"]["main"],
        observed["phases"]["heal"],
        observed["phases"]["final"],
    )
    assert 0 <= start < end <= heal <= final <= last and observed["invariants"] is None
    names = [f"n{i}" for i in range(1, nodes + 1)]
    assert sorted(p.name for p in (run / "logs").glob("*.jsonl")) == sorted(f"{n}.jsonl" for n in names)
    for n in names:
        for f in ("events.jsonl", "node.log", "node.out", "node.properties"):
            assert (run / "nodes" / n / f).is_file(), f"nodes/{n}/{f}"
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert {e["node"] for e in events} == set(names)
    for n in names:  # merged, but each node's own order kept
        own = [json.dumps(e, sort_keys=True) for e in events if e["node"] == n]
        theirs = [
            json.dumps(json.loads(line), sort_keys=True)
            for line in (run / "nodes" / n / "events.jsonl").read_text().splitlines()
            if line.strip()
        ]
        assert own == theirs[: len(own)] and len(theirs) - len(own) <= 1  # at most a torn last line dropped
    schedule = json.loads((run / "schedule.json").read_text())
    for e in schedule["nemesis"]:
        assert {"at", "package", "f", "value"} <= set(e)
        if e["f"] in ("kill", "pause"):
            assert isinstance(e["value"], list) and set(e["value"]) <= set(names), e  # "leader" resolved
        if e["f"] == "start-partition":
            assert "grudge" in e["value"], e
    assert schedule["ops"] and all({"at", "client", "f", "key", "node"} <= set(o) for o in schedule["ops"])
    assert [o["at"] for o in schedule["ops"]] == sorted(o["at"] for o in schedule["ops"])
    return schedule


def valid_short_run_of(store: Path, db: str, options: list[str], nemesis: str, log: str, marker: str) -> dict:
    """A 12 s register run of `db` on three members on 127.0.0.x (--backend local, `nemesis`): valid, every
    key read back, the polled states in events.jsonl, each member's `log` in nodes/<n>/ showing `marker`;
    its test.json."""
    r = kraftwerk_test(
        store, "--db", db, *options, "--backend", "local", "--nemesis", nemesis, "--nodes", "3",
        "--time-limit", "12", "--interval", "3", "--seed", "5",
    )  # fmt: skip
    run = latest(store)
    assert r.returncode == 0, r.stderr[-3000:]
    res = results(run)
    assert res["linearizable"]["valid"] is True and res["epochs"]["valid"] is True
    assert res["stats"]["by-f"]["cas"]["ok"] > 0 and res["run"]["unread-keys"] == []
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert {e["node"] for e in events} == {"n1", "n2", "n3"} and any(e["role"] == "leader" for e in events)
    for n in ("n1", "n2", "n3"):
        assert marker in (run / "nodes" / n / log).read_text()
    test = json.loads((run / "test.json").read_text())
    assert test["db"] == db
    return test
