"""Real node processes (``python -m nodes``) on loopback: kill the leader, restart it, stop all."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from checkers.epochs import check_events
from harness.db.nodes import FAST_ELECTIONS
from harness.real.cluster_local import LocalCluster
from nodes.runtime.kvclient import KvClusterClient

from ._support import run


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


@pytest.mark.slow
def test_real_processes_kill_and_restart_the_leader(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 3, properties=FAST_ELECTIONS)
    try:
        run(_scenario(cluster), timeout=60)
    except BaseException:
        for n in cluster.ids:
            print(f"---- n{n} output ----\n{cluster.output(n)[-4000:]}")
        raise
    finally:
        cluster.close()
    assert not any(cluster.alive(n) for n in cluster.ids)
