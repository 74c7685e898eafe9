"""A fleet of simulated runs: one TestSpec per seed, run in this process or as Spark tasks.

Each run is the same thing everywhere: the simulator runs the spec with its seed, the checkers
check it, and the run (history, events, logs, schedule, verdict) is stored under the store like a
`kraftwerk test` run. On Spark the seeds are spread over partitions; each task runs its seeds one
after the other on the executor's Python and writes into the store, which must be a path every
host sees at the same place (an NFS mount, or the volume `kraftwerk spark up` mounts). The code
reaches the executors as a zip of kraftwerk's packages added with `SparkContext.addPyFile`; their
Python must have kraftwerk's dependencies.

While tasks run, each finished run drops a one-line row into `<store>/.fleet/<batch>/`, which the
driver reads for its progress display (runs done, runs per second, invalid runs so far).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.spec import TestSpec

KEEP = ("all", "invalid")


@dataclass(frozen=True)
class RunRow:
    """What the driver learns of one simulated run."""

    index: int  # in the batch
    seed: int
    valid: bool | str | None
    anomalies: tuple[str, ...]
    observable: tuple[str, ...]
    run_dir: str | None
    sim_seconds: float
    wall_seconds: float
    host: str

    @property
    def invalid(self) -> bool:
        return self.valid is False

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "anomalies": list(self.anomalies), "observable": list(self.observable)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunRow:
        return cls(**{**doc, "anomalies": tuple(doc["anomalies"]), "observable": tuple(doc["observable"])})


def run_one(index: int, spec_doc: dict[str, Any], store: str, keep: str, batch: str) -> RunRow:
    """Simulate and check the spec `spec_doc` (run `index` of a batch); store the run if `keep` says
    so. Runs in any process that has kraftwerk's packages and sees the store."""
    import socket
    import sys

    from harness.sim.runs import simulate, store_run
    from harness.store.runs import new_run

    marks = Path(store) / ".fleet" / batch
    marks.mkdir(parents=True, exist_ok=True)
    mark = marks / f"{index}.json"
    # Spark runs a task again when an attempt fails or its executor is lost, and a lost executor's attempt may
    # still be running beside the new one. Each attempt claims its own run directory; the first to finish
    # publishes its row (a hard link: atomic, and refused if a row is there) and removes what other attempts
    # left; a later one removes its own. So each index is stored exactly once.
    if mark.exists():
        return RunRow.from_json(json.loads(mark.read_text(encoding="utf-8")))
    attempt = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    claim = marks / f"{index}.claim.{attempt}"
    spec = TestSpec.from_json(spec_doc)
    started = time.monotonic()
    checked = simulate(spec)
    run_dir: Path | None = None
    if keep == "all" or checked.valid is False:
        try:
            run_dir = new_run(store, spec.name or f"{spec.workload}-sim")
            claim.write_text(str(run_dir), encoding="utf-8")
            test = {**spec.to_json(), "argv": sys.argv[:1], "fleet-batch": batch}
            store_run(run_dir, checked, test)
        except OSError:
            if not mark.exists():
                raise
            # the attempt that finished first removed this one's run directory as a dead attempt's
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)
            claim.unlink(missing_ok=True)
            return RunRow.from_json(json.loads(mark.read_text(encoding="utf-8")))
    row = RunRow(
        index=index,
        seed=spec.seed,
        valid=checked.valid,
        anomalies=tuple(sorted(checked.anomalies)),
        observable=tuple(sorted(checked.observable)),
        run_dir=str(run_dir) if run_dir is not None else None,
        sim_seconds=spec.time_limit,
        wall_seconds=time.monotonic() - started,
        host=socket.gethostname(),
    )
    tmp = marks / f".{index}.{attempt}.tmp"
    tmp.write_text(json.dumps(row.to_json()), encoding="utf-8")
    try:
        os.link(tmp, mark)
    except FileExistsError:  # another attempt of this task finished first: its run is the one kept
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
        tmp.unlink()
        claim.unlink(missing_ok=True)
        return RunRow.from_json(json.loads(mark.read_text(encoding="utf-8")))
    tmp.unlink()
    for other in marks.glob(f"{index}.claim*"):  # attempts that died after making their run directory
        if other != claim:
            with contextlib.suppress(OSError):
                shutil.rmtree(other.read_text(encoding="utf-8"), ignore_errors=True)
                other.unlink()
    claim.unlink(missing_ok=True)
    return row


def _run_partition(store: str, keep: str, batch: str, items: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[str]:
    for index, spec_doc in items:
        yield json.dumps(run_one(index, spec_doc, store, keep, batch).to_json())


def finished_rows(store: str, batch: str) -> list[RunRow]:
    """The rows the runs of `batch` have dropped so far."""
    marks = Path(store) / ".fleet" / batch
    rows = []
    for file in marks.glob("*.json") if marks.is_dir() else ():
        try:
            rows.append(RunRow.from_json(json.loads(file.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError, KeyError):
            continue  # being written
    return rows


Progress = Callable[[list[RunRow]], None]


def run_fleet(
    specs: list[TestSpec],
    store: str,
    *,
    master: str | None = None,
    keep: str = "all",
    progress: Progress | None = None,
    partitions: int | None = None,
) -> list[RunRow]:
    """Run each simulated spec once: in this process without `master`, else as Spark tasks on it.
    The rows come back in the order of `specs`."""
    if keep not in KEEP:
        raise ValueError(f"keep must be one of {', '.join(KEEP)}")
    if any(spec.backend != "sim" for spec in specs):
        raise ValueError("a fleet runs simulated specs only (backend sim)")
    store = str(Path(store).resolve())
    Path(store).mkdir(parents=True, exist_ok=True)
    batch = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    items = [(i, spec.to_json()) for i, spec in enumerate(specs)]
    try:
        if master is None:
            rows = []
            for index, doc in items:
                rows.append(run_one(index, doc, store, keep, batch))
                if progress is not None:
                    progress(rows)
            return rows
        rows = _run_spark(items, store, keep, batch, master, progress, partitions)
        return sorted(rows, key=lambda r: r.index)
    finally:
        shutil.rmtree(Path(store) / ".fleet" / batch, ignore_errors=True)
        with contextlib.suppress(OSError):
            (Path(store) / ".fleet").rmdir()


def _run_spark(
    items: list[tuple[int, dict[str, Any]]],
    store: str,
    keep: str,
    batch: str,
    master: str,
    progress: Progress | None,
    partitions: int | None,
) -> list[RunRow]:
    import threading
    from functools import partial

    from checkers.pipeline.job import session_running, spark_session

    shared = session_running()  # a session already running in this process is used, and left running
    spark = spark_session(master, app="kraftwerk-fleet")
    try:
        sc = spark.sparkContext
        slots = max(1, sc.defaultParallelism)
        # a few seeds per task: small enough to balance, large enough to amortise a task's start
        count = partitions or max(1, min(len(items), slots * 4))
        rdd = sc.parallelize(items, count)
        done = threading.Event()
        watcher = None
        if progress is not None:

            def watch() -> None:
                while not done.wait(0.5):
                    progress(finished_rows(store, batch))

            watcher = threading.Thread(target=watch, name="fleet-progress", daemon=True)
            watcher.start()
        try:
            lines = rdd.mapPartitions(partial(_run_partition, store, keep, batch)).collect()
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        rows = [RunRow.from_json(json.loads(line)) for line in lines]
        if progress is not None:
            progress(rows)
        return rows
    finally:
        if not shared:
            spark.stop()
