"""`kraftwerk test`: run one chaos test, store everything, check it, exit with the verdict.

The run directory (docs/design.md "Store") gets test.json (every option and the seed),
history.jsonl (written as the run goes), events.jsonl, logs/<node>.jsonl,
schedule.json (the realised fault schedule), results.json and, for an invalid
linearizability verdict, timeline.html.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.verdict import EXIT_BAD_INPUT, exit_code
from harness.core.argtypes import non_negative_int
from harness.core.spec import BACKENDS, DBS, ETCD_READS, WORKLOADS, SpecError, TestSpec
from harness.real.backends import registry
from harness.store.runs import new_run, write_json, write_jsonl

HELP = "run a chaos test: start a cluster, inject faults, record a history, check it"
DESCRIPTION = (
    "Run one chaos test. Nodes run on the chosen backend while clients run the workload and "
    "the nemesis injects faults; then everything is healed, recovered and read back, and the "
    "history is checked. The run is stored under --store (test.json, history.jsonl, "
    "events.jsonl, logs/, schedule.json, results.json)."
)
if TYPE_CHECKING:
    from harness.real.run import ReplayMain

EPILOG = "Exit code: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 internal error."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", default="register", choices=WORKLOADS, help="what the clients do (default register)")
    p.add_argument(
        "--nemesis",
        default="partition,kill,pause,clock",
        metavar="LIST",
        help="faults to inject: comma-separated from partition, kill, pause, clock, packet (loss, delay, "
        "duplicate, reorder; on real hosts tc netem, or an NFQUEUE shaper where the kernel has no netem), "
        "disk (lose unsynced writes, torn write, flipped bit); or all (every one but packet and disk) / none "
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
    p.add_argument(
        "--db",
        default="kraftwerk",
        choices=DBS,
        help="the system under test: kraftwerk (our KRaft-style nodes) or etcd (Debian's etcd-server 3.4, register "
        "workload, on docker, netns or local) (default kraftwerk)",
    )
    p.add_argument(
        "--etcd-read",
        default="linearizable",
        choices=ETCD_READS,
        help="--db etcd: register reads as linearizable ranges (read index) or serializable ones (any member's "
        "local state, which etcd documents may be stale) (default linearizable)",
    )
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
    p.add_argument(
        "--clock-source",
        default="wall",
        choices=("wall", "monotonic"),
        help="the clock the nodes' timers read (node setting clock.source): wall (default; as Kafka's "
        "Time.milliseconds(), so clock faults move elections, sessions and timeouts) or monotonic",
    )
    p.add_argument(
        "--lease-reads",
        action="store_true",
        help="leader leases: the leader answers register reads from its state, without a log round trip, while "
        "its lease lasts (the election timeout less a drift margin, on the monotonic clock, from the last fetch "
        "round a majority acknowledged); off by default. The seeded bug lease-wall-clock turns them on",
    )
    q = p.add_argument_group("queue workload (Kafka's safe profile by default: any anomaly is a finding)")
    q.add_argument("--acks", default="all", choices=("all", "1", "0"), help="producer acks (default all)")
    q.add_argument("--min-isr", type=int, default=2, metavar="N", help="min.insync.replicas (default 2)")
    q.add_argument("--replication-factor", type=int, default=3, metavar="N", help="replicas per partition (default 3)")
    q.add_argument("--partitions", type=int, default=3, metavar="N", help="partitions of the topic (default 3)")
    q.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
    q.add_argument(
        "--sub-via",
        default="assign",
        metavar="assign|subscribe",
        help="how consumers get partitions: assign (manual) or subscribe (a consumer group: rebalances, "
        "committed offsets; poll-skip and nonmonotonic-poll are then allowed, as in Jepsen) (default assign)",
    )
    q.add_argument(
        "--txn",
        action="store_true",
        help="transactions (Jepsen's :txn): each op is up to 4 sends and polls in one Kafka transaction of the "
        "thread's transactional producer, polls read_committed, consumer offsets committed in the transaction; "
        "some abort by choice, some by a producer crash (its successor fences it); judged by the transactional "
        "checker (G0/G1c cycles, aborted reads, …). Needs --acks all and --sub-via assign",
    )
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


def build_spec(args: argparse.Namespace) -> TestSpec:
    """The TestSpec `kraftwerk test ARGS` runs; SpecError (exit 254) naming the first bad option,
    including faults this machine cannot inject (checked last, for real backends only)."""
    spec = TestSpec.from_args(args)
    problem = runnable_problem(spec)
    if problem:
        raise SpecError(problem)
    return spec


def problem(args: argparse.Namespace) -> str | None:
    """Why `kraftwerk test` refuses these options (exit 254), or None."""
    try:
        build_spec(args)
    except SpecError as e:
        return str(e)
    return None


def runnable_problem(spec: TestSpec) -> str | None:
    """Why this machine cannot run `spec` (its backend, or faults it cannot inject), or None."""
    if spec.backend == "sim":
        return None
    if spec.db == "etcd":
        from harness.db.etcd import why_not

        problem = why_not(spec.backend, spec.nemeses)
        if problem:
            return problem
    return registry.why_not(spec.backend, nemeses=spec.nemeses, ssh_hosts=spec.ssh_hosts, nodes=spec.nodes)


def reproduce_command(spec: TestSpec) -> str:
    """The command line that runs this exact test again (same seed, same options)."""
    parts = [
        "kraftwerk",
        "test",
        "--workload",
        spec.workload,
        "--backend",
        spec.backend,
        "--nemesis",
        ",".join(spec.nemeses) or "none",
        "--nodes",
        str(spec.nodes),
        "--concurrency",
        str(spec.concurrency),
        "--time-limit",
        f"{spec.time_limit:g}",
        "--interval",
        f"{spec.interval:g}",
        "--seed",
        str(spec.seed),
    ]
    kinds = spec.restricted_partition_kinds
    if kinds:
        parts += ["--partition-kinds", ",".join(kinds)]
    if spec.db != "kraftwerk":
        parts += ["--db", spec.db, "--etcd-read", spec.etcd_read]
    if spec.workload == "queue":
        parts += [
            "--acks",
            spec.acks,
            "--min-isr",
            str(spec.min_isr),
            "--replication-factor",
            str(spec.replication_factor),
            "--partitions",
            str(spec.partitions),
        ]
        if spec.unclean:
            parts.append("--unclean")
        if spec.sub_via != "assign":
            parts += ["--sub-via", spec.sub_via]
        if spec.txn:
            parts.append("--txn")
        for anomaly in spec.allow:
            parts += ["--allow", anomaly]
    for bug in spec.bugs:
        parts += ["--bug", bug]
    if spec.lose_unsynced:
        parts.append("--lose-unsynced")
    if spec.fsync_delay:
        parts += ["--fsync-delay", str(spec.fsync_delay)]
    if spec.clock_source != "wall":
        parts += ["--clock-source", spec.clock_source]
    if spec.lease_reads:
        parts.append("--lease-reads")
    if spec.backend == "ssh":
        parts += ["--ssh-hosts", str(spec.ssh_hosts), "--ssh-user", spec.ssh_user]
        parts += ["--ssh-key", spec.ssh_key] if spec.ssh_key else []
        parts += ["--ssh-known-hosts", spec.ssh_known_hosts] if spec.ssh_known_hosts else []
    return shlex.join(parts)


def describe(spec: TestSpec, **extra: Any) -> dict[str, Any]:
    """What test.json records: the spec (every option and the seed), the command line and the start time."""
    return {**spec.to_json(), "argv": sys.argv, "start-time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}


def run(args: argparse.Namespace) -> int:
    """`kraftwerk test`: build the TestSpec, run it on its backend, store and check it."""
    try:
        spec = build_spec(args)
    except SpecError as e:
        print(f"kraftwerk test: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        run_dir = new_run(args.store, spec.name)
    except (OSError, ValueError) as e:
        print(f"kraftwerk test: cannot create a run under --store {args.store}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    say = (lambda *_: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    replay = reproduce_command(spec)
    write_json(run_dir / "test.json", describe(spec))
    say(
        f"kraftwerk test {spec.name}: seed {spec.seed}, {spec.nodes} nodes, {spec.concurrency} clients, "
        f"nemesis {','.join(spec.nemeses) or 'none'}{', bugs ' + ','.join(spec.bugs) if spec.bugs else ''}"
    )
    say(f"run directory {run_dir}")
    if spec.backend != "sim":
        return run_real_test(spec, run_dir, replay, quiet=args.quiet)
    from harness.core.checks import check_run
    from harness.sim.cluster import Simulation
    from harness.sim.runs import write_node_files

    sim = Simulation(spec, history_path=str(run_dir / "history.jsonl"))
    result = sim.run()
    say(
        f"simulated {result.stats['virtual-seconds']} s in {result.stats['wall-seconds']} s "
        f"({result.stats['speedup']}x): {result.stats['operations']} operations, "
        f"{result.stats['restarts']} restarts; history sha256 {result.stats['history-sha256'][:16]}…"
    )
    write_node_files(run_dir, result.events, result.logs, sim.partition_dumps)
    for node in sim.names:
        (run_dir / "nodes" / node).mkdir(exist_ok=True)
        write_jsonl(run_dir / "nodes" / node / "events.jsonl", [e for e in result.events if e.get("node") == node])
    write_json(run_dir / "schedule.json", result.schedule_document(spec))
    say("checking…")
    history = result.recorder.history(str(run_dir / "history.jsonl"))
    results = check_run(
        history,
        result.events,
        result.logs,
        result.invariants,
        sim.workload.model,
        spec.check_time_limit,
        partition_logs=sim.partition_dumps,
        allow=spec.allow,
    )
    results["run"] = {**result.stats, "run-dir": str(run_dir), "reproduce": replay}
    return _finish(results, history, run_dir, replay)


def run_real_test(
    spec: TestSpec, run_dir: Path, replay: str, quiet: bool = False, main: ReplayMain | None = None
) -> int:
    """A run on docker/netns/local/ssh (harness.real): the same store layout, report and exit code.
    `main`: `kraftwerk replay`'s stored schedule instead of the seeded one (harness.real.run)."""
    from checkers.verdict import EXIT_INTERNAL
    from harness.db.protocol import ClusterNotReady
    from harness.real.backends.base import BackendError
    from harness.real.faults.net import PacketFaultUnsupported
    from harness.real.run import run_real

    try:
        results, history = run_real(spec, run_dir, quiet=quiet, replay=main)
    except PacketFaultUnsupported as e:  # the hosts cannot inject a fault the options ask for
        print(f"kraftwerk test: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (BackendError, ClusterNotReady) as e:
        print(f"kraftwerk test: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    results["run"].update({"run-dir": str(run_dir), "reproduce": replay})
    return _finish(results, history, run_dir, replay)


def _finish(results: dict[str, Any], history: Any, run_dir: Path, replay: str) -> int:
    """Write results.json (and the failing key's timeline), print the verdict and the report; the exit code."""
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

        from harness.store.report import write_report

        console.print(f"report: {escape(str(write_report(run_dir)))}")
    except Exception as e:  # noqa: BLE001 - the report never changes the verdict or the exit code
        console.print(f"[yellow]kraftwerk test: warning: could not write the report: {escape(str(e))}[/yellow]")
