"""The analyze job: store → partitioned Parquet → checks on the executors → roll-ups.

One Spark session per job. Steps:

1. find runs on the driver (`discover`), skip those in the manifest (`OUT/manifest.json`);
2. one Spark job over chunks of the new runs (`batch.process_chunk`, a few hundred runs per task at most):
   each task reads every run's history.jsonl, events.jsonl and logs/*.jsonl once, in Python, validates it
   and checks it in the same pass — every (run, key) with `checkers.linearizable` within its time limit (a
   queue run is one group, checked by `checkers.queue`), its events with `checkers.epochs`, the rest of its
   verdict (stats, partition logs, the simulator's invariants) as its test composed it — and writes the
   big tables `OUT/tables/{ops,events,logs,latencies}` (Parquet, partitioned by date and workload) itself;
3. the driver gets the small check rows back and writes the per-run verdicts, the check tables, the run
   metadata (`OUT/tables/runs`) and an `errors` table for malformed runs (which never abort the job);
4. commit the batch to the manifest, stop the session, then compute the roll-ups over every committed
   batch into `OUT/rollups/` on the driver (`rollups`, pyarrow: aggregated rows, no Spark job).

Rows of a batch that never committed (a job that died half way) are ignored by every reader.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.pipeline.discover import Resolve, RunInfo, discover

MANIFEST = "manifest.json"


@dataclass
class AnalyzeResult:
    """What a job did, and the roll-ups (small: lists of dicts) for the report."""

    batch: str
    out: str
    found: int
    skipped: int
    analysed: int
    errors: int
    seconds: float
    ops: int = 0
    rollups: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


# -- session ---------------------------------------------------------------------------------------


def log4j_properties(level: str) -> str:
    """Spark's log4j2 configuration: `level` and above, one line each, to stderr."""
    return f"""\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
"""


# the driver's: errors only; and the shell level, without which Spark announces that it sets WARN
_LOG4J = log4j_properties("error") + "logger.repl.name = org.apache.spark.repl.Main\nlogger.repl.level = error\n"


def _quiet_log4j() -> str:
    """A log4j2 configuration that keeps Spark to errors only (written once per machine)."""
    path = Path(tempfile.gettempdir()) / f"kraftwerk-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(_LOG4J, encoding="utf-8")
        os.replace(tmp, path)
    return str(path)


_LOOPBACK_SET_HERE = False  # SPARK_LOCAL_IP=127.0.0.1 was set by a local session here, not by the user
_USER_PYSPARK_PYTHON = os.environ.get("PYSPARK_PYTHON")  # the user's choice, before any session here set it


def driver_address(master: str) -> str:
    """The address the executors reach this driver at: 127.0.0.1 for local masters; for
    spark://HOST:PORT, the local address of the route to HOST (a non-loopback SPARK_LOCAL_IP overrides)."""
    if not master.startswith("spark://"):
        return "127.0.0.1"
    chosen = os.environ.get("SPARK_LOCAL_IP", "")
    # a loopback address (set by a local session here or in a parent process) is never reachable from a cluster
    if chosen and not _LOOPBACK_SET_HERE and not chosen.startswith("127.") and chosen != "::1":
        return chosen
    import socket

    host, _, port = master[len("spark://") :].split(",")[0].rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, int(port or 7077)))  # no packet is sent: this only picks the route
        return str(probe.getsockname()[0])


PACKAGES = ("checkers", "harness", "nodes", "workloads")


def ship_packages(spark: Any, directory: str | os.PathLike[str] | None = None) -> Path:
    """Zip kraftwerk's packages (sources only) and add them to the executors' Python path (addPyFile).

    Without `directory` the zip goes to a temporary directory removed when this process exits (the
    driver serves the file to executors as they start, so it must outlive the session's set-up)."""
    import atexit
    import shutil
    import zipfile

    root = Path(__file__).resolve().parents[2]
    if directory is not None:
        folder = Path(directory)
    else:
        folder = Path(tempfile.mkdtemp(prefix="kraftwerk-ship-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "kraftwerk-packages.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in PACKAGES:
            for file in sorted((root / package).rglob("*.py")):
                zf.write(file, file.relative_to(root).as_posix())
    spark.sparkContext.addPyFile(str(path))
    return path


def session_running() -> bool:
    """Whether this process already runs a Spark session (a caller's: `spark_session` would return it, and it
    is not ours to stop)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def spark_session(
    master: str = "local[*]",
    app: str = "kraftwerk-analyze",
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
    jvm_log: str | os.PathLike[str] | None = None,
) -> Any:
    """A quiet Spark session: UI off, few shuffle partitions.

    Local masters run on loopback with executors on this Python. A `spark://HOST:PORT` master gets
    this driver's address on the route to HOST (nothing pins it to loopback), kraftwerk's packages
    shipped to its executors, and executors started with PYSPARK_PYTHON (default: this Python's
    path, which must exist on the workers with kraftwerk's dependencies).
    With `jvm_log`, the JVM's own console output (start-up notices, errors) goes to that file.
    """
    global _LOOPBACK_SET_HERE
    remote = master.startswith("spark://")
    if not remote and "SPARK_LOCAL_IP" not in os.environ:
        # local masters stay on loopback; a later session on a cluster in this process must not inherit it
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        _LOOPBACK_SET_HERE = True
    # on a cluster: PYSPARK_PYTHON, else this interpreter by its real venv path (hosts mount the venv there)
    here = str(Path(sys.prefix).resolve() / "bin" / Path(sys.executable).name)
    python = (_USER_PYSPARK_PYTHON or here) if remote else sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import warnings

    warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*")
    from pyspark.sql import SparkSession

    cores = os.cpu_count() or 2
    parts = shuffle_partitions or max(2, min(8, 2 * cores))
    driver = driver_address(master)
    java_opts = f"-Dlog4j2.configurationFile=file:{_quiet_log4j()} -XX:+UseParallelGC"
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(parts))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", driver)
        .config("spark.driver.host", driver)
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYSPARK_PYTHON", python)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.files.ignoreMissingFiles", "true")
        # we pass thousands of file paths: list them on the driver, not with a Spark job of one task per path
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.adaptive.enabled", "true")
    )
    if not remote:  # a cluster's executors have their own cores and log settings
        builder = builder.config("spark.default.parallelism", str(parts)).config(
            "spark.executor.extraJavaOptions", java_opts
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if jvm_log is None:
        spark = builder.getOrCreate()
    else:
        # the JVM inherits our stderr when it starts: hand it the log file instead
        Path(jvm_log).parent.mkdir(parents=True, exist_ok=True)
        saved = os.dup(2)
        try:
            with open(jvm_log, "ab") as fh:
                sys.stderr.flush()
                os.dup2(fh.fileno(), 2)
                spark = builder.getOrCreate()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    spark.sparkContext.setLogLevel("ERROR")
    if remote:
        ship_packages(spark)
    return spark


# -- manifest --------------------------------------------------------------------------------------


def load_manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST
    if not path.exists():
        return {"version": 1, "batches": [], "runs": {}}
    with open(path, encoding="utf-8") as fh:
        manifest = json.load(fh)
    if not isinstance(manifest, dict) or manifest.get("version") != 1:
        raise ValueError(f"{path}: not a kraftwerk analyze manifest")
    return manifest


def _save_manifest(out: Path, manifest: dict[str, Any]) -> None:
    tmp = out / f".{MANIFEST}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, out / MANIFEST)


# -- helpers ---------------------------------------------------------------------------------------


def _table_path(out: Path, name: str) -> str:
    return str(out / "tables" / name)


def read_table(spark: Any, out: Path, name: str, batches: list[str] | None = None) -> Any:
    """A table restricted to committed batches (all of them, or the given ones); empty if absent."""
    from pyspark.sql import functions as F

    from checkers.pipeline.schemas import TABLES

    schema = TABLES[name]
    path = Path(_table_path(out, name))
    if batches is None:
        batches = [b["id"] for b in load_manifest(out)["batches"]]
    if not path.exists() or not batches:
        return spark.createDataFrame([], schema)
    df = spark.read.schema(schema).parquet(str(path))
    return df.where(F.col("batch").isin(batches))


# -- the job ---------------------------------------------------------------------------------------


def analyze(
    store: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    resolve: Resolve,
    master: str = "local[*]",
    since: str | None = None,
    check_time_limit: float | None = None,
    spark: Any = None,
    log: Callable[[str], None] | None = None,
    spark_conf: dict[str, str] | None = None,
) -> AnalyzeResult:
    """Analyse the runs of `store` not analysed before into `out`; return counts and roll-ups.

    Each run is judged as its test judged it: `resolve` reads its test.json (how its workload's history is
    judged, its checker budget; `check_time_limit` replaces the budget when given). `spark` reuses a session
    (tests); otherwise one is started on `master` when there are new runs, and stopped once they are checked
    (the roll-ups need none).
    """
    say = log or (lambda _msg: None)
    started = time.monotonic()
    timings: dict[str, float] = {}
    store_path = Path(store).resolve()
    out_path = Path(out).resolve()
    out_path.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(out_path)
    t = time.monotonic()
    found = discover(store_path, resolve, since=since, exclude=[str(out_path)])
    new = [r for r in found if r.run_id not in manifest["runs"]]
    timings["discover"] = time.monotonic() - t
    batch = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    say(f"{len(found)} runs in {store_path}, {len(found) - len(new)} analysed before, {len(new)} new (batch {batch})")
    errors: list[dict[str, Any]] = []
    ops_total = 0
    if new:
        own_session = spark is None and not session_running()  # a session running here already is its owner's
        if spark is None:
            t = time.monotonic()
            spark = spark_session(master, conf=spark_conf, jvm_log=out_path / "spark.log")
            timings["spark-start"] = time.monotonic() - t
        try:
            ops_total = _ingest_and_check(spark, out_path, new, batch, check_time_limit, errors, say, timings)
        finally:
            if own_session:
                spark.stop()
        by_run = {e["run_id"]: e for e in errors}
        for info in new:
            status = "error" if info.run_id in by_run else "ok"
            manifest["runs"][info.run_id] = {"batch": batch, "status": status, "date": info.date}
        manifest["batches"].append(
            {
                "id": batch,
                "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "runs": len(new),
                "errors": len(by_run),
                "store": str(store_path),
            }
        )
        _save_manifest(out_path, manifest)
    from checkers.pipeline.rollups import compute as compute_rollups

    t = time.monotonic()
    rollups = compute_rollups(out_path, [b["id"] for b in manifest["batches"]])
    timings["rollups"] = time.monotonic() - t
    return AnalyzeResult(
        batch=batch,
        out=str(out_path),
        found=len(found),
        skipped=len(found) - len(new),
        analysed=len(new),
        errors=len({e["run_id"] for e in errors}),
        seconds=time.monotonic() - started,
        ops=ops_total,
        rollups=rollups,
        timings=timings,
    )


def _ingest_and_check(
    spark: Any,
    out: Path,
    runs: list[RunInfo],
    batch: str,
    time_limit: float | None,
    errors: list[dict[str, Any]],
    say: Callable[[str], None],
    timings: dict[str, float],
) -> int:
    """Steps 2–4 for one batch of new runs; appends error rows to `errors`; returns the client operations."""
    from checkers.pipeline.batch import RunTask, process_chunk
    from checkers.pipeline.tables import write_rows
    from checkers.pipeline.verdicts import verdict_row

    def error(info: RunInfo, stage: str, message: str) -> None:
        errors.append(
            {
                "run_id": info.run_id,
                "run_dir": info.run_dir,
                "stage": stage,
                "message": message,
                "batch": batch,
                "date": info.date,
                "workload": info.workload,
            }
        )

    by_id = {r.run_id: r for r in runs}
    for info in runs:
        for stage, message in info.errors:
            error(info, stage, message)
    tasks = [
        RunTask(
            run_id=r.run_id,
            date=r.date,
            workload=r.workload,
            history=r.history,
            events=r.events,
            logs=r.logs,
            checks=_budget(r.checks, time_limit) if r.checks is not None and not r.errors else None,
            size=_size(r.history),
        )
        for r in runs
        if r.history and not any(s == "path" for s, _ in r.errors)
    ]

    # -- one Spark job: each task reads, validates and checks a chunk of runs and writes their big tables ----
    t = time.monotonic()
    chunks = _chunks(tasks, spark.sparkContext.defaultParallelism)
    out_dir = str(out)
    results = []
    spent = {"process": 0.0, "write": 0.0}
    if chunks:
        done = (
            spark.sparkContext.parallelize(list(enumerate(chunks)), len(chunks))
            .map(lambda chunk: process_chunk(chunk[1], out_dir, batch, chunk[0]))
            .collect()
        )
        for chunk_results, chunk_spent in done:
            results.extend(chunk_results)
            for name, seconds in chunk_spent.items():
                spent[name] += seconds
    timings["read-check-write"] = time.monotonic() - t
    timings["tasks-read-check"] = spent["process"]
    timings["tasks-write"] = spent["write"]

    # -- the small tables, from the driver --------------------------------------------------------------
    t = time.monotonic()
    ops_total = 0
    checked: dict[str, list[dict[str, Any]]] = {"key_checks": [], "epoch_checks": [], "run_checks": []}
    verdicts = []
    for res in results:
        info = by_id[res.run_id]
        ops_total += res.invokes
        for stage, message in res.problems:
            error(info, stage, message)
        tail = {"batch": batch, "date": info.date, "workload": info.workload}
        checked["key_checks"].extend({**k, **tail} for k in res.key_checks)
        for name, row in (("epoch_checks", res.epoch_check), ("run_checks", res.run_check)):
            if row is not None:
                checked[name].append({**row, **tail})
        if not info.errors and not res.problems:
            verdicts.append({**verdict_row(info.row, res.key_checks, res.epoch_check, res.run_check), "batch": batch})
    name = f"part-{batch}.parquet"
    for table, rows in checked.items():
        write_rows(out, table, rows, name)
    write_rows(out, "verdicts", verdicts, name)
    failed = {e["run_id"] for e in errors}
    rows = [{**r.row, "status": "error" if r.run_id in failed else "ok", "batch": batch} for r in runs]
    write_rows(out, "runs", rows, name)
    if errors:
        write_rows(out, "errors", errors, name)
        say(f"{len(failed)} malformed run(s): see the errors table")
    timings["write-small-tables"] = time.monotonic() - t
    return ops_total


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


RUNS_PER_CHUNK = 200


def _chunks(tasks: list[Any], parallelism: int) -> list[list[Any]]:
    """Runs dealt into Spark tasks: at least four per core and a multiple of the cores (so a slow chunk does
    not hold the others up), at most RUNS_PER_CHUNK runs each; the biggest histories first, dealt back and
    forth so chunks weigh alike."""
    if not tasks:
        return []
    n = max(4 * parallelism, -(-len(tasks) // RUNS_PER_CHUNK))
    n = min(len(tasks), -(-n // parallelism) * parallelism)
    chunks: list[list[Any]] = [[] for _ in range(n)]
    for i, task in enumerate(sorted(tasks, key=lambda t: -t.size)):
        lap, pos = divmod(i, n)
        chunks[pos if lap % 2 == 0 else n - 1 - pos].append(task)
    return chunks


def _budget(checks: Any, time_limit: float | None) -> Any:
    """A run's checks with `analyze --check-time-limit` as its budget, when given (else the test's own)."""
    from dataclasses import replace

    return checks if time_limit is None else replace(checks, time_limit=time_limit)
