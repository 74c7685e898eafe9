"""Leader leases on a docker cluster under libfaketime: the seeded bug `lease-wall-clock` serves a stale read that
the linearizability checker catches when the clock nemesis steps the old leader's wall clock back, and not when
no clock fault runs; leases on the monotonic clock (the real thing) serve none under the same clock fault.

One scenario, three ways: write 1 through the leader; cut it off from the other nodes (not from the clients);
(the clock fault: step its wall clock back 20 s at once); write 2 through the leader the others elect; read at the
old leader. The history goes to the same checker as a run's."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from pathlib import Path
from typing import Any

import pytest

from checkers.history import from_dicts
from checkers.linearizable import check
from harness.db.nodes import NodeDB
from harness.real.backends.docker import DockerBackend
from harness.real.nemesis import RunnerNemesis, parallel
from nodes.runtime.kvclient import KvClient
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class History:
    """A tiny recorder: one client process per operation, times on this host's monotonic clock."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.t0 = time.monotonic_ns()
        self.process = 0

    async def run(self, endpoint: tuple[str, int], f: str, value: Any = None) -> Any:
        self.process += 1
        p = self.process
        self._add(p, "invoke", f, value)
        async with KvClient(*endpoint, timeout=2.0) as kv:
            try:
                r = await (kv.read("k") if f == "read" else kv.write("k", value))
            except Exception:  # noqa: BLE001 - no answer: it may have happened
                self._add(p, "info", f, value)
                return None
        self._add(p, r.type, f, r.value if f == "read" and r.type == "ok" else value)
        return r

    def _add(self, process: int, type_: str, f: str, value: Any) -> None:
        op = {"index": len(self.ops), "time": time.monotonic_ns() - self.t0, "process": process, "type": type_}
        self.ops.append({**op, "f": f, "key": "k", "value": value})


async def _new_leader(db: NodeDB, others: list[str], old_epoch: int, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = await db.describe_all(timeout=1.0)
        leader, epoch = NodeDB.leader_of({n: statuses[n] for n in others})
        if leader in others and epoch > old_epoch:
            return leader
        await asyncio.sleep(0.1)
    raise AssertionError("the majority side elected no leader")


def scenario(image: str, bugs: list[str], step_back_ms: int) -> tuple[dict[str, Any], Any]:
    """Run the scenario on a fresh 3-node cluster; (the checker's verdict, the old leader's answer to the read)."""
    backend = DockerBackend(cluster_id=f"clock{random.randrange(10**6):06d}", image=image)
    with backend:
        hosts = backend.create(3)
        db = NodeDB(hosts, bugs=bugs, seed=3, properties={"kraftwerk.lease.reads": "true"})
        nemesis = RunnerNemesis(
            hosts,
            db.spec,
            ["clock", "partition"],
            leader=db.leader,
            rng=random.Random(1),
            partition=backend.partition_nemesis(hosts),
        )
        db.env = lambda h: {**nemesis.clock_env(h), **backend.node_env(h)}
        with contextlib.ExitStack() as stack:
            stack.callback(nemesis.teardown)
            parallel(nemesis.setup, db.install)
            with db:
                old, _ = asyncio.run(db.wait_ready(30))
                _, epoch = NodeDB.leader_of(asyncio.run(db.describe_all()))
                others = [h.name for h in hosts if h.name != old]
                ends = db.endpoints()
                history = History()
                assert asyncio.run(history.run(ends[old], "write", 1)).type == "ok"
                time.sleep(0.3)  # a few fetch rounds: the lease stands on answers that carry the write
                grudge = {old: others, **{n: [old] for n in others}}
                nemesis.invoke({"f": "start-partition", "value": {"grudge": grudge}})
                if step_back_ms:  # at once, while the lease from before the cut still holds
                    nemesis.invoke({"f": "bump-clock", "value": {old: {"delta-ms": -step_back_ms}}})
                new = asyncio.run(_new_leader(db, others, epoch))
                assert asyncio.run(history.run(ends[new], "write", 2)).type == "ok"
                answer = asyncio.run(history.run(ends[old], "read"))
                nemesis.invoke({"f": "stop-partition", "value": None})
        cluster = backend.cluster_id
    assert realtest.leftovers(cluster) == []
    return check(from_dicts(history.ops), "cas-register", time_limit=30), answer


def test_lease_wall_clock_serves_a_stale_read_when_the_clock_steps_back(node_image: str) -> None:  # noqa: F811
    verdict, answer = scenario(node_image, ["lease-wall-clock"], 20_000)
    assert answer is not None and (answer.type, answer.value) == ("ok", 1)
    assert verdict["valid"] is False


def test_lease_wall_clock_without_a_clock_fault_serves_no_stale_read(node_image: str) -> None:  # noqa: F811
    verdict, answer = scenario(node_image, ["lease-wall-clock"], 0)
    assert answer is None or answer.type != "ok" or answer.value == 2
    assert verdict["valid"] is True


def test_monotonic_leases_serve_no_stale_read_when_the_clock_steps_back(node_image: str) -> None:  # noqa: F811
    verdict, answer = scenario(node_image, [], 20_000)
    assert answer is None or answer.type != "ok" or answer.value == 2
    assert verdict["valid"] is True


def test_the_clock_nemesis_catches_lease_wall_clock_within_three_docker_runs(tmp_path: Path) -> None:
    """`kraftwerk test --backend docker --bug lease-wall-clock --nemesis clock`, the nemesis's own schedules (half
    its faults cut the leader off and step its wall clock back): a stale read within 3 runs; the caught seed without
    the clock nemesis (partitions, kills, pauses) stays valid."""
    common = ("--backend", "docker", "--bug", "lease-wall-clock", "--time-limit", "30", "-q")
    for seed in ("1", "2", "3"):
        store = tmp_path / f"clock-{seed}"
        r = realtest.kraftwerk_test(store, *common, "--nemesis", "clock", "--seed", seed)
        verdict = realtest.results(realtest.latest(store))
        if verdict["valid"] is False:
            break
    assert verdict["valid"] is False, r.stderr[-3000:]
    assert "nonlinearizable" in verdict["anomaly-types"]
    store = tmp_path / "no-clock"
    r = realtest.kraftwerk_test(store, *common, "--nemesis", "partition,kill,pause", "--seed", seed)
    assert r.returncode == 0 and realtest.results(realtest.latest(store))["valid"] is True, r.stderr[-3000:]
