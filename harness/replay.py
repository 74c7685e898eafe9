"""`kraftwerk replay RUN_DIR`: drive a stored run again from its schedule and compare.

On the simulator the schedule (every fault and every client operation, with its
node and time) is re-run with the run's seed; the new history must be the same
bytes as the stored one. The exit code is the replayed run's verdict; a history
that differs means determinism broke, which is a harness failure (255).

On a real cluster (a run stored by a real backend, or any run with `--backend
docker|netns|local|ssh`) the schedule is driven again in real time on a fresh
cluster, up to N times, counting the attempts in which the same anomaly class
comes back (harness.replay_real).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.errors import InputError
from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, exit_code
from harness.argtypes import non_negative_float, non_negative_int
from harness.backends import registry
from harness.simrun import file_sha256, load_run, options_from_schedule, simulate


def first_difference(a: Path, b: list[str]) -> int | None:
    with open(a, encoding="utf-8") as fh:
        stored = fh.read().splitlines()
    for i, (x, y) in enumerate(zip(stored, b), 1):
        if x != y:
            return i
    return None if len(stored) == len(b) else min(len(stored), len(b)) + 1


def _stored_backend(run_dir: Path) -> str:
    import json

    try:
        return str(json.loads((run_dir / "test.json").read_text()).get("backend", "sim"))
    except (OSError, ValueError):
        return "sim"  # load_run says what is wrong


def run_replay(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    if getattr(args, "times", 1) < 1:
        print(f"kraftwerk replay: --times must be at least 1, got {args.times}", file=sys.stderr)
        return EXIT_BAD_INPUT
    backend = getattr(args, "backend", None)
    if backend not in (None, "sim") or (backend is None and _stored_backend(run_dir) != "sim"):
        from harness.replay_real import run as run_real_replay

        return run_real_replay(args)
    try:
        test, schedule = load_run(run_dir)
        opts = options_from_schedule(schedule)
    except InputError as e:
        print(f"kraftwerk replay: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stored = run_dir / "history.jsonl"
    want = file_sha256(stored) if stored.exists() else None
    worst = 0
    for attempt in range(1, args.times + 1):
        checked = simulate(opts)
        same = checked.digest == want
        verdict = checked.valid
        label = {True: "valid", False: "INVALID"}.get(verdict, "unknown")  # type: ignore[call-overload]
        anomalies = ", ".join(sorted(checked.anomalies)) or "none"
        print(
            f"replay {attempt}/{args.times}: {label} (anomalies: {anomalies}); history sha256 {checked.digest[:16]}… "
            + ("identical to the stored run" if same else "DIFFERS from the stored run"),
            file=sys.stderr,
        )
        if want is not None and not same:
            from checkers.history import dumps_op

            line = first_difference(stored, [dumps_op(op) for op in checked.sim.recorder.ops])
            print(f"kraftwerk replay: determinism broken: first differing history line {line}", file=sys.stderr)
            return EXIT_INTERNAL
        code = exit_code(verdict)
        worst = code if code == 1 or (code == 2 and worst == 0) else worst
    print(f"{checked.digest}  {run_dir}")
    del test
    return worst


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a stored run (store/<test>/<time>/ or its minimal/)")
    p.add_argument("--times", type=int, default=1, metavar="N", help="replay up to N times (default 1)")
    p.add_argument(
        "--backend",
        default=None,
        choices=("sim", *registry.REAL),
        help="where to replay (default: the run's own backend). A real backend drives the stored schedule in "
        "real time on a fresh cluster with the same size and bugs, each attempt stored as a normal run",
    )
    r = p.add_argument_group("real backends (docker, netns, local, ssh)")
    r.add_argument(
        "--all",
        action="store_true",
        help="run all N attempts (default: stop at the first attempt that reproduces the anomaly class)",
    )
    r.add_argument("--store", default="store", metavar="DIR", help="where the attempts are stored (default ./store)")
    r.add_argument("--name", default=None, help="test name in the store (default <test>-replay-<backend>)")
    r.add_argument(
        "--keep-node-names",
        action="store_true",
        help="do not rename nodes in the schedule so that the fresh cluster's leaders (quorum leader; on a "
        "queue run the partition leaders) stand where the stored run's did",
    )
    r.add_argument(
        "--no-order",
        action="store_true",
        help="drive operations and faults by their times alone (default: each also waits for what had completed "
        "before it started in the stored run, so slower real operations keep the stored order)",
    )
    r.add_argument(
        "--keep-unsynced",
        action="store_true",
        help="kills keep what a node wrote but did not fsync (a process crash). Default: lose it, as a power loss "
        "and the simulator's crashes do, when replaying a simulator run or a run made with --lose-unsynced",
    )
    r.add_argument(
        "--fsync-delay",
        type=non_negative_int,
        default=None,
        metavar="MS",
        help="real backends: nodes wait MS milliseconds before each fsync (default: the stored run's, else 0)",
    )
    r.add_argument(
        "--settle",
        type=non_negative_float,
        default=None,
        metavar="S",
        help="real backends: wait at least S seconds between the heal and the final reads (default: a simulator "
        "run's own pause, 10 s, so late consequences of a fault show before them; none for a real run)",
    )
    r.add_argument("--check-time-limit", type=float, default=300.0, metavar="S", help="checker budget (default 300)")
    r.add_argument("--ssh-hosts", metavar="FILE", help="ssh backend: hosts file (default: the stored run's)")
    r.add_argument("--ssh-user", default=None, metavar="USER", help="ssh backend: login user")
    r.add_argument("--ssh-key", default=None, metavar="FILE", help="ssh backend: private key file")
    r.add_argument("--ssh-known-hosts", default=None, metavar="FILE", help="ssh backend: known_hosts file")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress output from the attempts")
