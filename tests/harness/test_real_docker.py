"""`kraftwerk test --backend docker`: containerised 5-node clusters under partition+kill+pause+clock faults.

Shows: a clean run is valid, with the store layout and the realised schedule; the cluster is ready
(leader elected, every node answering) within 15 s of creating the containers once the image
exists; seeded quorum bugs are reported invalid; nothing is left behind after a normal run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]

READY_WITHIN = 15.0


def test_register_chaos_on_docker_is_valid_and_leaves_nothing(
    node_image: str,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = realtest.kraftwerk_test(
        tmp_path,
        "--backend",
        "docker",
        "--workload",
        "register",
        "--nemesis",
        "partition,kill,pause,clock",
        "--nodes",
        "5",
        "--concurrency",
        "10",
        "--time-limit",
        "30",
        "--seed",
        "7",
    )
    run = realtest.latest(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Everything looks good!" in r.stderr
    res = realtest.results(run)
    assert res["valid"] is True and res["linearizable"]["valid"] is True and res["epochs"]["valid"] is True
    stats = res["run"]
    with capsys.disabled():
        print(
            f"\ndocker 5-node cluster ready in {stats['ready-seconds']}s (containers {stats['hosts-seconds']}s, "
            f"election {stats['election-seconds']}s); 30 s chaos run took {stats['wall-seconds']}s in all, "
            f"{stats['operations']} ops ({stats['ops-per-second']} ops/s), check {stats['check-seconds']}s"
        )
    assert stats["ready-seconds"] <= READY_WITHIN
    assert stats["recovered"] is True and stats["unread-keys"] == []
    assert res["stats"]["ok"] > 300 and res["stats"]["by-f"]["cas"]["ok"] > 0
    schedule = realtest.check_run_layout(run, 5)
    fired = {e["f"] for e in schedule["nemesis"]}
    assert {"start-partition", "kill", "pause", "bump-clock"} <= fired, fired
    assert [e["f"] for e in schedule["heal"]] == ["stop-partition", "resume", "start", "reset-clock"]
    history = realtest.history_lines(run)
    nemesis_ops = [o for o in history if o["process"] == "nemesis"]
    assert len(nemesis_ops) == len(schedule["nemesis"]) + len(schedule["heal"])
    assert all(o["type"] == "info" for o in nemesis_ops)
    # the committed logs of all nodes agree (and the epochs checker saw them)
    dumps = [[json.loads(x) for x in (run / "logs" / f"n{i}.jsonl").read_text().splitlines()] for i in range(1, 6)]
    assert min(len(d) for d in dumps) > 100
    backend, cluster = realtest.cluster_of(run)
    assert backend == "docker" and realtest.leftovers(cluster) == []
    test = json.loads((run / "test.json").read_text())
    assert test["backend"] == "docker" and test["seed"] == 7


@pytest.mark.parametrize("bug", ["stale-read", "vote-ignores-log"])
def test_seeded_quorum_bug_is_found_on_docker(node_image: str, tmp_path: Path, bug: str) -> None:  # noqa: F811
    """Within a few runs the seeded bug is reported invalid (benchmarks/real_bugs.py measures all of them)."""
    attempts = []
    for seed in (1, 2, 3, 4):
        store = tmp_path / f"seed{seed}"
        r = realtest.kraftwerk_test(
            store, "--backend", "docker", "--time-limit", "15", "--seed", str(seed), "--bug", bug
        )
        attempts.append(r.returncode)
        assert r.returncode in (0, 1), r.stderr[-3000:]
        if r.returncode == 1:
            res = realtest.results(realtest.latest(store))
            assert res["valid"] is False
            assert "Analysis invalid!" in r.stderr
            return
    raise AssertionError(f"--bug {bug} not caught in {len(attempts)} runs: exit codes {attempts}")
