"""`kraftwerk test --nemesis disk` on real node processes (local backend, no root; docker): nodes are killed,
their log files torn or bit-flipped on the host by `python -m nodes disk-fault`, and restarted; recovery
detects the damage by CRC, fetches the range back, and the run stays valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.nemesis.schedule import generate
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture

pytestmark = [pytest.mark.slow]

NODES, LIMIT, INTERVAL = 3, 15, 3


def seed_with_a_flip() -> int:
    """The first seed whose schedule flips a bit well before the end (schedules are a function of the seed)."""
    names = [f"n{i}" for i in range(1, NODES + 1)]
    for seed in range(100):
        events = generate(seed, names, ["disk"], LIMIT, INTERVAL)
        if any(e["f"] == "start-disk" and e["value"]["fault"] == "corrupt" and e["at"] < 10e9 for e in events):
            return seed
    raise AssertionError("no schedule with a flipped bit")


def test_disk_faults_on_local_nodes_are_detected_repaired_and_valid(tmp_path: Path) -> None:
    check_disk_run(tmp_path, "local")


@pytest.mark.docker
def test_disk_faults_on_docker_are_detected_repaired_and_valid(node_image: str, tmp_path: Path) -> None:  # noqa: F811
    check_disk_run(tmp_path, "docker")


def check_disk_run(tmp_path: Path, backend: str) -> None:
    seed = seed_with_a_flip()
    r = realtest.kraftwerk_test(
        tmp_path,
        *("--backend", backend, "--nemesis", "disk", "--nodes", str(NODES)),
        *("--time-limit", str(LIMIT), "--interval", str(INTERVAL), "--seed", str(seed)),
    )
    run = realtest.latest(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert realtest.results(run)["valid"] is True
    realtest.check_run_layout(run, NODES)
    done = [
        what
        for op in realtest.history_lines(run)
        if op.get("f") == "start-disk" and op["type"] == "info"
        for what in op["value"].values()
    ]
    flips = [d for d in done if d["fault"] == "corrupt" and "file" in d]
    assert flips, done
    logs = "".join(p.read_text(errors="replace") for p in run.glob("nodes/*/node.log"))
    assert "of corrupt tail" in logs or "of non-contiguous tail" in logs or "a damaged range" in logs, logs[-2000:]
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []
