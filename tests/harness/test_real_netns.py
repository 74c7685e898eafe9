"""`kraftwerk test --backend netns`: the same register chaos test with nodes in network namespaces (root)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.harness.real import realtest
from tests.harness.real.backends.clusters import need_faketime, need_root

pytestmark = [pytest.mark.slow]


def test_register_chaos_on_netns_is_valid_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_root()
    need_faketime()
    r = realtest.kraftwerk_test(
        tmp_path, "--backend", "netns", "--nemesis", "partition,kill,pause,clock", "--time-limit", "25", "--seed", "7"
    )
    run = realtest.latest(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = realtest.results(run)
    assert res["valid"] is True
    stats = res["run"]
    with capsys.disabled():
        print(
            f"\nnetns 5-node cluster ready in {stats['ready-seconds']}s; 25 s chaos run took {stats['wall-seconds']}s, "
            f"{stats['operations']} ops ({stats['ops-per-second']} ops/s)"
        )
    assert stats["ready-seconds"] <= 15
    schedule = realtest.check_run_layout(run, 5)
    assert {"start-partition", "kill", "pause", "bump-clock"} <= {e["f"] for e in schedule["nemesis"]}
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []


def test_netns_needs_root_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cli import build_parser
    from harness.commands.test import problem as _validate

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args = build_parser().parse_args(["test", "--backend", "netns", "--store", str(tmp_path)])
    assert "needs root" in (_validate(args) or "")


def test_restart_as_leader_is_caught_on_a_slow_disk_that_loses_unsynced_writes(tmp_path: Path) -> None:
    """KAFKA-10527 needs a restarted leader that lost an entry its followers hold: kills every ~1 s,
    appends lost unless fsynced (--lose-unsynced), fsyncs 200 ms late (--fsync-delay)."""
    need_root()
    codes = []
    for seed in (1, 2, 3):
        store = tmp_path / f"seed{seed}"
        r = realtest.kraftwerk_test(
            store, "--backend", "netns", "--nemesis", "kill", "--interval", "1", "--time-limit", "20",
            "--seed", str(seed), "--bug", "restart-as-leader", "--lose-unsynced", "--fsync-delay", "200",
        )  # fmt: skip
        codes.append(r.returncode)
        assert r.returncode in (0, 1), r.stderr[-3000:]
        if r.returncode == 1:
            res = realtest.results(realtest.latest(store))
            assert res["valid"] is False
            test = json.loads((realtest.latest(store) / "test.json").read_text())
            assert test["kraftwerk"]["fsync-delay-ms"] == 200 and test["kraftwerk"]["lose-unsynced"] is True
            return
    raise AssertionError(f"restart-as-leader not caught in {len(codes)} runs: exit codes {codes}")
