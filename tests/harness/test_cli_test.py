"""`kraftwerk test --backend sim` end to end: store layout, verdicts, exit codes, bad options."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def kraftwerk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600)


def test_clean_run_is_valid_and_stored(tmp_path: Path) -> None:
    r = kraftwerk("test", "--backend", "sim", "--time-limit", "10", "--seed", "5", "--store", str(tmp_path))
    assert r.returncode == 0, r.stderr
    run = (tmp_path / "latest").resolve()
    assert run.parent.name == "register-sim" and (tmp_path / "register-sim" / "latest").resolve() == run
    for name in ("test.json", "history.jsonl", "events.jsonl", "results.json", "schedule.json", "run.json"):
        assert (run / name).is_file(), name
    assert sorted(p.name for p in (run / "logs").iterdir()) == [f"n{i}.jsonl" for i in range(1, 6)]
    assert sorted(p.name for p in (run / "nodes").iterdir()) == [f"n{i}" for i in range(1, 6)]
    # run.json: the phases in the history's time base, the simulator's invariants
    observed = json.loads((run / "run.json").read_text())
    (start, end), heal, (final, last) = (
        observed["phases"]["main"],
        observed["phases"]["heal"],
        observed["phases"]["final"],
    )
    assert 0 < start < end == heal < final <= last and end - start == 10 * 10**9 and final - heal >= 10 * 10**9
    assert observed["invariants"]["valid"] is True and observed["node-fatal"] == []
    times = [json.loads(line)["time"] for line in (run / "history.jsonl").read_text().splitlines()]
    assert start <= times[0] and times[-1] <= last
    test = json.loads((run / "test.json").read_text())
    assert test["seed"] == 5 and test["nemesis"] == ["partition", "kill", "pause", "clock"]
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    assert "--seed 5" in results["run"]["reproduce"]
    # the stored history checks the same way from the command line
    r2 = kraftwerk("check", str(run))
    assert r2.returncode == 0, r2.stdout
    assert "Everything looks good" in r.stderr


def test_same_seed_same_history(tmp_path: Path) -> None:
    digests = []
    for store in ("a", "b"):
        args = ["test", "--time-limit", "5", "--seed", "9", "--store", str(tmp_path / store), "-q"]
        assert kraftwerk(*args).returncode == 0
        digests.append((tmp_path / store / "latest" / "history.jsonl").read_bytes())
    assert digests[0] == digests[1]


def test_seeded_bug_is_invalid(tmp_path: Path) -> None:
    r = kraftwerk("test", "--time-limit", "10", "--seed", "1", "--bug", "stale-read", "--store", str(tmp_path))
    assert r.returncode == 1, r.stderr
    results = json.loads((tmp_path / "latest" / "results.json").read_text())
    assert results["linearizable"]["valid"] is False
    assert (tmp_path / "latest" / "timeline.html").is_file()
    assert "Analysis invalid" in r.stderr


def test_test_count_runs_seed_after_seed_and_stops_at_the_first_failure(tmp_path: Path) -> None:
    # stale-read with 2 s of main phase: seed 1 is valid, seed 2 invalid (seed 3 would be valid again)
    r = kraftwerk(
        "test", "--time-limit", "2", "--seed", "1", "--bug", "stale-read", "--test-count", "4", "--store", str(tmp_path)
    )
    assert r.returncode == 1, r.stderr
    assert stored_seeds(tmp_path) == [1, 2]
    assert "run 2 of 4 (seed 2) is not valid (exit 1); stopped" in r.stderr and "--seed 2 --bug stale-read" in r.stderr

    clean = kraftwerk("test", "--time-limit", "2", "--seed", "10", "--test-count", "3", "--store", str(tmp_path / "c"))
    assert clean.returncode == 0, clean.stderr
    assert "all 3 runs valid (seeds 10…12)" in clean.stdout
    assert stored_seeds(tmp_path / "c") == [10, 11, 12]


def stored_seeds(store: Path) -> list[int]:
    runs = [d for d in (store / "register-sim").iterdir() if not d.is_symlink()]  # not `latest`
    return sorted(json.loads((d / "test.json").read_text())["seed"] for d in runs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nemesis", "partition,flood"], "unknown nemesis flood"),
        (["--bug", "no-such-bug"], "--bug no-such-bug"),
        (["--partition-kinds", "leader,ring"], "--partition-kinds: unknown partition kind ring"),
        (["--nodes", "0"], "--nodes"),
        (["--backend", "docker", "--workload", "queue", "--nodes", "2"], "--replication-factor must be between"),
        (["--time-limit", "abc"], "--time-limit"),
        (["--fsync-delay", "-5"], "--fsync-delay"),
        (["--clock-source", "tsc"], "--clock-source"),
        (["--workload", "queue", "--txn", "--acks", "1"], "--txn needs --acks all"),
        (["--workload", "queue", "--txn", "--sub-via", "subscribe"], "--txn works with --sub-via assign only"),
        (["--txn"], "--txn is an option of --workload queue"),
        (["--workload", "queue", "--txn", "--allow", "G2"], "--allow G2: not a transactional queue anomaly"),
        (["--rate", "0"], "--rate must be a positive number"),
        (["--db", "etcd"], "--db etcd runs on --backend docker, netns or local, not sim"),
        (["--db", "etcd", "--backend", "docker", "--workload", "queue"], "--db etcd does not serve the 'kafka'"),
        (["--etcd-read", "serializable"], "--etcd-read is an option of --db etcd"),
        # a seeded bug the workload can never reach is refused, naming the workloads that reach it
        (
            ["--bug", "marker-partial"],
            "--bug marker-partial: it lives in the transaction coordinator, which --workload register never reaches, "
            "so it could not fire; it is reached by --workload queue --txn",
        ),
        (["--workload", "queue", "--bug", "stale-read"], "it is reached by --workload register"),
        (
            ["--workload", "queue", "--bug", "coordinator-no-reload"],
            "it is reached by --workload queue --sub-via subscribe",
        ),
    ],
)
def test_bad_options_exit_254(tmp_path: Path, args: list[str], message: str) -> None:
    r = kraftwerk("test", "--store", str(tmp_path), *args)
    assert r.returncode == 254
    assert message in r.stderr


@pytest.mark.parametrize("verb", ["explore", "replay", "shrink"])
def test_every_test_command_refuses_an_unreachable_bug(tmp_path: Path, verb: str) -> None:
    """explore (which ran 16 attempts of it before), replay and shrink of a stored run refuse it alike."""
    run = []
    if verb != "explore":
        assert kraftwerk("test", "--time-limit", "3", "--seed", "1", "--store", str(tmp_path), "-q").returncode == 0
        run = [str((tmp_path / "latest").resolve())]
    store = [] if verb == "shrink" else ["--store", str(tmp_path)]  # shrink writes RUN_DIR/minimal
    r = kraftwerk(verb, *run, "--bug", "marker-partial", *store)
    assert r.returncode == 254, r.stderr
    assert "--bug marker-partial: it lives in the transaction coordinator" in r.stderr


def test_queue_workload_safe_profile_is_valid(tmp_path: Path) -> None:
    r = kraftwerk("test", "--workload", "queue", "--time-limit", "10", "--seed", "3", "--store", str(tmp_path))
    assert r.returncode == 0, r.stderr
    run = (tmp_path / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert results["queue"]["valid"] is True and results["partition-logs"]["valid"] is True
    assert results["queue"]["stats"]["sends"]["ok"] > 50
    assert sorted(p.name for p in (run / "logs" / "partitions").iterdir()) == ["t0-0", "t0-1", "t0-2"]
    test = json.loads((run / "test.json").read_text())
    assert test["acks"] == "all" and test["min-isr"] == 2
    assert kraftwerk("check", str(run)).returncode == 0


def test_queue_bad_options(tmp_path: Path) -> None:
    r = kraftwerk("test", "--workload", "queue", "--replication-factor", "7", "--store", str(tmp_path))
    assert r.returncode == 254 and "--replication-factor" in r.stderr
    r = kraftwerk("test", "--workload", "queue", "--allow", "nonsense", "--store", str(tmp_path))
    assert r.returncode == 254 and "--allow nonsense" in r.stderr


def test_restricted_options_are_recorded_and_in_the_reproduce_command() -> None:
    """Options that change what a real run does travel with it: test.json and the reproduce line
    carry --partition-kinds, --lose-unsynced and --fsync-delay only when they are not the default."""
    from harness.cli import build_parser
    from harness.commands.test import problem, reproduce_command
    from harness.core.spec import TestSpec, from_args
    from harness.store.runs import test_document as describe

    def parsed(*extra: str) -> Any:
        args = build_parser().parse_args(["test", "--backend", "netns", "--seed", "3", *extra])
        assert problem(args) in (
            None,
            "--backend netns needs root (network namespaces); use --backend docker or local",
        )
        return from_args(args)

    plain = parsed()
    assert describe(plain)["kraftwerk"] == {
        "lose-unsynced": False,
        "fsync-delay-ms": 0,
        "clock-source": "wall",
        "lease-reads": False,
    }
    line = reproduce_command(plain)
    assert "--partition-kinds" not in line and "--lose-unsynced" not in line and "--fsync-delay" not in line

    spec = parsed("--partition-kinds", "leader", "--lose-unsynced", "--fsync-delay", "250")
    test = describe(spec)
    assert test["partition-kinds"] == ["leader"]
    assert (test["kraftwerk"]["lose-unsynced"], test["kraftwerk"]["fsync-delay-ms"]) == (True, 250)
    again = build_parser().parse_args(shlex.split(reproduce_command(spec))[1:])
    assert (again.partition_kinds, again.lose_unsynced, again.fsync_delay) == (("leader",), True, 250)
    assert from_args(again) == spec and TestSpec.from_json(test) == spec


def test_fsync_delay_slows_the_simulated_disk_and_replays_identically(tmp_path: Path) -> None:
    """--fsync-delay in the simulator: stored in schedule.json and test.json (so a real replay uses the
    same slow disk), a different run than without it, and still byte-identical on replay."""
    digests = {}
    for delay in ("0", "150"):
        store = tmp_path / delay
        r = kraftwerk("test", "--time-limit", "5", "--seed", "2", "--fsync-delay", delay, "--store", str(store))
        assert r.returncode == 0, r.stderr
        run = (store / "latest").resolve()
        schedule = json.loads((run / "schedule.json").read_text())
        test = json.loads((run / "test.json").read_text())
        assert schedule["test"]["kraftwerk"]["fsync-delay-ms"] == test["kraftwerk"]["fsync-delay-ms"] == int(delay)
        digests[delay] = json.loads((run / "results.json").read_text())["run"]["history-sha256"]
        again = kraftwerk("replay", str(run))
        assert again.returncode == 0 and "identical to the stored run" in again.stderr, again.stderr
    assert digests["0"] != digests["150"]


def test_clock_source_is_recorded_and_replayed(tmp_path: Path) -> None:
    """--clock-source monotonic travels in test.json, schedule.json and the reproduce line; the stored run replays
    byte for byte with it."""
    r = kraftwerk(
        "test", "--time-limit", "6", "--seed", "4", "--nemesis", "clock", "--clock-source", "monotonic",
        "--store", str(tmp_path), "-q",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    run = (tmp_path / "latest").resolve()
    assert json.loads((run / "test.json").read_text())["kraftwerk"]["clock-source"] == "monotonic"
    assert json.loads((run / "schedule.json").read_text())["test"]["kraftwerk"]["clock-source"] == "monotonic"
    assert "--clock-source monotonic" in json.loads((run / "results.json").read_text())["run"]["reproduce"]
    assert kraftwerk("replay", str(run)).returncode == 0
