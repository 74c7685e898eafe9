"""One test, two runtimes: the same seed gives the same operations to the same processes in the simulator
and on a real cluster, up to the first fault (the shared workload, generators and interpreter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.history import Op
from harness.core.spec import TestSpec
from harness.real.run import run_real
from harness.sim.runtime import SimRuntime

SEED, NODES, CONCURRENCY, SECONDS = 5, 3, 4, 4.0
# a few operations per second: every thread is free when drawn on both runtimes, however long an operation takes
RATE = 5.0
QUEUE = {"acks": "all", "partitions": 3, "replication_factor": 3, "min_isr": 2, "unclean": False}


def before_first_fault(ops: list[Op]) -> list[tuple[Any, ...]]:
    out = []
    for op in ops:
        if op.process == "nemesis":
            break
        if op.type == "invoke":
            out.append((op.f, op.key, op.value, op.process))
    return out


def the_test(workload: str, backend: str, db: str = "kraftwerk", **options: Any) -> TestSpec:
    """The one test both runtimes run (only its backend, and the system under test, differ). No faults, and
    only the main phase's operations are compared: no settle before the final reads."""
    fixed = {"nemeses": (), "nodes": NODES, "concurrency": CONCURRENCY, "time_limit": SECONDS, "seed": SEED}
    fixed["settle"] = 0.0
    return TestSpec.of(
        db=db,
        workload=workload,
        backend=backend,
        check_time_limit=60,
        **{**fixed, "rate": RATE, **(QUEUE if workload == "queue" else {}), **options},
    )


def simulated(spec: TestSpec) -> list[tuple[Any, ...]]:
    return before_first_fault(SimRuntime(spec).run().recorder.ops)


def real(spec: TestSpec, run_dir: Path) -> list[tuple[Any, ...]]:
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)  # as `kraftwerk test` lays out a run
    results, history = run_real(spec, run_dir, quiet=True)
    # a short run without faults: no anomaly (the stats may say some operation never succeeded in its 2 s)
    assert results["valid"] is not False and not results.get("anomaly-types"), results
    main = json.loads((run_dir / "schedule.json").read_text())["ops"]  # the main phase's ops (no final reads)
    return before_first_fault(history.ops)[: len(main)]


def same_ops(backend: str, tmp_path: Path, workload: str = "register", db: str = "kraftwerk", **options: Any) -> None:
    sim = simulated(the_test(workload, "sim", **options))
    on_cluster = real(the_test(workload, backend, db, **options), tmp_path)
    assert len(sim) >= 10 and len({p for *_, p in sim}) > 1  # enough operations, on more than one process
    n = min(len(sim), len(on_cluster))
    assert abs(len(sim) - len(on_cluster)) <= 1  # an op due right at the time limit may fall either side
    assert on_cluster[:n] == sim[:n]


def test_the_same_seed_gives_the_same_ops_in_the_simulator_and_on_local(tmp_path: Path) -> None:
    same_ops("local", tmp_path)


def test_the_same_seed_gives_the_same_queue_ops_in_the_simulator_and_on_local(tmp_path: Path) -> None:
    same_ops("local", tmp_path, "queue")


def test_the_same_seed_gives_the_same_transactions_in_the_simulator_and_on_local(tmp_path: Path) -> None:
    """--txn: the same transactions (micro-ops, keys, values) to the same processes on both runtimes."""
    # a transaction takes several round trips (and backs off while the coordinator ends the last one):
    # fewer ops a second keep every thread free when the next op is drawn, on both runtimes
    same_ops("local", tmp_path, "queue", txn=True, rate=2.0, time_limit=8.0)


@pytest.mark.needs("etcd")
def test_the_same_seed_gives_etcd_the_same_ops_as_the_simulator(tmp_path: Path) -> None:
    """The register workload is written once: etcd (another system, another client protocol) gets the
    very operations our nodes get in the simulator."""
    same_ops("local", tmp_path, db="etcd")


@pytest.mark.slow
@pytest.mark.docker
def test_the_same_seed_gives_the_same_ops_in_the_simulator_and_on_docker(tmp_path: Path) -> None:
    same_ops("docker", tmp_path)
