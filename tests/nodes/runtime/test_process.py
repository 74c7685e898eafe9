"""Real node processes (``python -m nodes``) on loopback: kill the leader, restart it, stop all."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from checkers.epochs import check_events
from nodes.runtime.kvclient import KvClusterClient

from ._procs import ProcCluster
from ._support import run


def _agree(dumps: dict[str, list[dict[str, Any]]]) -> None:
    seen: dict[int, dict[str, Any]] = {}
    for name, entries in dumps.items():
        assert [e["offset"] for e in entries] == list(range(len(entries))), name
        for entry in entries:
            assert seen.setdefault(entry["offset"], entry) == entry, f"{name} diverges at {entry}"


async def _scenario(cluster: ProcCluster) -> None:
    cluster.start_all()
    leader, epoch = await cluster.wait_leader(15)
    async with KvClusterClient(cluster.addresses(), timeout=5) as kv:
        for i in range(20):
            assert (await kv.write("k", i)).type == "ok"
        assert (await kv.cas("k", 19, "c")).type == "ok"
        assert await kv.read("k") == ("ok", "c", None, leader)

        assert cluster.kill(leader) == -signal.SIGKILL
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
        online = {f"n{n}": await kv.client(n).dump_log() for n in cluster.nodes}

    codes = cluster.terminate_all(10)
    assert codes == {1: 0, 2: 0, 3: 0}, codes

    offline = {f"n{n}": cluster.offline_dump(n) for n in cluster.nodes}
    for name, entries in online.items():
        assert offline[name][: len(entries)] == entries  # the admin API and dump-log agree
    _agree(offline)
    assert min(len(entries) for entries in offline.values()) >= 44  # 43 ops + leader-change records

    result = check_events(cluster.events(), offline)
    assert result["valid"] is True, result
    assert "recovered" in cluster.stderr_text(leader) and "log record(s)" in cluster.stderr_text(leader)


@pytest.mark.slow
def test_real_processes_kill_and_restart_the_leader(tmp_path: Path) -> None:
    cluster = ProcCluster(tmp_path)
    try:
        run(_scenario(cluster), timeout=60)
    except BaseException:
        for n in cluster.nodes:
            print(f"---- n{n} stderr ----\n{cluster.stderr_text(n)[-4000:]}")
        raise
    finally:
        cluster.cleanup()
    assert not any(node.alive for node in cluster.nodes.values())
