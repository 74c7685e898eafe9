"""The DB contract: every registered DB that runs on `--backend local` here goes through one life cycle.

Built by its registry entry (harness.db.registry) on three local hosts with the ports it asks for: setup,
start (`with db:`), wait_ready, leader, kill a member, restart it, wait_serving, a few register operations
through its own transport, collect, and the epochs checker on the collected events (valid; one leader per
epoch). A new DB is covered by its registry line; one that cannot run here (its `why_not`) is skipped, or
under CI=true fails (tests/requirements.py).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from checkers.epochs import check_events
from harness.db import registry as dbs
from harness.db.protocol import DB
from harness.real.backends.local import LocalBackend
from tests.requirements import lacking
from workloads.protocol import Failure, Reply, Request
from workloads.register import KvRequest, Register

pytestmark = [pytest.mark.slow]


def _kind(name: str) -> dbs.DBKind:
    kind = dbs.kind(name)
    if "local" not in kind.backends:
        pytest.skip(f"--db {name} does not run on --backend local")
    why = kind.why_not("local", ("kill",))
    if why:
        lacking(f"--db {name} on --backend local", why)  # skipped here, a failure under CI=true
    if "kv" not in kind.apis:
        pytest.skip(f"--db {name} serves no register (kv) API: the contract's operations are register ones")
    return kind


async def _operations(db: DB, seed: int) -> list[tuple[str, Any, str, Any]]:
    """write 1, read, cas 1→2, read, cas 1→3 on key "c", each sent to the leader (again if it moved): the
    (f, value, type, value read) of each."""
    connection = db.transport(seed)()
    done = []
    try:
        for f, value in [("write", 1), ("read", None), ("cas", [1, 2]), ("read", None), ("cas", [1, 3])]:
            for _ in range(50):
                leader = await db.leader()
                if leader is None:
                    await asyncio.sleep(0.2)
                    continue
                answer = await connection.call(Request(leader, KvRequest(f, "c", value), 5.0))
                if isinstance(answer, Failure) and not answer.sent:
                    await asyncio.sleep(0.2)
                    continue
                assert isinstance(answer, Reply), f"{f} {value}: {answer}"
                if answer.body.type == "fail" and answer.body.error == "not-leader":
                    await asyncio.sleep(0.2)
                    continue
                done.append((f, value, answer.body.type, answer.body.value))
                break
            else:
                raise AssertionError(f"{f} {value}: no leader answered")
    finally:
        await connection.close()
    return done


@pytest.mark.parametrize("name", dbs.names())
def test_db_life_cycle_on_local(name: str, tmp_path: Path) -> None:
    kind = _kind(name)
    backend = LocalBackend(base_dir=tmp_path / "local")
    with backend:
        hosts = backend.create(3, ports_per_host=kind.ports)
        names = [h.name for h in hosts]
        ports = [p for h in hosts for p in backend.ports[h.name]]
        assert all(len(backend.ports[n]) == kind.ports for n in names) and len(set(ports)) == len(ports)
        context = dbs.DBContext(
            hosts=hosts,
            ports=backend.ports,
            listen_any=backend.listen_any,
            seed=1,
            bugs=(),
            workload=Register(names, 1),
            options=kind.options(),
            nemeses=("kill",),
            cluster_id=backend.cluster_id,
        )
        db = kind.factory(context)
        assert isinstance(db, DB)
        db.env = backend.node_env  # as the runner does, less the clock nemesis's environment
        db.setup()
        with db:
            leader, _ = asyncio.run(db.wait_ready(60))
            assert leader in names and asyncio.run(db.leader()) in names
            assert asyncio.run(db.partition_leader()) in names
            victim = next(n for n in names if n != leader)
            assert db.kill(victim) is not None
            assert db.running() == {n: n != victim for n in names}
            assert db.start(victim) is not None
            assert asyncio.run(db.wait_serving([victim], 30.0)), f"{victim} does not serve again after its restart"
            asyncio.run(db.wait_ready(60))
            done = asyncio.run(_operations(db, 1))
            events, logs, notes = db.collect(tmp_path / "run")
        assert not any(db.running().values())
    assert [(f, t) for f, _, t, _ in done] == [
        ("write", "ok"),
        ("read", "ok"),
        ("cas", "ok"),
        ("read", "ok"),
        ("cas", "fail"),
    ]
    assert done[1][3] == 1 and done[3][3] == 2
    assert notes["fatal"] == {} and notes["missing"] == [], notes
    for h in hosts:
        for local in db.log_files(h).values():
            assert (tmp_path / "run" / "nodes" / h.name / local).exists()
    assert set(logs) <= set(names)

    result = check_events(events, logs)
    assert result["valid"] is True, result
    leaders: dict[int, set[str]] = defaultdict(set)
    for e in events:
        if e.get("type") == "state" and e.get("role") == "leader":
            leaders[e["epoch"]].add(e["node"])
    assert leaders and all(len(nodes) == 1 for nodes in leaders.values()), dict(leaders)
    assert {e["node"] for e in events} == set(names)
