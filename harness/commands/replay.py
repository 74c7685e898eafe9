"""`kraftwerk replay RUN_DIR`: drive a stored run again from its schedule and compare.

On the simulator the schedule (every fault and every client operation, with its
node and time) is re-run with the run's seed; the new history must be the same
bytes as the stored one. The exit code is the replayed run's verdict; a history
that differs means determinism broke, which is a harness failure (255).

On a real cluster (a run stored by a real backend, or any run with `--backend
docker|netns|local|ssh`) the schedule is driven again in real time on a fresh
cluster, up to N times, counting the attempts in which the same anomaly class
comes back (harness.tools.replay_real).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, exit_code
from harness.core.argtypes import non_negative_float, non_negative_int
from harness.core.spec import DBS, ETCD_READS, SpecError, TestSpec
from harness.real.backends import registry
from harness.sim.runs import file_sha256, from_schedule, load_run, simulate
from harness.tools.replay_real import (
    SECOND,
    Plan,
    controller_renaming,
    load_plan,
    queue_options,
    renamed_assignment,
    renaming,
    replay_generator,
    reproduced,
)
from workloads import generator as gen
from workloads.protocol import Workload

HELP = "drive a stored run again from its schedule (simulator: identical history; real cluster: reproduce)"
DESCRIPTION = (
    "Re-run a stored run from its schedule.json (every fault and client operation). On the "
    "simulator the new history must equal the stored one, byte for byte. On a real backend (the run's own, or "
    "--backend docker|netns|local|ssh, also for simulator runs such as RUN_DIR/minimal) the schedule is driven "
    "in real time on a fresh cluster up to --times N times; each attempt is stored as a normal run, and the "
    "output says in how many attempts the stored run's anomaly class came back."
)
EPILOG = (
    "Exit code, simulator: the replayed verdict (0/1/2); 255 if the history differs. Real cluster: 1 the "
    "anomaly class came back in some attempt, 0 every attempt was valid, 2 not reproduced but some attempt was "
    "unknown or invalid in another way. Both: 254 bad arguments or input, 255 the harness failed."
)


def first_difference(a: Path, b: list[str]) -> int | None:
    with open(a, encoding="utf-8") as fh:
        stored = fh.read().splitlines()
    for i, (x, y) in enumerate(zip(stored, b), 1):
        if x != y:
            return i
    return None if len(stored) == len(b) else min(len(stored), len(b)) + 1


def _stored_db(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "test.json").read_text()).get("db", "kraftwerk"))
    except (OSError, ValueError):
        return "kraftwerk"


def _stored_backend(run_dir: Path) -> str:

    try:
        return str(json.loads((run_dir / "test.json").read_text()).get("backend", "sim"))
    except (OSError, ValueError):
        return "sim"  # load_run says what is wrong


def run(args: argparse.Namespace) -> int:
    """`kraftwerk replay RUN_DIR`: on the simulator (byte for byte) or on a real cluster."""
    run_dir = Path(args.run_dir)
    if getattr(args, "times", 1) < 1:
        print(f"kraftwerk replay: --times must be at least 1, got {args.times}", file=sys.stderr)
        return EXIT_BAD_INPUT
    backend = getattr(args, "backend", None)
    etcd = (getattr(args, "db", None) or _stored_db(run_dir)) == "etcd"
    if etcd and (backend == "sim" or (backend is None and _stored_backend(run_dir) == "sim")):
        print("kraftwerk replay: an etcd replay needs a real --backend (docker, netns or local)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if backend not in (None, "sim") or (backend is None and _stored_backend(run_dir) != "sim"):
        return run_on_cluster(args)
    try:
        test, schedule = load_run(run_dir)
        spec, sim_plan = from_schedule(schedule)
    except InputError as e:
        print(f"kraftwerk replay: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stored = run_dir / "history.jsonl"
    want = file_sha256(stored) if stored.exists() else None
    worst = 0
    for attempt in range(1, args.times + 1):
        checked = simulate(spec, sim_plan)
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


def replay_spec(plan: Plan, args: argparse.Namespace, backend: str) -> TestSpec:
    """The test a real replay attempt runs: the stored run's options, on `backend`, with this replay's."""
    test = plan.test
    queue = {}
    if plan.workload == "queue":
        q = plan.queue or queue_options({}, test, plan.nodes)
        queue = {
            "acks": q["acks"],
            "partitions": q["partitions"],
            "replication_factor": q["replication-factor"],
            "min_isr": q["min-isr"],
            "unclean": q["unclean"],
            "allow": tuple(q["allow"]),
        }
    db = getattr(args, "db", None) or str(test.get("db", "kraftwerk"))
    etcd = db == "etcd"  # etcd has no seeded bugs and always fsyncs: the schedule's faults and operations only
    return TestSpec(
        db=db,
        etcd_read=getattr(args, "etcd_read", None) or str(test.get("etcd-read", "linearizable")),
        workload=plan.workload,
        backend=backend,
        nemeses=tuple(plan.nemeses),
        nodes=plan.nodes,
        concurrency=plan.concurrency,
        time_limit=plan.time_limit,
        seed=plan.seed,
        bugs=() if etcd else tuple(plan.bugs),
        interval=float(test.get("interval", 5.0)),
        check_time_limit=args.check_time_limit,
        ssh_hosts=args.ssh_hosts or (test.get("ssh-hosts") if backend == "ssh" else None),
        ssh_user=args.ssh_user or test.get("ssh-user") or "root",
        ssh_key=args.ssh_key or test.get("ssh-key"),
        ssh_known_hosts=args.ssh_known_hosts,
        # the simulator's crashes lose unsynced writes: so do the replay's kills, unless told otherwise
        lose_unsynced=not etcd
        and not args.keep_unsynced
        and (plan.source_backend == "sim" or bool(test.get("lose-unsynced"))),
        fsync_delay=0 if etcd else _fsync_delay(args, test),
        # runs stored before clock.source ran their nodes' timers on the monotonic clock
        clock_source=str(test.get("clock-source", "monotonic")),
        lease_reads=bool(test.get("lease-reads", False)),
        settle=plan.settle if getattr(args, "settle", None) is None else args.settle,
        name=getattr(args, "name", None) or f"{test.get('name', 'run')}-replay-{backend}",
        **queue,
    )


def align_phase(plan: Plan, clock_source: str, sleep: Callable[[float], None] = time.sleep) -> int:
    """Wait until the real nodes' clock stands in the phase of their clock-phased timers that the stored run's
    main phase began in (the lazy-flush bug's flushes; containers share the host's clocks); the ns waited."""
    now = time.time_ns() if clock_source == "wall" else time.monotonic_ns()
    wait = plan.phase_wait(now)
    if wait:
        print(
            f"  waiting {wait / 1e6:.0f} ms to start the main phase in the stored run's lazy-flush phase "
            f"({plan.main_start % (plan.phase_period() or 1) / 1e6:.0f} ms into the nodes' flush interval)",
            file=sys.stderr,
        )
        sleep(wait / SECOND)
    return wait


class StoredMain:
    """The stored schedule as a real run's main phase (`harness.real.run.ReplayMain`): each attempt
    renames nodes so that the fresh cluster's leaders stand where the stored run's stood."""

    def __init__(self, plan: Plan, clock_source: str, keep_node_names: bool, ordered: bool) -> None:
        self.plan = plan
        self.clock_source = clock_source
        self.keep_node_names = keep_node_names
        self.ordered = ordered
        self.swaps: list[dict[str, str]] = []  # each attempt's renaming
        self.placed: dict[str, str] | None = None  # the renaming the topic was placed with, this attempt

    def prepare(self, leader: str | None, workload: Workload) -> None:
        """Before the queue's setup: create the topic with the stored assignment, renamed so that the
        fresh controller stands where the stored one stood."""
        plan = self.plan
        self.placed = None
        place = getattr(workload, "place", None)
        if self.keep_node_names or not plan.assignment or place is None:
            return
        mapping = controller_renaming(plan, leader)
        place(renamed_assignment(plan, mapping))
        self.placed = mapping
        print(
            f"  fresh controller {leader}, the stored run's {plan.leader}: topic placed as "
            + ", ".join(f"{p} {rs}" for p, rs in sorted(renamed_assignment(plan, mapping).items())),
            file=sys.stderr,
        )

    def __call__(self, leader: str | None, partition_leaders: Mapping[str, str]) -> gen.Generator:
        plan = self.plan
        if self.placed is not None:
            mapping = self.placed
        else:
            mapping = {} if self.keep_node_names else renaming(plan, leader, partition_leaders)
        self.swaps.append(mapping)
        if mapping:
            fresh = f"leader {leader}" + (
                ", partition leaders " + ", ".join(f"{k} {v}" for k, v in sorted(partition_leaders.items()))
                if plan.partition_leaders
                else ""
            )
            stored = f"leader {plan.leader}" + (
                ", partition leaders " + ", ".join(f"{k} {v}" for k, v in plan.partition_leaders.items())
                if plan.partition_leaders
                else ""
            )
            print(
                f"  fresh cluster: {fresh}; the stored run's: {stored}: renaming "
                + ", ".join(f"{a} → {b}" for a, b in sorted(mapping.items()))
                + " in the schedule",
                file=sys.stderr,
            )
        align_phase(plan, self.clock_source)
        return replay_generator(plan, mapping, ordered=self.ordered)


def run_on_cluster(args: argparse.Namespace) -> int:
    """`kraftwerk replay RUN_DIR` on docker/netns/local/ssh; the exit code of the epilog."""
    from harness.commands.test import describe, run_real_test, runnable_problem
    from harness.store.runs import new_run, write_json

    try:
        plan = load_plan(args.run_dir)
    except InputError as e:
        print(f"kraftwerk replay: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.backend is None and plan.source_backend == "sim":
        print("kraftwerk replay: a simulator run needs --backend to replay on a real cluster", file=sys.stderr)
        return EXIT_BAD_INPUT
    backend = args.backend or plan.source_backend
    target, mapped = plan.target()
    print(
        f"kraftwerk replay: {plan.source} ({plan.source_backend}, seed {plan.seed}) on {backend}: "
        f"{plan.nodes} nodes, {plan.concurrency} clients, {len(plan.ops)} operations, {len(plan.events)} fault events "
        f"({', '.join(plan.nemeses) or 'no faults'}) in {plan.time_limit:.1f} s; bugs {', '.join(plan.bugs) or 'none'}",
        file=sys.stderr,
    )
    if plan.workload == "queue":
        q = plan.queue
        print(
            f"  queue: {q['partitions']} partitions, replication factor {q['replication-factor']}, "
            f"min ISR {q['min-isr']}, acks {q['acks']}{', unclean election' if q['unclean'] else ''}",
            file=sys.stderr,
        )
    for note in plan.notes:
        print(f"  note: {note}", file=sys.stderr)
    if mapped:
        print(
            f"  note: simulator invariants are not observable on a real cluster; looking for their visible "
            f"consequences instead: {'; '.join(mapped)}",
            file=sys.stderr,
        )
    wanted = ", ".join(sorted(target)) if target else "any invalid verdict (the stored run has no anomalies)"
    print(f"  reproduction = an invalid verdict with any of: {wanted}", file=sys.stderr)

    try:
        spec = replay_spec(plan, args, backend)
        problem = runnable_problem(spec)
    except SpecError as e:
        problem = str(e)
    if problem:
        print(f"kraftwerk replay: cannot replay this run on --backend {backend}: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    main = StoredMain(plan, spec.clock_source, keep_node_names=args.keep_node_names, ordered=not args.no_order)
    command = shlex.join(["kraftwerk", "replay", str(plan.source), "--backend", backend])
    attempts: list[dict[str, Any]] = []
    for attempt in range(1, args.times + 1):
        try:
            run_dir = new_run(args.store, spec.name)
        except (OSError, ValueError) as e:
            print(f"kraftwerk replay: cannot create a run under --store {args.store}: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        test = describe(spec)
        test["replay"] = {
            "of": str(plan.source),
            "source-backend": plan.source_backend,
            "attempt": attempt,
            "times": args.times,
            "time-shift-seconds": round(plan.shift_ns / SECOND, 3),
            "target-anomalies": sorted(target),
            **({"settle-seconds": spec.settle} if spec.settle else {}),
        }
        write_json(run_dir / "test.json", test)
        print(f"attempt {attempt}/{args.times}: run directory {run_dir}", file=sys.stderr, flush=True)
        code = run_real_test(spec, run_dir, command, quiet=args.quiet, main=main)
        if code == EXIT_INTERNAL or not (run_dir / "results.json").exists():
            print(f"kraftwerk replay: attempt {attempt} failed in the harness (exit {code})", file=sys.stderr)
            return EXIT_INTERNAL
        results = json.loads((run_dir / "results.json").read_text())
        if main.swaps and main.swaps[-1]:
            test["replay"]["node-renaming"] = main.swaps[-1]
            write_json(run_dir / "test.json", test)
        hit = reproduced(results, target)
        anomalies = sorted(results.get("anomaly-types", []))
        attempts.append({"run": str(run_dir), "valid": results.get("valid"), "anomalies": anomalies, "reproduced": hit})
        label = {True: "valid", False: "INVALID"}.get(results.get("valid"), "unknown")  # type: ignore[call-overload]
        print(
            f"replay {attempt}/{args.times}: {label} (anomalies: {', '.join(anomalies) or 'none'}) — "
            + ("REPRODUCED" if hit else "not reproduced"),
            file=sys.stderr,
            flush=True,
        )
        if hit and not args.all:
            break
    k = sum(a["reproduced"] for a in attempts)
    early = k and len(attempts) < args.times
    seen = sorted({x for a in attempts if a["reproduced"] for x in a["anomalies"]})
    print(
        f"reproduced in {k} of {len(attempts)} attempts"
        + (f" (anomaly classes {', '.join(seen)})" if k else f" (looked for {', '.join(sorted(target)) or 'any'})")
        + (f"; stopped at the first reproduction (of up to {args.times}; --all runs them all)" if early else ""),
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "source": str(plan.source),
                "backend": backend,
                "target": sorted(target),
                "reproduced": k,
                "attempts": len(attempts),
                "times": args.times,
                "runs": attempts,
            }
        )
    )
    if k:
        return EXIT_INVALID
    if any(a["valid"] is not True for a in attempts):
        return EXIT_UNKNOWN
    return EXIT_VALID


def _fsync_delay(args: argparse.Namespace, test: dict[str, Any]) -> int:
    """--fsync-delay of the replay, else the stored run's."""
    given = getattr(args, "fsync_delay", None)
    return int(test.get("fsync-delay-ms", 0)) if given is None else given


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
    r.add_argument(
        "--db",
        default=None,
        choices=DBS,
        help="the system to replay the schedule on: kraftwerk (our nodes) or etcd (default: the stored run's); "
        "on etcd, seeded bugs and the disk options are left out",
    )
    r.add_argument(
        "--etcd-read",
        default=None,
        choices=ETCD_READS,
        help="--db etcd: linearizable or serializable reads (default: the stored run's, else linearizable)",
    )
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
