"""`kraftwerk test --backend local`: node processes on 127.0.0.x; partitions as per-address iptables rules (root)."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
from pathlib import Path

import pytest

from harness.db.nodes import NodeDB
from harness.nemesis import partitions
from harness.real.backends.local import LocalBackend, LocalPartitionNemesis, chain_name
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import need_faketime
from tests.requirements import need

pytestmark = [pytest.mark.slow]


def test_register_chaos_on_local_is_valid_and_leaves_nothing(tmp_path: Path) -> None:
    need_faketime()
    nemesis = "partition,kill,pause,clock" if os.geteuid() == 0 else "kill,pause"  # the clock nemesis cuts links too
    r = realtest.kraftwerk_test(
        tmp_path, "--backend", "local", "--nemesis", nemesis, "--time-limit", "15", "--seed", "3"
    )
    run = realtest.latest(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert realtest.results(run)["valid"] is True
    realtest.check_run_layout(run, 5)
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []


def test_loopback_partition_isolates_the_leader(tmp_path: Path) -> None:
    """Nodes send from their own 127.0.0.x, so `-s a -d b` rules cut exactly the links of a grudge."""
    need("root", "iptables")  # partitions on the local backend
    backend = LocalBackend(base_dir=tmp_path / "local")
    with backend:
        hosts = backend.create(3)
        db = NodeDB(hosts, ports=backend.ports, listen_any=False, env=LocalBackend.node_env)
        part = LocalPartitionNemesis(hosts, backend.cluster_id)
        db.install()
        with part, db:
            leader, _ = asyncio.run(db.wait_ready(30))
            _, epoch = NodeDB.leader_of(asyncio.run(db.describe_all()))
            grudge = part.start(partitions.make("leader", [h.name for h in hosts], random.Random(0), leader))
            assert sorted(grudge[leader]) == sorted(h.name for h in hosts if h.name != leader)
            assert len(part.rules(leader)) == 2
            # the other two elect a new leader in a later epoch; the client (127.0.0.1) still reaches everyone
            majority = [h.name for h in hosts if h.name != leader]

            async def new_leader() -> tuple[str | None, int]:
                for _ in range(150):
                    statuses = await db.describe_all()
                    assert all(statuses.values()), "a partition between nodes must not cut the harness off"
                    lead, e = NodeDB.leader_of({n: statuses[n] for n in majority})
                    if lead is not None and e > epoch:
                        return lead, e
                    await asyncio.sleep(0.1)
                raise AssertionError("no new leader behind the partition")

            new, new_epoch = asyncio.run(new_leader())
            assert new in majority and new_epoch > epoch
            part.heal()
            assert part.rules(leader) == []
            healed, _ = asyncio.run(db.wait_ready(30))
            assert healed in [h.name for h in hosts]
        assert chain_name(backend.cluster_id) not in realtest.leftovers(backend.cluster_id)
    assert realtest.leftovers(backend.cluster_id) == []


def test_local_partition_needs_root_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cli import build_parser
    from harness.commands.test import problem as _validate

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args = build_parser().parse_args(["test", "--backend", "local", "--store", str(tmp_path)])
    problem = _validate(args) or ""
    assert "partitions on the local backend need root" in problem
    args = build_parser().parse_args(["test", "--backend", "local", "--nemesis", "kill,pause"])
    assert _validate(args) is None
    args = build_parser().parse_args(["test", "--backend", "local", "--nemesis", "kill,pause,clock"])
    assert "--nemesis clock (it cuts the leader off)" in (_validate(args) or "")


def test_local_packet_faults_shape_node_links_by_source_address(tmp_path: Path) -> None:
    """Local nodes share lo: as root, one chain matches each link by its source address and one NFQUEUE shaper
    delays, duplicates and reorders (`harness.real.faults.nfqueue`); without root the option is refused. What
    the faults did is checked, not the final reads: no settle before them (the chaos test above keeps 10 s)."""
    args = ("--backend", "local", "--nemesis", "packet", "--nodes", "3", "--interval", "3", "--seed", "1698")
    args += ("--settle", "0")
    r = realtest.kraftwerk_test(tmp_path, *args, "--time-limit", "15")
    if os.geteuid() != 0:
        assert r.returncode == 254
        assert "--backend local --nemesis packet" in r.stderr and "root" in r.stderr
        return
    run = realtest.latest(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ops = [o for o in realtest.history_lines(run) if o["process"] == "nemesis"]
    stops = [o["value"] for o in ops if o["f"] == "stop-packet"]
    starts = [o["value"] for o in ops if o["f"] == "start-packet"]
    assert [s["method"] for s in starts] == ["nfqueue", "iptables", "nfqueue"]  # delay; loss; duplicate+reorder
    assert sum(c["delayed"] for c in stops[0].values()) > 0 and sum(c["lost"] for c in stops[1].values()) > 0
    assert all(sum(c[k] for c in stops[2].values()) > 0 for k in ("duplicated", "reordered"))
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []
    assert (
        f"{chain_name(cluster)}-P"
        not in subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout
    )
