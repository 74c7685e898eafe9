"""`kraftwerk test --backend docker --nemesis packet`: loss, delay, duplication and reordering land on real nodes.

This machine's kernel has no sch_netem, so the containers (which share it) get the NFQUEUE shaper and
iptables `statistic` loss (`harness.real.faults.nfqueue`); a kernel with netem gets tc netem. Seed 1698's
schedule (3 nodes, 20 s, a fault every ~3 s) turns on every one of the four behaviours, on enough traffic
that each must strike: the stop-packet ops record, per sending node, what each fault did. The register
and queue workloads stay valid, and nothing of the faults (rules, queues, shapers) is left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.nemesis.schedule import generate
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SEED = 1698
STRIKES = {"delay": "delayed", "loss": "lost", "duplicate": "duplicated", "reorder": "reordered"}


@pytest.mark.parametrize("workload", ["register", "queue"])
def test_packet_faults_land_on_docker_nodes_and_the_run_stays_valid(
    node_image: str,  # noqa: F811
    tmp_path: Path,
    workload: str,
) -> None:
    schedule = generate(SEED, ["n1", "n2", "n3"], ["packet"], 20.0, 3.0)
    asked = {b for e in schedule if e["f"] == "start-packet" for b in e["value"]["behaviours"]}
    assert asked == set(STRIKES)  # the seed still draws all four
    r = realtest.kraftwerk_test(
        tmp_path,
        *("--backend", "docker", "--workload", workload, "--nemesis", "packet", "--nodes", "3"),
        *("--time-limit", "20", "--interval", "3", "--seed", str(SEED)),
    )
    run = realtest.latest(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert realtest.results(run)["valid"] is True
    ops = [o for o in realtest.history_lines(run) if o["process"] == "nemesis"]
    assert {o["f"] for o in ops} == {"start-packet", "stop-packet"} and ops[-1]["f"] == "stop-packet"
    # each fault and the stop after it (the heal's, when the time limit came first; a heal with nothing in force: {})
    pairs = [(a["value"], b["value"]) for a, b in zip(ops, ops[1:], strict=False) if a["f"] == "start-packet"]
    assert len(pairs) >= 3 and all(b["value"] == {} for a, b in zip(ops, ops[1:], strict=False) if a["f"] == b["f"])
    assert {start["method"] for start, _ in pairs} <= {"netem", "nfqueue", "iptables"}
    struck = dict.fromkeys(STRIKES.values(), 0)
    for i, (start, stop) in enumerate(pairs):
        assert set(stop) == set(start["nodes"])  # counted on each shaped node
        assert i >= 3 or sum(c["packets"] for c in stop.values()) > 0  # the 4th may meet the time limit at once
        for counts in stop.values():
            for k in struck:
                struck[k] += counts.get(k, 0)
    starts = [o for o in ops if o["f"] == "start-packet"]
    if starts[0]["value"]["method"] != "netem":  # netem counts packets and drops only
        assert all(v > 0 for v in struck.values()), struck
    else:
        assert struck["lost"] > 0
    _, cluster = realtest.cluster_of(run)
    assert realtest.leftovers(cluster) == []
