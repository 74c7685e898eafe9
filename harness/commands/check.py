"""`kraftwerk check`: judge history files, events files and run directories.

One JSON line per input on stdout (`{"file", "valid", …}`), a human summary on
stderr, and an exit code that is the worst verdict. Files can be checked in
several processes (`--jobs`); output order always follows the arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, compose, exit_code, worst_exit
from harness.core.argtypes import OldSpelling, positive_float, positive_int

CHECK_MODELS = ("auto", "cas-register", "register", "kv-append", "mutex", "multi-register", "queue", "epochs")
HELP = "check recorded histories (JSONL, Jepsen EDN, Jepsen logs) or run directories"
DESCRIPTION = (
    "Check histories for linearizability (register, cas-register, kv-append, mutex, "
    "multi-register), Kafka queue anomalies (queue; histories of transactions of send/poll micro-ops add "
    "Jepsen's transactional anomalies and G0/G1c cycles) or leader-per-epoch safety (epochs). "
    "Prints one JSON line per FILE on stdout and a human summary on stderr."
)
EPILOG = "Exit code: the worst verdict over all files (1 invalid > 2 unknown > 0 valid); 254 bad input."


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `kraftwerk check`."""
    p.add_argument("files", nargs="+", metavar="FILE", help="history files, events files or run directories")
    p.add_argument(
        "--model",
        default="auto",
        choices=CHECK_MODELS,
        help="what to check against (default: auto — inferred from the operations or the file)",
    )
    p.add_argument(
        "--format",
        default="auto",
        choices=("auto", "jsonl", "edn", "jepsen-log"),
        help="history format (default: auto — from the file name and contents)",
    )
    p.add_argument(
        "--check-time-limit",
        "--time-limit",
        action=OldSpelling,
        dest="time_limit",
        type=positive_float,
        default=None,
        metavar="S",
        help="give up on a file after S seconds with valid=unknown (default: no limit; a RUN_DIR: the run's own "
        "checker budget). --time-limit is the old, deprecated spelling",
    )
    p.add_argument(
        "--memory-limit",
        type=positive_int,
        default=None,
        metavar="MB",
        help="give up with valid=unknown when the checker's memory passes MB (default: 2048)",
    )
    p.add_argument(
        "--initial",
        default=None,
        metavar="JSON",
        help='initial register value as JSON (default: null; e.g. 0 or \'{"x": 0, "y": 0}\')',
    )
    p.add_argument("--html", metavar="FILE", help="write an HTML timeline of the failing (or first) key")
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="ANOMALY",
        help="queue model: an anomaly type that does not make the verdict invalid (repeatable)",
    )
    p.add_argument(
        "--ww-deps",
        action="store_true",
        help="queue model, transactional histories: allow G1c, G1c-process and G1c-realtime (Jepsen's --ww-deps); "
        "a queue history whose ops carry lists of send/poll micro-ops (f txn) is checked by checkers/txn_queue.py",
    )
    p.add_argument(
        "--cas-mismatch",
        action="store_true",
        help='cas-register: a fail cas whose error is "cas-mismatch" did compare — the register held a value '
        "other than the expected one at some point between its invocation and its completion — and is checked "
        "as such a read (catches stale compares). Default: every fail cas did not happen (Jepsen, Knossos)",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=None,
        help="processes: several files are spread over them, a single file's keys otherwise (default: every core)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no human summary on stderr")
    p.add_argument(
        "--full",
        action="store_true",
        help="the whole result on stdout even on a terminal (default: whole when stdout is a pipe or file, "
        "its headline on a terminal)",
    )


_INFER = {
    "cas": "cas-register",
    "read": "register",
    "write": "register",
    "get": "kv-append",
    "put": "kv-append",
    "append": "kv-append",
    "acquire": "mutex",
    "release": "mutex",
    "txn": "multi-register",
    "send": "queue",
    "poll": "queue",
    "assign": "queue",
}


def infer_model(fs: set[str], source: str) -> str:
    """The model a set of operation names belongs to."""
    models = {_INFER[f] for f in fs if f in _INFER}
    if "cas-register" in models:
        models.discard("register")
    unknown = sorted(f for f in fs if f not in _INFER)
    if len(models) == 1 and not unknown:
        return models.pop()
    if not fs:
        return "cas-register"
    raise InputError(
        f"cannot infer the model from operations {sorted(fs)} (give --model)",
        source,
    )


def _initial(args: argparse.Namespace) -> Any:
    if args.initial is None:
        return None
    try:
        return json.loads(args.initial)
    except json.JSONDecodeError as e:
        raise InputError(f"--initial is not valid JSON: {e.msg}") from None


def _check_history_file(path: str, model: str, args: argparse.Namespace, fmt: str = "auto") -> dict[str, Any]:
    from checkers import formats
    from checkers.registry import Checking, check_history

    history = formats.load(path, fmt)
    if model in ("auto", "queue"):
        from checkers.txn_queue import is_transactional

        if is_transactional(history):
            model = "txn-queue"
    if model == "auto":
        model = infer_model({op.f for op in history.operations()}, path)
    if model == "epochs":
        raise InputError("--model epochs needs an events file or a run directory, not a history", path)
    checking = Checking(model, allow=tuple(args.allow), ww_deps=getattr(args, "ww_deps", False))
    result = check_history(
        history,
        checking,
        time_limit=args.time_limit,
        memory_limit_mb=args.memory_limit or 2048,
        jobs=getattr(args, "key_jobs", 1),
        initial=_initial(args),
        cas_mismatch=getattr(args, "cas_mismatch", False),
    )
    if args.html and checking.part == "linearizable":
        from checkers.linearizable.timeline import write_timeline

        result["html"] = write_timeline(history, result, _html_path(args, path))
    from checkers.stats import stats

    result.setdefault("op-counts", {k: v for k, v in stats(history).items() if k != "valid"})
    return result


def _html_path(args: argparse.Namespace, path: str) -> str:
    if len(args.files) == 1:
        return str(args.html)
    base = Path(args.html)
    return str(base.with_name(f"{base.stem}.{args.files.index(path) + 1}{base.suffix or '.html'}"))


def _looks_like_events(path: str) -> bool:
    if os.path.basename(path) == "events.jsonl":
        return True
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
        obj = json.loads(first)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(obj, dict) and "node" in obj and "process" not in obj


def _check_run_dir(path: str, args: argparse.Namespace) -> dict[str, Any]:
    """A stored run judged exactly as `kraftwerk test` judged it: the checkers its test.json's workload
    composes (model, allowed anomalies, ww-deps), its events and log dumps, what its runtime observed
    (run.json) and the stats of its main phase. Without test.json (a directory of files), or with --model
    epochs, only what the files hold is checked."""
    d = Path(path)
    history = d / "history.jsonl"
    if args.model == "epochs" or not (d / "test.json").exists():
        return _check_files(d, args)
    if not history.exists():
        raise InputError("a run directory needs history.jsonl", path)
    from checkers.epochs import load_events, load_logs, load_partition_logs
    from checkers.formats import load
    from harness.core.checks import check_run, stored_observations, stored_spec

    spec = stored_spec(d)
    if args.model not in ("auto", spec.checking().model, spec.checking().part):
        raise InputError(f"--model {args.model}: this run's workload is judged by {spec.checking().model}", path)
    if args.time_limit is not None:
        from dataclasses import replace

        spec = replace(spec, check_time_limit=args.time_limit)
    observed, main = stored_observations(d)
    events = load_events(d) if (d / "events.jsonl").exists() else None
    result = check_run(
        spec,
        load(str(history), "jsonl"),
        events,
        load_logs(d) if events else None,
        observed,
        partition_logs=load_partition_logs(d),
        main=main,
    )
    return result


def _check_files(d: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A directory without test.json: its history by the model given or inferred, its events, its dumps."""
    parts: dict[str, dict[str, Any]] = {}
    history = d / "history.jsonl"
    events = d / "events.jsonl"
    if args.model != "epochs" and history.exists():
        parts["history"] = _check_history_file(str(history), args.model, args, "jsonl")
    if args.model in ("auto", "epochs") and events.exists():
        from checkers.epochs import check_epochs

        parts["epochs"] = check_epochs(d)
    if args.model in ("auto", "epochs", "queue") and (d / "logs" / "partitions").is_dir():
        from checkers.epochs import check_partition_logs, load_partition_logs

        parts["partition-logs"] = check_partition_logs(load_partition_logs(d))
    if not parts:
        raise InputError("a run directory needs history.jsonl or events.jsonl", str(d))
    if len(parts) == 1:
        return next(iter(parts.values()))
    return compose(parts)


def check_one(path: str, args: argparse.Namespace) -> tuple[dict[str, Any], int, str | None]:
    """Check one input; returns (json result, exit code, message for stderr)."""
    try:
        if os.path.isdir(path):
            result = _check_run_dir(path, args)
        elif args.model == "epochs" or (args.model == "auto" and args.format == "auto" and _looks_like_events(path)):
            from checkers.epochs import check_epochs

            result = check_epochs(path)
        else:
            result = _check_history_file(path, args.model, args, args.format)
        return {"file": path, **result}, exit_code(result.get("valid")), None
    except InputError as e:
        e.located(path)
        return {"file": path, "valid": "unknown", "error": str(e)}, EXIT_BAD_INPUT, str(e)
    except MemoryError:
        return {"file": path, "valid": "unknown", "cause": "out-of-memory"}, exit_code("unknown"), None
    except Exception as e:  # noqa: BLE001 - report, keep checking the other files
        import traceback

        tb = traceback.format_exc()
        msg = f"{path}: internal error: {type(e).__name__}: {e}\n{tb}"
        return (
            {"file": path, "valid": "unknown", "error": f"internal error: {type(e).__name__}: {e}"},
            EXIT_INTERNAL,
            msg,
        )


def _plan_jobs(args: argparse.Namespace) -> tuple[int, int]:
    """(processes over files, processes over keys within a file).

    Several files: spread the files over the processes (a fork costs about a millisecond, so even two small
    files gain). One file: its keys spread over the processes (a single hard key still gets a core).
    """
    cpus = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    if cpus <= 1:
        return 1, 1
    if len(args.files) >= 2:
        return min(cpus, len(args.files)), 1
    return 1, cpus


def _size(path: str) -> int:
    """A file's weight when files are spread over processes: its size (a run directory counts as 1 MiB)."""
    try:
        return os.path.getsize(path) if os.path.isfile(path) else 1 << 20
    except OSError:
        return 0


def run(args: argparse.Namespace) -> int:
    if args.initial is not None:
        try:
            json.loads(args.initial)
        except json.JSONDecodeError as e:
            print(f"kraftwerk check: --initial is not valid JSON: {e.msg}", file=sys.stderr)
            return EXIT_BAD_INPUT
    jobs, args.key_jobs = _plan_jobs(args)
    if jobs > 1:
        outcomes = _check_forked(args, jobs)
    else:
        outcomes = [check_one(f, args) for f in args.files]
    out = sys.stdout
    full = args.full or not out.isatty()
    for result, _, _ in outcomes:
        out.write(json.dumps(result if full else compact(result), default=_json_default) + "\n")
    out.flush()
    for _, _, message in outcomes:
        if message:
            print(message, file=sys.stderr)
    if not args.quiet:
        from harness.store.summary import print_check_summary

        print_check_summary([r for r, _, _ in outcomes])
    return worst_exit(code for _, code, _ in outcomes)


def _check_forked(args: argparse.Namespace, jobs: int) -> list[tuple[dict[str, Any], int, str | None]]:
    """check_one over the files, spread over `jobs` forked processes by size; the outcomes in the files' order."""
    from checkers.forked import balanced, map_forked

    groups = balanced([_size(f) for f in args.files], jobs)
    done = map_forked(lambda i: check_one(args.files[i], args), groups)
    outcomes: list[tuple[dict[str, Any], int, str | None]] = [({}, EXIT_INTERNAL, None)] * len(args.files)
    for group, results in zip(groups, done):
        for n, i in enumerate(group):
            if results is None:
                path = args.files[i]
                error = "internal error: the process checking it died"
                outcomes[i] = ({"file": path, "valid": "unknown", "error": error}, EXIT_INTERNAL, f"{path}: {error}")
            else:
                outcomes[i] = results[n]
    return outcomes


def compact(result: dict[str, Any]) -> dict[str, Any]:
    """A result's headline for a terminal: the file, the verdict, the anomalies (those that fail it and those
    allowed), each part's verdict and any error; the whole result is printed when stdout is not a terminal."""
    from checkers.registry import allowed_anomalies, bad_anomalies

    out: dict[str, Any] = {"file": result.get("file"), "valid": result.get("valid")}
    parts = {k: v.get("valid") for k, v in result.items() if isinstance(v, dict) and "valid" in v}
    if parts:
        out["parts"] = parts
    bad, allowed = bad_anomalies(result), allowed_anomalies(result)
    if bad:
        out["anomalies"] = bad
    if allowed:
        out["allowed"] = allowed
    for key in ("error", "cause", "never-ok"):
        if key in result:
            out[key] = result[key]
    never = (result.get("stats") or {}).get("never-ok")
    if never:
        out["never-ok"] = never
    out["full"] = "pipe stdout or give --full for the whole result"
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)
