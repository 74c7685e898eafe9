"""The clock nemesis on a docker cluster really moves the nodes' wall clocks, and only those.

The node processes run under libfaketime with monotonic time left alone, so a bump of an hour
shows in what the node process itself reads from time.time() (the `time` of the events it writes
to events.jsonl, and a probe under the same environment) while, with `clock.source=monotonic`, its
election timers keep the same leader in the same epoch. With `clock.source=wall` (the default, as
Kafka's Time.milliseconds()) the same faults move the timers: a clock-only run sees elections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from pathlib import Path

import pytest

from harness.db.nodes import NodeDB
from harness.real.backends.docker import DockerBackend
from harness.real.nemesis import RunnerNemesis, parallel
from nodes.runtime.kvclient import KvClusterClient
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOUR_MS = 3_600_000


def _last_event_time(db: NodeDB, name: str) -> int | None:
    """The wall-clock time (ns) the node process put on its newest event."""
    host = db.by_name[name]
    lines = host.control.get_file(f"{db.data_dir(host)}/events.jsonl").decode().splitlines()
    times = [json.loads(line)["time"] for line in lines if line.strip()]
    return times[-1] if times else None


async def _load(db: NodeDB, seconds: float) -> list[tuple[str | None, int]]:
    """Writes for `seconds`, sampling (leader, epoch) as DescribeQuorum shows it every 0.25 s."""
    endpoints = {int(n[1:]): ep for n, ep in db.endpoints().items()}
    samples: list[tuple[str | None, int]] = []
    async with KvClusterClient(endpoints, timeout=3) as kv:
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            assert (await kv.write("clock", i)).type == "ok"
            i += 1
            if i % 5 == 0:
                samples.append(NodeDB.leader_of(await db.describe_all(timeout=2)))
            await asyncio.sleep(0.05)
    return samples


def test_clock_bump_moves_node_wall_clocks_but_not_the_leader(
    node_image: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend = DockerBackend(image=node_image)
    with backend:
        created = time.monotonic()
        hosts = backend.create(5)
        db = NodeDB(hosts, seed=11, properties={"clock.source": "monotonic"})
        nemesis = RunnerNemesis(hosts, db.spec, ["clock", "kill"], leader=db.leader, rng=random.Random(1))
        db.env = nemesis.clock_env
        with contextlib.ExitStack() as stack:
            stack.callback(nemesis.teardown)
            parallel(nemesis.setup, db.install)
            with db:
                leader, election = asyncio.run(db.wait_ready(30))
                ready = time.monotonic() - created
                with capsys.disabled():
                    print(f"\ndocker 5-node cluster ready in {ready:.1f}s (election {election:.1f}s after start)")
                assert ready <= 15.0
                _, epoch = NodeDB.leader_of(asyncio.run(db.describe_all()))
                follower = next(h.name for h in hosts if h.name != leader)
                untouched = [h.name for h in hosts if h.name not in (leader, follower)]

                applied = nemesis.invoke(
                    {
                        "f": "bump-clock",
                        "value": {leader: {"delta-ms": HOUR_MS}, follower: {"delta-ms": -HOUR_MS // 2}},
                    }
                )
                assert applied[leader]["offset-ms"] == HOUR_MS
                samples = asyncio.run(_load(db, 6.0))
                # the election timers did not notice: same leader, same epoch, all along
                assert samples and set(samples) == {(leader, epoch)}, samples

                # inside the node processes: the events they wrote during the load carry skewed wall time
                now = time.time_ns()
                skew = {n: (_last_event_time(db, n) or 0) - now for n in (leader, follower, *untouched)}
                assert abs(skew[leader] / 1e9 - 3600) < 30, skew
                assert abs(skew[follower] / 1e9 + 1800) < 30, skew
                assert all(abs(skew[n] / 1e9) < 30 for n in untouched), skew
                # a probe under the same environment sees the same offsets
                offsets = nemesis.clock.check_offsets()
                assert abs(offsets[leader] - HOUR_MS) < 2000 and abs(offsets[follower] + HOUR_MS / 2) < 2000
                assert all(abs(offsets[n]) < 2000 for n in untouched), offsets

                # a node restarted by the kill nemesis comes back under the same (skewed) clock
                nemesis.invoke({"f": "kill", "value": [follower]})
                nemesis.invoke({"f": "start", "value": None})
                asyncio.run(db.wait_ready(30))
                assert abs(nemesis.clock.check_offsets()[follower] + HOUR_MS / 2) < 2000

                assert sorted(nemesis.invoke({"f": "reset-clock", "value": None})) == sorted([leader, follower])
                assert all(abs(v) < 2000 for v in nemesis.clock.check_offsets().values())
        cluster = backend.cluster_id
    assert realtest.leftovers(cluster) == []


def test_clock_only_run_on_wall_timers_sees_elections_and_stays_valid(tmp_path: Path) -> None:
    """`kraftwerk test --nemesis clock` on docker, clock.source=wall (the default): clock bumps fire the nodes'
    timers (elections after the first, in events.jsonl), and the history stays linearizable."""
    r = realtest.kraftwerk_test(
        tmp_path, "--backend", "docker", "--nemesis", "clock", "--time-limit", "30", "--seed", "2", "-q"
    )
    assert r.returncode == 0, r.stderr[-3000:]
    run = realtest.latest(tmp_path)
    test = json.loads((run / "test.json").read_text())
    assert test["kraftwerk"]["clock-source"] == "wall" and test["nemesis"] == ["clock"]
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line.strip()]
    leaders = {e["epoch"] for e in events if e["type"] == "state" and e["role"] == "leader"}
    assert len(leaders) >= 2, leaders  # the only faults were clock faults
    assert realtest.results(run)["valid"] is True
