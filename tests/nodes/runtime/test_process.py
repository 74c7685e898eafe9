"""Real node processes (``python -m nodes``) on loopback: kill the leader, restart it, stop all."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from checkers.epochs import check_events
from harness.db.nodes import FAST_ELECTIONS
from harness.real.cluster_local import LocalCluster
from nodes.runtime.kvclient import KvClusterClient

from ._support import run

T = TypeVar("T")


def _agree(dumps: dict[str, list[dict[str, Any]]]) -> None:
    seen: dict[int, dict[str, Any]] = {}
    for name, entries in dumps.items():
        assert [e["offset"] for e in entries] == list(range(len(entries))), name
        for entry in entries:
            assert seen.setdefault(entry["offset"], entry) == entry, f"{name} diverges at {entry}"


async def _scenario(cluster: LocalCluster) -> None:
    cluster.start_all()
    leader, epoch = await cluster.wait_leader(15)
    async with KvClusterClient(cluster.addresses(), timeout=5) as kv:
        for i in range(20):
            assert (await kv.write("k", i)).type == "ok"
        assert (await kv.cas("k", 19, "c")).type == "ok"
        assert await kv.read("k") == ("ok", "c", None, leader)

        pid = cluster.kill(leader)
        assert pid is not None and not cluster.alive(leader)  # SIGKILLed and gone
        new_leader, new_epoch = await cluster.wait_leader(15, exclude=[leader], min_epoch=epoch + 1)
        for i in range(20, 40):
            result = await kv.write("k", i)
            assert result.type == "ok", result
        assert kv.last_node == new_leader

        cluster.start(leader)  # same directory and ports
        await cluster.wait_leader(15)
        assert (await kv.write("k", "final")).type == "ok"
        assert (await kv.read("k")).value == "final"
        for _ in range(100):  # no more writes: followers learn the final high watermark
            statuses = await cluster.statuses()
            if len(statuses) == 3 and len({s["committed_end"] for s in statuses.values()}) == 1:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the restarted node did not catch up: {statuses}")
        online = {f"n{n}": await kv.client(n).dump_log() for n in cluster.ids}

    assert cluster.terminate_all(10) == {"stopped": [1, 2, 3], "killed": []}  # all stopped on SIGTERM
    for n in cluster.ids:  # … and said so as they exited, with exit code 0
        assert cluster.output(n).rstrip().splitlines()[-1].endswith("stopped (exit code 0)"), cluster.tail(n)

    offline = {f"n{n}": cluster.offline_dump(n) for n in cluster.ids}
    for name, entries in online.items():
        assert offline[name][: len(entries)] == entries  # the admin API and dump-log agree
    _agree(offline)
    assert min(len(entries) for entries in offline.values()) >= 44  # 43 ops + leader-change records

    result = check_events(cluster.events(), offline)
    assert result["valid"] is True, result
    assert "recovered" in cluster.output(leader) and "log record(s)" in cluster.output(leader)


def _run_and_close(cluster: LocalCluster, scenario: Coroutine[Any, Any, T]) -> T:
    """Run `scenario` against `cluster` (60 s at most), printing each node's output if it fails; close it."""
    try:
        return run(scenario, timeout=60)
    except BaseException:
        for n in cluster.ids:
            print(f"---- n{n} output ----\n{cluster.output(n)[-4000:]}")
        raise
    finally:
        cluster.close()


@pytest.mark.slow
def test_real_processes_kill_and_restart_the_leader(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 3, properties=FAST_ELECTIONS)
    _run_and_close(cluster, _scenario(cluster))
    assert not any(cluster.alive(n) for n in cluster.ids)


ELECTION_TIMEOUT_MS = 1000
SHUTDOWN_BOUND_MS = 5000


async def _sigterm_leader(cluster: LocalCluster) -> dict[str, float]:
    cluster.start_all()
    old, epoch = await cluster.wait_leader(20)
    started = time.monotonic()
    cluster.db.signal(cluster.name(old), signal.SIGTERM)
    new, new_epoch = await cluster.wait_leader(10, exclude=[old], min_epoch=epoch + 1)
    while cluster.alive(old):
        assert time.monotonic() - started < SHUTDOWN_BOUND_MS / 1000, "still running past its shutdown bound"
        await asyncio.sleep(0.01)
    exited = time.monotonic() - started
    assert cluster.output(old).rstrip().splitlines()[-1].endswith("stopped (exit code 0)"), cluster.tail(old)
    events = cluster.events()
    mine = [e for e in events if e["node"] == f"n{old}" and e["type"] == "state"]
    # it stayed until it saw its successor: the shutdown completed, it did not run out its bound
    assert (mine[-1]["role"], mine[-1]["leader"], mine[-1]["epoch"]) == ("follower", f"n{new}", new_epoch), mine
    resigned = next(e["time"] for e in mine if e["role"] == "resigned" and e["epoch"] == epoch)
    elected = next(
        e["time"] for e in events if e["node"] == f"n{new}" and e["type"] == "state" and e["role"] == "leader"
    )
    return {"handoff_ms": (elected - resigned) / 1e6, "exit_s": exited}


@pytest.mark.slow
def test_sigterm_hands_leadership_over_before_the_process_exits(tmp_path: Path) -> None:
    """SIGTERM to the leader: a graceful shutdown (``kraftwerk.shutdown.timeout.ms``) that resigns, waits
    until a successor leads, then exits 0; the hand-off takes far less than an election timeout."""
    properties = {
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
        "kraftwerk.shutdown.timeout.ms": str(SHUTDOWN_BOUND_MS),
    }
    cluster = LocalCluster(tmp_path, 3, properties=properties, broker=False)
    figures = _run_and_close(cluster, _sigterm_leader(cluster))
    print(f"hand-off {figures['handoff_ms']:.1f} ms, exit after {figures['exit_s']:.2f} s")
    assert figures["handoff_ms"] < ELECTION_TIMEOUT_MS / 2
    assert figures["exit_s"] < SHUTDOWN_BOUND_MS / 1000
