"""`kraftwerk test --workload queue` on real clusters: Kafka clients against broker nodes.

Shows: with Kafka's safe profile (acks=all, RF 3, min ISR 2) runs under kills, pauses and
partitions are valid on the local, docker and netns backends, with the store layout plus the
brokers' partition-log dumps; with acks=1 and the partition leader isolated the queue checker reports lost writes
(allowed with --allow, invalid without).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness.real import realtest
from tests.harness.real.backends.clusters import (
    need_root,
    node_image,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.slow]

ACKS1_EXPECTED = ("lost-write", "inconsistent-offsets", "nonmonotonic-send", "unseen")  # what acks=1 may lose


def _queue_run(store: Path, backend: str, *args: str, nodes: int = 5) -> tuple[subprocess.CompletedProcess[str], Path]:
    r = realtest.kraftwerk_test(store, "--workload", "queue", "--backend", backend, "--nodes", str(nodes), *args)
    return r, realtest.latest(store)


def _check_valid_queue_run(r: subprocess.CompletedProcess[str], run: Path, nodes: int) -> dict[str, Any]:
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Everything looks good!" in r.stderr
    res = realtest.results(run)
    assert res["valid"] is True and res["queue"]["valid"] is True and res["epochs"]["valid"] is True
    assert res["partition-logs"] == {"valid": True, "partitions": 3}
    q = res["queue"]["stats"]
    assert q["sends"]["ok"] > 100 and q["polls"]["ok"] > 50 and q["values-read"] >= q["sends"]["ok"]
    stats = res["run"]
    assert stats["recovered"] is True and stats["unread-keys"] == []
    realtest.check_run_layout(run, nodes)
    for p in range(3):  # every replica of every partition dumped its committed batches
        dumps = sorted(f.name for f in (run / "logs" / "partitions" / f"t0-{p}").glob("*.jsonl"))
        assert len(dumps) == 3, dumps
    test = json.loads((run / "test.json").read_text())
    assert test["workload"] == "queue" and test["acks"] == "all"
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []
    return res


def test_queue_on_local_is_valid_with_the_store_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r, run = _queue_run(
        tmp_path, "local", "--nemesis", "kill,pause", "--interval", "3", "--time-limit", "12", "--seed", "2", nodes=3
    )
    res = _check_valid_queue_run(r, run, 3)
    with capsys.disabled():
        print(f"\nlocal queue run: {res['run']['ops-per-second']} ops/s, wall {res['run']['wall-seconds']}s")


@pytest.mark.docker
def test_queue_acks_all_under_partitions_and_kills_on_docker_is_valid(
    node_image: str,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    r, run = _queue_run(tmp_path, "docker", "--nemesis", "partition,kill", "--time-limit", "30", "--seed", "3")
    res = _check_valid_queue_run(r, run, 5)
    fired = {e["f"] for e in json.loads((run / "schedule.json").read_text())["nemesis"]}
    assert {"start-partition", "kill"} <= fired, fired
    with capsys.disabled():
        print(f"\ndocker queue run: {res['run']['ops-per-second']} ops/s, wall {res['run']['wall-seconds']}s")


@pytest.mark.docker
def test_queue_acks_1_with_the_partition_leader_isolated_on_docker_loses_writes(
    node_image: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """acks=1 loses acknowledged writes when a partition leader is cut off from the other brokers
    (Jepsen's 2013 Kafka finding): clients keep writing to it, the controller fences it and elects a
    new leader from the ISR, and on heal the old leader truncates what only it had. Reported as
    lost-write; allowed with --allow (exit 0), invalid when the same history is checked without it.

    Each isolation outlasts the 3 s broker session, so every run should lose writes (3 of 3 netns
    runs of 25 s did, see benchmarks/RESULTS.md); more seeds only guard against a run where the
    clients did not write to the isolated node while it was cut off (one suite run needed a second)."""
    allow = [a for anomaly in ACKS1_EXPECTED for a in ("--allow", anomaly)]
    codes = []
    for seed in (1, 2, 3):
        store = tmp_path / f"seed{seed}"
        r, run = _queue_run(
            store, "docker", "--acks", "1", "--nemesis", "partition", "--partition-kinds", "leader",
            "--interval", "6", "--time-limit", "25", "--seed", str(seed), *allow,
        )  # fmt: skip
        codes.append(r.returncode)
        assert r.returncode == 0, r.stderr[-3000:]  # every anomaly acks=1 may show is allowed
        res = realtest.results(run)
        assert res["valid"] is True and res["queue"]["bad-anomaly-types"] == []
        starts = [e for e in json.loads((run / "schedule.json").read_text())["nemesis"] if e["f"] == "start-partition"]
        assert starts and all(e["value"]["kind"] == "leader" for e in starts)
        for e in starts:  # the resolved leader is cut off from the four other nodes
            grudge = e["value"]["grudge"]
            assert any(len(grudge[n]) == 4 for n in grudge), grudge
        if "lost-write" not in res["queue"]["anomaly-types"]:
            continue
        assert res["queue"]["anomalies"]["lost-write"]["count"] > 0
        check = subprocess.run(
            [sys.executable, "-m", "harness.cli", "check", str(run / "history.jsonl"), "--model", "queue"],
            cwd=realtest.ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert check.returncode == 1, check.stderr
        verdict = json.loads(check.stdout.splitlines()[0])
        assert verdict["valid"] is False and "lost-write" in verdict["anomaly-types"]
        return
    raise AssertionError(f"acks=1 with the leader isolated showed no lost write in {len(codes)} runs ({codes})")


def test_queue_acks_all_on_netns_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_root()
    r, run = _queue_run(tmp_path, "netns", "--nemesis", "partition,kill", "--time-limit", "25", "--seed", "3")
    res = _check_valid_queue_run(r, run, 5)
    with capsys.disabled():
        print(f"\nnetns queue run: {res['run']['ops-per-second']} ops/s, wall {res['run']['wall-seconds']}s")
