"""`kraftwerk test`: run one chaos test, store everything, check it, exit with the verdict.

The run directory (DESIGN.md "Store") gets test.json (every option and the seed),
history.jsonl (written as the run goes), events.jsonl, logs/<node>.jsonl,
schedule.json (the realised fault schedule), results.json and, for an invalid
linearizability verdict, timeline.html.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from checkers.verdict import EXIT_BAD_INPUT, compose, exit_code
from harness.argtypes import non_negative_int
from harness.backends import registry
from harness.nemesis.partitions import KINDS
from harness.store import new_run, write_json, write_jsonl

BACKENDS = registry.NAMES
REAL_WORKLOADS = ("register", "queue")
WORKLOADS = ("register", "queue")
AVAILABLE_WORKLOADS = ("register", "queue")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", default="register", choices=WORKLOADS, help="what the clients do (default register)")
    p.add_argument(
        "--nemesis",
        default="partition,kill,pause,clock",
        metavar="LIST",
        help="faults to inject: comma-separated from partition, kill, pause, clock, packet (loss, delay, "
        "duplicate, reorder; on real hosts it needs tc netem); or all (every one but packet) / none "
        "(default partition,kill,pause,clock)",
    )
    p.add_argument(
        "--partition-kinds",
        default="all",
        metavar="LIST",
        help="which partitions the partition nemesis makes: comma-separated from halves, one (isolate a "
        "random node), leader (isolate the leader: the quorum leader, or for the queue workload the node "
        "leading the most partitions), majorities-ring, bridge, one-way; or all (default all)",
    )
    p.add_argument("--backend", default="sim", choices=BACKENDS, help="where nodes run (default sim)")
    p.add_argument("--nodes", type=int, default=5, metavar="N", help="cluster size (default 5)")
    p.add_argument("--concurrency", type=int, default=10, metavar="N", help="client workers (default 10)")
    p.add_argument(
        "--time-limit", type=float, default=60.0, metavar="S", help="seconds of faults and load (default 60)"
    )
    p.add_argument("--seed", type=int, default=None, metavar="N", help="random seed (default: a fresh one, printed)")
    p.add_argument("--bug", action="append", default=[], metavar="NAME", help="turn on a seeded bug (repeatable)")
    p.add_argument("--store", default="store", metavar="DIR", help="where runs are stored (default ./store)")
    p.add_argument("--name", default=None, help="test name in the store (default WORKLOAD-BACKEND)")
    p.add_argument("--interval", type=float, default=5.0, metavar="S", help="mean seconds between faults (default 5)")
    p.add_argument("--check-time-limit", type=float, default=300.0, metavar="S", help="checker budget (default 300)")
    p.add_argument(
        "--lose-unsynced",
        action="store_true",
        help="real backends: nodes keep log appends in the process until they fsync them, so a kill loses "
        "unsynced writes as a power loss would (Jepsen's lazyfs idea); the simulator's disk always does",
    )
    p.add_argument(
        "--fsync-delay",
        type=non_negative_int,
        default=0,
        metavar="MS",
        help="nodes wait MS milliseconds before each fsync of their logs (a slow disk; in the simulator, on top of "
        "its 1-10 ms); with --lose-unsynced a kill in that window loses appends the followers already hold "
        "(default 0)",
    )
    q = p.add_argument_group("queue workload (Kafka's safe profile by default: any anomaly is a finding)")
    q.add_argument("--acks", default="all", choices=("all", "1", "0"), help="producer acks (default all)")
    q.add_argument("--min-isr", type=int, default=2, metavar="N", help="min.insync.replicas (default 2)")
    q.add_argument("--replication-factor", type=int, default=3, metavar="N", help="replicas per partition (default 3)")
    q.add_argument("--partitions", type=int, default=3, metavar="N", help="partitions of the topic (default 3)")
    q.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    q.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="ANOMALY",
        help="a queue anomaly that does not make the run invalid (e.g. lost-write with --acks 1)",
    )
    s = p.add_argument_group("ssh backend (hosts you already have)")
    s.add_argument("--ssh-hosts", metavar="FILE", help="one host per line: [user@]address[:port]; nodes n1, n2, …")
    s.add_argument("--ssh-user", default="root", metavar="USER", help="login user (default root; others use sudo)")
    s.add_argument("--ssh-key", metavar="FILE", help="private key file (default: ssh's usual keys)")
    s.add_argument(
        "--ssh-known-hosts", metavar="FILE", help="known_hosts to check host keys against (default ~/.ssh/known_hosts)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print only the final line")


def _validate(args: argparse.Namespace) -> str | None:
    from harness.db.nodes import BUGS
    from harness.nemesis.schedule import parse_nemeses, parse_partition_kinds

    if args.backend not in registry.NAMES:
        return f"--backend {args.backend}: unknown (known: {', '.join(registry.NAMES)})"
    if args.workload not in AVAILABLE_WORKLOADS:
        return f"--workload {args.workload} is not available yet (available: {', '.join(AVAILABLE_WORKLOADS)})"
    if args.backend != "sim" and args.workload not in REAL_WORKLOADS:
        return f"--workload {args.workload} is not available yet on --backend {args.backend} (use --backend sim)"
    if not 1 <= args.nodes <= 15:
        return f"--nodes must be between 1 and 15, got {args.nodes}"
    if not 1 <= args.concurrency <= 1000:
        return f"--concurrency must be between 1 and 1000, got {args.concurrency}"
    if not 0 < args.time_limit <= 86400:
        return f"--time-limit must be a positive number of seconds, got {args.time_limit}"
    if args.interval <= 0:
        return f"--interval must be positive, got {args.interval}"
    if args.workload == "queue":
        if not 1 <= args.replication_factor <= args.nodes:
            return f"--replication-factor must be between 1 and --nodes ({args.nodes}), got {args.replication_factor}"
        if not 1 <= args.min_isr <= args.replication_factor:
            return f"--min-isr must be between 1 and --replication-factor, got {args.min_isr}"
        if not 1 <= args.partitions <= 100:
            return f"--partitions must be between 1 and 100, got {args.partitions}"
        from checkers.queue import ANOMALY_TYPES

        bad = sorted(set(args.allow) - set(ANOMALY_TYPES))
        if bad:
            return f"--allow {', '.join(bad)}: not a queue anomaly ({', '.join(ANOMALY_TYPES)})"
    unknown = sorted(set(args.bug) - BUGS)
    if unknown:
        return f"--bug {', '.join(unknown)}: unknown (known: {', '.join(sorted(BUGS))})"
    try:
        args.nemeses = parse_nemeses(args.nemesis)
    except ValueError as e:
        return f"--nemesis: {e}"
    try:
        args.partition_kinds_parsed = parse_partition_kinds(getattr(args, "partition_kinds", "all"))
    except ValueError as e:
        return f"--partition-kinds: {e}"
    return _validate_real(args) if args.backend != "sim" else None


def _validate_real(args: argparse.Namespace) -> str | None:
    """Options that only real backends have, and faults this machine cannot inject."""
    return registry.why_not(args.backend, nemeses=args.nemeses, ssh_hosts=args.ssh_hosts, nodes=args.nodes)


def check_run(
    history: Any,
    events: list[dict[str, Any]],
    logs: dict[str, list[dict[str, Any]]],
    invariants: dict[str, Any] | None,
    model: str,
    time_limit: float,
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]] | None = None,
    allow: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Every checker a run needs, composed (false beats unknown beats true).

    `model` "queue" checks the Kafka queue anomalies (and partition logs across replicas);
    any other model is a linearizability model.
    """
    from checkers.epochs import check_events, check_partition_logs
    from checkers.stats import stats

    parts: dict[str, dict[str, Any]] = {}
    if model == "queue":
        from checkers.queue import check_queue

        parts["queue"] = check_queue(history, allow=allow)
    else:
        from checkers.linearizable import check

        parts["linearizable"] = check(history, model, time_limit=time_limit)
    parts["epochs"] = check_events(events, logs) if events else {"valid": "unknown", "error": "no events"}
    if partition_logs:
        parts["partition-logs"] = check_partition_logs(partition_logs)
    if invariants is not None:
        parts["invariants"] = invariants
    result = compose(parts)
    result["stats"] = stats(history)
    return result


def restricted_partition_kinds(args: argparse.Namespace) -> tuple[str, ...]:
    """The --partition-kinds a test chose, or () when it allows every kind (the default)."""
    kinds = getattr(args, "partition_kinds_parsed", None) or KINDS
    return () if set(kinds) == set(KINDS) else tuple(kinds)


def reproduce_command(args: argparse.Namespace) -> str:
    """The command line that runs this exact test again (same seed, same options)."""
    parts = [
        "kraftwerk",
        "test",
        "--workload",
        args.workload,
        "--backend",
        args.backend,
        "--nemesis",
        ",".join(args.nemeses) or "none",
        "--nodes",
        str(args.nodes),
        "--concurrency",
        str(args.concurrency),
        "--time-limit",
        f"{args.time_limit:g}",
        "--interval",
        f"{args.interval:g}",
        "--seed",
        str(args.seed),
    ]
    kinds = restricted_partition_kinds(args)
    if kinds:
        parts += ["--partition-kinds", ",".join(kinds)]
    if args.workload == "queue":
        parts += [
            "--acks",
            args.acks,
            "--min-isr",
            str(args.min_isr),
            "--replication-factor",
            str(args.replication_factor),
            "--partitions",
            str(args.partitions),
        ]
        if args.unclean:
            parts.append("--unclean")
        for anomaly in args.allow:
            parts += ["--allow", anomaly]
    for bug in sorted(set(args.bug)):
        parts += ["--bug", bug]
    if getattr(args, "lose_unsynced", False):
        parts.append("--lose-unsynced")
    if getattr(args, "fsync_delay", 0):
        parts += ["--fsync-delay", str(args.fsync_delay)]
    if args.backend == "ssh":
        parts += ["--ssh-hosts", args.ssh_hosts, "--ssh-user", args.ssh_user]
        parts += ["--ssh-key", args.ssh_key] if args.ssh_key else []
        parts += ["--ssh-known-hosts", args.ssh_known_hosts] if args.ssh_known_hosts else []
    return shlex.join(parts)


def describe_test(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """What test.json records for these (validated) options: every option and the seed."""
    kinds = restricted_partition_kinds(args)
    return {
        "name": name,
        "workload": args.workload,
        "backend": args.backend,
        "nemesis": args.nemeses,
        "nodes": args.nodes,
        "concurrency": args.concurrency,
        "time-limit": args.time_limit,
        "interval": args.interval,
        **({"partition-kinds": list(kinds)} if kinds else {}),
        "seed": args.seed,
        "bugs": sorted(set(args.bug)),
        **({"lose-unsynced": True} if getattr(args, "lose_unsynced", False) else {}),
        **({"fsync-delay-ms": args.fsync_delay} if getattr(args, "fsync_delay", 0) else {}),
        **(
            {
                "acks": args.acks,
                "min-isr": args.min_isr,
                "replication-factor": args.replication_factor,
                "partitions": args.partitions,
                "unclean": args.unclean,
                "allow": args.allow,
            }
            if args.workload == "queue"
            else {}
        ),
        **(
            {"ssh-hosts": args.ssh_hosts, "ssh-user": args.ssh_user, "ssh-key": args.ssh_key}
            if args.backend == "ssh"
            else {}
        ),
        "argv": sys.argv,
        "start-time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def run_test(args: argparse.Namespace) -> int:
    problem = _validate(args)
    if problem:
        print(f"kraftwerk test: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    name = args.name or f"{args.workload}-{args.backend}"
    try:
        run_dir = new_run(args.store, name)
    except (OSError, ValueError) as e:
        print(f"kraftwerk test: cannot create a run under --store {args.store}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    say = (lambda *_: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    replay = reproduce_command(args)
    test = describe_test(args, name)
    write_json(run_dir / "test.json", test)
    say(
        f"kraftwerk test {name}: seed {args.seed}, {args.nodes} nodes, {args.concurrency} clients, "
        f"nemesis {','.join(args.nemeses) or 'none'}{', bugs ' + ','.join(test['bugs']) if test['bugs'] else ''}"
    )
    say(f"run directory {run_dir}")
    if args.backend != "sim":
        return _run_real(args, run_dir, replay)
    from harness.sim.cluster import SimOptions, Simulation

    opts = SimOptions(
        seed=args.seed,
        nodes=args.nodes,
        concurrency=args.concurrency,
        time_limit=args.time_limit,
        nemeses=args.nemeses,
        bugs=sorted(set(args.bug)),
        interval=args.interval,
        partition_kinds=args.partition_kinds_parsed,
        workload=args.workload,
        acks={"all": -1, "1": 1, "0": 0}[args.acks],
        min_isr=args.min_isr,
        replication_factor=args.replication_factor,
        partitions=args.partitions,
        unclean=args.unclean,
        fsync_delay_ms=args.fsync_delay,
    )
    sim = Simulation(opts, history_path=str(run_dir / "history.jsonl"))
    result = sim.run()
    say(
        f"simulated {result.stats['virtual-seconds']} s in {result.stats['wall-seconds']} s "
        f"({result.stats['speedup']}x): {result.stats['operations']} operations, "
        f"{result.stats['restarts']} restarts; history sha256 {result.stats['history-sha256'][:16]}…"
    )
    write_jsonl(run_dir / "events.jsonl", result.events)
    for node, entries in result.logs.items():
        write_jsonl(run_dir / "logs" / f"{node}.jsonl", entries)
    for tp, dumps in sim.partition_dumps.items():
        (run_dir / "logs" / "partitions" / tp).mkdir(parents=True, exist_ok=True)
        for node, entries in dumps.items():
            write_jsonl(run_dir / "logs" / "partitions" / tp / f"{node}.jsonl", entries)
    for node in sim.names:
        (run_dir / "nodes" / node).mkdir(exist_ok=True)
        write_jsonl(run_dir / "nodes" / node / "events.jsonl", [e for e in result.events if e.get("node") == node])
    write_json(run_dir / "schedule.json", result.schedule_document(opts))
    say("checking…")
    history = result.recorder.history(str(run_dir / "history.jsonl"))
    results = check_run(
        history,
        result.events,
        result.logs,
        result.invariants,
        sim.workload.model,
        args.check_time_limit,
        partition_logs=sim.partition_dumps,
        allow=args.allow,
    )
    results["run"] = {**result.stats, "run-dir": str(run_dir), "reproduce": replay}
    if results.get("linearizable", {}).get("valid") is False:
        from checkers.linearizable.timeline import write_timeline

        results["linearizable"]["html"] = write_timeline(
            history, results["linearizable"], str(run_dir / "timeline.html")
        )
    write_json(run_dir / "results.json", results)
    _report(results, run_dir, replay)
    return exit_code(results["valid"])


def _run_real(args: argparse.Namespace, run_dir: Path, replay: str) -> int:
    """A run on docker/netns/local/ssh (harness.runner): the same store layout, report and exit code."""
    from checkers.verdict import EXIT_INTERNAL
    from harness.backends.base import BackendError
    from harness.db.protocol import ClusterNotReady
    from harness.nemesis.real_net import PacketFaultUnsupported
    from harness.runner.run import run_real

    try:
        results, history = run_real(args, run_dir)
    except PacketFaultUnsupported as e:  # the hosts cannot inject a fault the options ask for
        print(f"kraftwerk test: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (BackendError, ClusterNotReady) as e:
        print(f"kraftwerk test: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    results["run"].update({"run-dir": str(run_dir), "reproduce": replay})
    if results.get("linearizable", {}).get("valid") is False:
        from checkers.linearizable.timeline import write_timeline

        results["linearizable"]["html"] = write_timeline(
            history, results["linearizable"], str(run_dir / "timeline.html")
        )
    write_json(run_dir / "results.json", results)
    _report(results, run_dir, replay)
    return exit_code(results["valid"])


def _report(results: dict[str, Any], run_dir: Path, replay: str) -> None:
    from rich.console import Console

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    valid = results["valid"]
    if valid is True:
        console.print("[green]Everything looks good![/green]")
    elif valid is False:
        console.print(
            f"[bold red]Analysis invalid![/bold red] anomalies: {', '.join(results.get('anomaly-types', []))}"
        )
        lin = results.get("linearizable", {})
        queue = results.get("queue", {})
        if queue.get("valid") is False:
            counts = {k: v.get("count") for k, v in queue.get("anomalies", {}).items()}
            console.print(f"  queue: {', '.join(f'{k} ×{n}' for k, n in counts.items())}")
        if lin.get("valid") is False:
            console.print(f"  linearizability: key {lin['failure'].get('key')}: {lin['failure'].get('summary')}")
    else:
        console.print("[yellow]Errors occurred during analysis, but no anomalies found.[/yellow]")
    console.print(f"results: {run_dir / 'results.json'}")
    console.print(f"reproduce: {replay}")
    try:  # report.html, plots and timelines (sim and real runs alike), after results.json
        from rich.markup import escape

        from harness.report import write_report

        console.print(f"report: {escape(str(write_report(run_dir)))}")
    except Exception as e:  # noqa: BLE001 - the report never changes the verdict or the exit code
        console.print(f"[yellow]kraftwerk test: warning: could not write the report: {escape(str(e))}[/yellow]")
