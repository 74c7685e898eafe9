"""Explicit Spark schemas: the files we read (no schema inference) and the Parquet tables we write.

JSON fields whose type varies (`value`, `error`, `process`, `key`) are read as strings: Spark keeps a
JSON string's text and the raw JSON of any other value (the checkers take each run's values from its
lines as decoded, not from these columns).
Every table carries `batch` (the analyze job that wrote it) and is partitioned by `date` and
`workload` where it is per-run data.
"""

from __future__ import annotations

from pyspark.sql import types as T

CORRUPT = "_corrupt_record"
PARTITION_COLUMNS = ("date", "workload")


def _s(*fields: tuple[str, T.DataType] | T.StructField) -> T.StructType:
    return T.StructType([f if isinstance(f, T.StructField) else T.StructField(f[0], f[1], True) for f in fields])


_STR = T.StringType()
_LONG = T.LongType()
_DOUBLE = T.DoubleType()
_BOOL = T.BooleanType()
_STRS = T.ArrayType(T.StringType())

# -- files as read --------------------------------------------------------------------------------

HISTORY_JSON = _s(
    ("index", _LONG),
    ("time", _LONG),
    ("process", _STR),
    ("type", _STR),
    ("f", _STR),
    ("key", _STR),
    ("value", _STR),
    ("node", _STR),
    ("error", _STR),
    (CORRUPT, _STR),
)
EVENTS_JSON = _s(
    ("node", _STR),
    ("time", _DOUBLE),
    ("type", _STR),
    ("epoch", _LONG),
    ("role", _STR),
    ("leader", _STR),
    ("voted_for", _STR),
    ("hw", _LONG),
    ("partition", _STR),
    ("leader_epoch", _LONG),
    (CORRUPT, _STR),
)
LOG_JSON = _s(("offset", _LONG), ("epoch", _LONG), ("digest", _STR), (CORRUPT, _STR))

# -- tables ---------------------------------------------------------------------------------------

_TAIL = (("batch", _STR), ("date", _STR), ("workload", _STR))

RUNS = _s(
    ("run_id", _STR),
    ("run_dir", _STR),
    ("test_name", _STR),
    ("config", _STR),
    ("backend", _STR),
    ("nemesis", _STR),
    ("nodes", _LONG),
    ("concurrency", _LONG),
    ("time_limit", _DOUBLE),
    ("seed", _LONG),
    ("bugs", _STRS),
    ("start_time", _STR),
    ("recorded_valid", _STR),
    ("recorded_anomalies", _STRS),
    ("allow", _STRS),
    ("reproduce", _STR),
    ("has_results", _BOOL),
    ("has_timeline", _BOOL),
    ("options_json", _STR),
    ("status", _STR),  # ok | error
    *_TAIL,
)
OPS = _s(
    ("run_id", _STR),
    ("index", _LONG),
    ("time", _LONG),
    ("process", _STR),
    ("type", _STR),
    ("f", _STR),
    ("key", _STR),
    ("value", _STR),
    ("node", _STR),
    ("error", _STR),
    ("malformed", _STR),
    *_TAIL,
)
EVENTS = _s(
    ("run_id", _STR),
    ("line", _LONG),
    ("node", _STR),
    ("time", _DOUBLE),
    ("type", _STR),
    ("epoch", _LONG),
    ("role", _STR),
    ("leader", _STR),
    ("voted_for", _STR),
    ("hw", _LONG),
    ("partition", _STR),
    ("leader_epoch", _LONG),
    ("malformed", _STR),
    *_TAIL,
)
LOGS = _s(
    ("run_id", _STR),
    ("node", _STR),
    ("line", _LONG),
    ("offset", _LONG),
    ("epoch", _LONG),
    ("digest", _STR),
    ("malformed", _STR),
    *_TAIL,
)
KEY_CHECK = _s(
    ("run_id", _STR),
    ("key", _STR),
    ("valid", _STR),
    ("ops", _LONG),
    ("seconds", _DOUBLE),
    ("cause", _STR),
    ("summary", _STR),
    ("anomaly_types", _STRS),
    ("fail_index", _LONG),
    ("fail_time", _LONG),
    ("error", _STR),
)
KEY_CHECKS = _s(*KEY_CHECK, *_TAIL)
EPOCH_CHECK = _s(
    ("run_id", _STR),
    ("valid", _STR),
    ("anomaly_types", _STRS),
    ("anomaly_counts", T.MapType(_STR, _LONG)),
    ("events", _LONG),
    ("first_anomaly_node_time", _DOUBLE),
    ("seconds", _DOUBLE),
    ("error", _STR),
)
EPOCH_CHECKS = _s(*EPOCH_CHECK, *_TAIL)
RUN_CHECK = _s(
    ("run_id", _STR),
    ("valid", _STR),
    ("anomaly_types", _STRS),
    ("never_ok", _STRS),
    ("seconds", _DOUBLE),
    ("error", _STR),
)
RUN_CHECKS = _s(*RUN_CHECK, *_TAIL)
LATENCIES = _s(
    ("run_id", _STR),
    ("process", _STR),
    ("f", _STR),
    ("type", _STR),  # ok, fail, info (info: no completion or an info completion)
    ("invoke_time", _LONG),
    ("latency_ns", _LONG),
    ("in_fault", _BOOL),
    *_TAIL,
)
VERDICTS = _s(
    ("run_id", _STR),
    ("config", _STR),
    ("test_name", _STR),
    ("seed", _LONG),
    ("start_time", _STR),
    ("history_valid", _STR),  # linearizability (per key) or the queue checker (per run)
    ("epochs_valid", _STR),
    ("run_valid", _STR),  # the rest of `kraftwerk test`'s verdict: stats, partition logs, what the runtime observed
    ("valid", _STR),
    ("recorded_valid", _STR),
    ("matches_recorded", _BOOL),
    ("anomaly_types", _STRS),
    ("first_anomaly_s", _DOUBLE),
    ("check_seconds", _DOUBLE),
    ("keys", _LONG),
    ("ops", _LONG),
    ("run_dir", _STR),
    ("reproduce", _STR),
    ("has_timeline", _BOOL),
    *_TAIL,
)
ERRORS = _s(
    ("run_id", _STR),
    ("run_dir", _STR),
    ("stage", _STR),
    ("message", _STR),
    *_TAIL,
)

TABLES: dict[str, T.StructType] = {
    "runs": RUNS,
    "ops": OPS,
    "events": EVENTS,
    "logs": LOGS,
    "key_checks": KEY_CHECKS,
    "epoch_checks": EPOCH_CHECKS,
    "run_checks": RUN_CHECKS,
    "latencies": LATENCIES,
    "verdicts": VERDICTS,
    "errors": ERRORS,
}
