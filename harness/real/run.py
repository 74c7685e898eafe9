"""One chaos test on a real cluster (docker, netns, local or ssh), from hosts to verdict.

1. hosts: create the backend's hosts (containers, namespaces, loopback addresses, SSH hosts);
2. nemesis setup (iptables chains, libfaketime files), the DB's setup (`--db`: our nodes' node.properties,
   or etcd: harness.db.etcd), start every node; wait until a leader is elected and every node answers
   and knows it (`ready-seconds`); clients reach the nodes through the DB's transport;
3. main phase (`--time-limit`): clients run the workload at a staggered rate while the
   seeded schedule (harness.nemesis.schedule.generate) injects faults — any_of(clients,
   nemesis), each under the time limit;
4. heal: stop partitions, resume, restart killed nodes, reset clocks (nemesis ops);
   recover: wait for a leader known to every node; final: read every key until a read is ok;
5. collect: stop nodes, copy events/logs, dump committed logs; tear everything down;
6. check: linearizability (cas-register) + epochs, composed by `check_run`; a node that stopped
   itself on an illegal state (its raft core's Fatal, exit 3) makes the run invalid (`node-fatal`),
   as in the simulator.

A workload that speaks Kafka (the queue, `workloads.queue`) runs the nodes as brokers too: its
setup creates its topic once the cluster is ready, its final phase drains every partition, and it
is checked for the queue anomalies (`--allow`) and committed divergence of the brokers' partition logs.

The history is appended and flushed as operations happen; schedule.json records what was
really done (every nemesis event with resolved targets and time, every client op with its
node and time), in the simulator's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from checkers.history import History
from harness.core.checks import check_run
from harness.core.interpreter import SCHEDULE_FORMAT, client_phase
from harness.core.recorder import Recorder
from harness.core.spec import TestSpec
from harness.core.streams import stream
from harness.db.nodes import NodeDB, broker_properties
from harness.db.protocol import DB, ClusterNotReady
from harness.nemesis.schedule import cuts_links, generate
from harness.real.backends import registry
from harness.real.backends.base import Backend, Host
from harness.real.interpreter import Interpreter, close_loop, monotonic_clock
from harness.real.nemesis import RunnerNemesis, parallel
from harness.real.progress import Progress
from harness.real.workload import make_workload
from harness.store.runs import write_json, write_jsonl
from workloads import generator as gen
from workloads.protocol import Workload

READY_TIMEOUT = 60.0  # seconds for the fresh cluster to elect a leader
RECOVERY_TIMEOUT = 30.0  # seconds for the healed cluster to agree on a leader again
FINAL_SECONDS = 20.0  # seconds allowed for the final reads
OP_TIMEOUT = 2.0  # seconds before a client gives up on an operation (→ info)


class ReplayMain(Protocol):
    """`kraftwerk replay`'s main phase: a stored schedule, fitted to the fresh cluster."""

    def prepare(self, leader: str | None, workload: Workload) -> None:
        """Before the workload's setup (e.g. place the queue's topic around the fresh leader)."""

    def __call__(self, leader: str | None, partition_leaders: Mapping[str, str]) -> gen.Generator:
        """The main phase, given the fresh cluster's leader and partition leaders."""
        ...


def make_backend(args: TestSpec, log: Callable[[str], None]) -> Backend:
    """The backend `args.backend` names, ready to create hosts (BackendError if it cannot run here)."""
    return registry.build(
        args.backend,
        log=log,
        ssh_hosts=args.ssh_hosts,
        ssh_user=args.ssh_user,
        ssh_key=args.ssh_key,
        ssh_known_hosts=args.ssh_known_hosts,
    )


def _host_record(backend: Backend, h: Host) -> dict[str, Any]:
    rec: dict[str, Any] = {"name": h.name, "address": h.address, "workdir": h.workdir}
    ports = getattr(backend, "ports", {})
    if h.name in ports:
        rec["ports"] = list(ports[h.name])
    return rec


def run_real(
    args: TestSpec, run_dir: Path, quiet: bool = False, replay: ReplayMain | None = None
) -> tuple[dict[str, Any], History]:
    """Run the test `args`; returns (results, history). `replay`: drive this main phase instead of the
    seeded one (`kraftwerk replay`: a stored schedule, given the fresh cluster's leaders).

    Raises BackendError (the backend cannot run here) or ClusterNotReady; Ctrl-C/SIGTERM unwind
    through every `with`, so the cluster is healed, stopped and removed on every way out.
    """
    started = time.monotonic()
    progress = Progress(quiet)
    backend = make_backend(args, progress.say)
    stats: dict[str, Any] = {"backend": args.backend, "seed": args.seed}
    with backend:
        creating = time.monotonic()
        hosts = backend.create([f"n{i}" for i in range(1, args.nodes + 1)])
        stats["cluster"] = backend.cluster_id
        stats["hosts-seconds"] = round(time.monotonic() - creating, 2)
        records = [_host_record(backend, h) for h in hosts]
        write_json(run_dir / "cluster.json", {"backend": args.backend, "cluster": backend.cluster_id, "hosts": records})
        progress.say(f"{args.backend} cluster {backend.cluster_id}: {len(hosts)} hosts in {stats['hosts-seconds']}s")
        workload = make_workload(args.workload, [h.name for h in hosts], args.seed, OP_TIMEOUT, args)
        db, nemesis = _assemble(args, backend, hosts, workload, replay)
        progress.faults = nemesis.active
        with contextlib.ExitStack() as stack:
            stack.callback(nemesis.teardown)
            t = time.monotonic()
            parallel(nemesis.setup, db.setup)
            stats["setup-seconds"] = round(time.monotonic() - t, 2)
            t = time.monotonic()
            with db:
                stats["start-seconds"] = round(time.monotonic() - t, 2)
                try:
                    interp = _drive(args, run_dir, db, nemesis, workload, progress, stats, creating, replay)
                except ClusterNotReady:
                    with contextlib.suppress(Exception):
                        db.collect(run_dir)
                    raise
                t = time.monotonic()
                events, logs, notes = db.collect(run_dir)
                stats["collect-seconds"] = round(time.monotonic() - t, 2)
    stats["wall-seconds"] = round(time.monotonic() - started, 2)
    _write_run(args, run_dir, interp, events, logs, stats)
    if any(notes.values()):
        stats["collect-notes"] = notes
    progress.say("checking…")
    history = interp.recorder.history(str(run_dir / "history.jsonl"))
    t = time.monotonic()
    # as in the simulator: a node that stopped itself on an illegal state is a finding of its own
    fatal = [{"node": n, "reason": r} for n, reasons in sorted(notes["fatal"].items()) for r in reasons]
    invariants = {"valid": False, "anomaly-types": ["node-fatal"], "node-fatal": fatal} if fatal else None
    results = check_run(
        history,
        events,
        logs,
        invariants,
        workload.model,
        args.check_time_limit,
        partition_logs=db.partition_logs,  # queue: the brokers' committed partition batches
        allow=args.allow,
    )
    stats["check-seconds"] = round(time.monotonic() - t, 2)
    results["run"] = stats
    return results, history


def make_db(args: TestSpec, backend: Backend, hosts: list[Host], workload: Workload) -> DB:
    """The DB `args.db` names on these hosts: our nodes (brokers too for a Kafka workload), or etcd."""
    if args.db == "etcd":
        from harness.db.etcd import EtcdDB

        return EtcdDB(
            hosts,
            token=f"kraftwerk-{backend.cluster_id}",
            ports=getattr(backend, "ports", None),
            listen_any=backend.listen_any,
            read=args.etcd_read,
            clock="clock" in args.nemeses,
        )
    brokers = workload.api == "kafka"  # the nodes are brokers too (Kafka clients on the client listener)
    return NodeDB(
        hosts,
        bugs=list(args.bugs),
        seed=args.seed,
        ports=getattr(backend, "ports", None),
        listen_any=backend.listen_any,
        broker=brokers,
        properties={
            **(broker_properties(workload.options()) if brokers else {}),
            **({"kraftwerk.volatile.writes": "true"} if args.lose_unsynced else {}),
            **({"kraftwerk.fsync.delay.ms": str(args.fsync_delay)} if args.fsync_delay else {}),
            "clock.source": args.clock_source,
            **({"kraftwerk.lease.reads": "true"} if args.lease_reads else {}),
        },
    )


def _assemble(
    args: TestSpec, backend: Backend, hosts: list[Host], workload: Workload, replay: ReplayMain | None = None
) -> tuple[DB, RunnerNemesis]:
    """The DB and the nemesis of these hosts, wired together (restarts get the clock env)."""
    db = make_db(args, backend, hosts, workload)
    brokers = isinstance(db, NodeDB) and db.broker
    partition = backend.partition_nemesis(hosts) if cuts_links(args.nemeses) else None
    packet = backend.packet_nemesis(hosts) if "packet" in args.nemeses else None
    nemesis = RunnerNemesis(
        hosts,
        db.spec,
        args.nemeses,
        leader=db.partition_leader if brokers else db.leader,
        rng=stream("nemesis-run", args.seed),
        partition=partition,
        packet=packet,
        # a replay: a restart completes once the node answers, as a simulated restart serves at once
        serving=db.wait_serving if replay is not None else None,
        data_dir=getattr(db, "data_dir", None),
    )
    db.env = lambda h: {**nemesis.clock_env(h), **backend.node_env(h)}
    return db, nemesis


def _drive(
    args: TestSpec,
    run_dir: Path,
    db: DB,
    nemesis: RunnerNemesis,
    workload: Any,
    progress: Progress,
    stats: dict[str, Any],
    creating: float,
    replay: ReplayMain | None = None,
) -> Interpreter:
    """Wait for the cluster, then run every phase on one event loop; the interpreter that did it."""
    loop = asyncio.Runner()
    try:
        with progress:
            return _drive_on(loop, args, run_dir, db, nemesis, workload, progress, stats, creating, replay)
    finally:
        close_loop(loop, log=progress.say)


def _drive_on(
    loop: asyncio.Runner,
    args: TestSpec,
    run_dir: Path,
    db: DB,
    nemesis: RunnerNemesis,
    workload: Any,
    progress: Progress,
    stats: dict[str, Any],
    creating: float,
    replay: ReplayMain | None = None,
) -> Interpreter:
    leader, ready = loop.run(db.wait_ready(READY_TIMEOUT))
    stats["election-seconds"] = round(ready, 2)
    if replay is not None:
        replay.prepare(leader, workload)
    topic = loop.run(_setup(workload, db, args))
    if topic:
        stats["topic-seconds"] = round(topic, 2)
    stats["ready-seconds"] = round(time.monotonic() - creating, 2)
    progress.say(
        f"cluster ready {stats['ready-seconds']:.1f}s after creating the hosts "
        f"(leader {leader} elected and known to every node {ready:.1f}s after the nodes started)"
    )
    clock = monotonic_clock()
    interp = Interpreter(
        args.concurrency,
        workload.client,
        nemesis.apply,
        Recorder(clock, run_dir / "history.jsonl"),
        clock,
        transport=db.transport(args.seed),
        rng=stream("interpreter", args.seed),
        listener=progress.on_event,
        log=progress.say,
    )
    try:
        _phases(loop, interp, workload, nemesis, db, args, progress, stats, leader, replay)
    finally:
        interp.recorder.close()
    loop.run(interp.close())
    return interp


async def _setup(workload: Any, db: DB, args: TestSpec) -> float:
    """The workload's setup phase (its ops are not part of the history); seconds taken."""
    setup = workload.setup()
    if setup is None:
        return 0.0
    started = time.monotonic()
    clock = monotonic_clock()
    interp = Interpreter(
        args.concurrency,
        workload.client,
        None,
        Recorder(clock),
        clock,
        transport=db.transport(args.seed),
        rng=stream("setup", args.seed),
    )
    try:
        await asyncio.wait_for(interp.run(gen.clients(setup)), READY_TIMEOUT)
    except TimeoutError:
        why = getattr(workload, "setup_error", "")  # the last reason it gave, if it keeps one
        raise ClusterNotReady(f"{workload.name} setup unfinished after {READY_TIMEOUT:g}s: {why}") from None
    finally:
        await interp.close()
    return time.monotonic() - started


def _write_run(
    args: TestSpec,
    run_dir: Path,
    interp: Interpreter,
    events: list[dict[str, Any]],
    logs: dict[str, list[dict[str, Any]]],
    stats: dict[str, Any],
) -> None:
    """events.jsonl, logs/<node>.jsonl and schedule.json (what was really done, in the simulator's shape)."""
    write_jsonl(run_dir / "events.jsonl", events)
    for node, entries in logs.items():
        write_jsonl(run_dir / "logs" / f"{node}.jsonl", entries)
    realised = interp.nemesis_log
    write_json(
        run_dir / "schedule.json",
        {
            "format": SCHEDULE_FORMAT,
            "workload": args.workload,
            "backend": args.backend,
            "seed": args.seed,
            "nodes": args.nodes,
            "concurrency": args.concurrency,
            "time-limit": args.time_limit,
            "bugs": list(args.bugs),
            "nemesis": [e for e in realised if e.get("package")],
            "heal": [e for e in realised if not e.get("package")],
            "ops": sorted(interp.ops[: stats.pop("main-ops")], key=lambda o: o["at"]),
        },
    )
    stats["nemesis-errors"] = [e for e in realised if e.get("error")]
    stats["history-sha256"] = interp.recorder.digest()


def _phases(
    loop: asyncio.Runner,
    interp: Interpreter,
    workload: Any,
    nemesis: RunnerNemesis,
    db: DB,
    args: TestSpec,
    progress: Progress,
    stats: dict[str, Any],
    leader: str | None = None,
    replay: ReplayMain | None = None,
) -> None:
    """Main phase, heal, recovery, final reads (all recorded in the history)."""
    limit = args.time_limit
    if replay is not None:
        main = replay(leader, dict(getattr(workload, "partition_leaders", {})))
    else:
        schedule = generate(
            args.seed, [h.name for h in db.hosts], list(args.nemeses), limit, args.interval, args.partition_kinds
        )
        main = gen.any_of(
            client_phase(workload, limit, args.rate),
            gen.nemesis(gen.time_limit(limit, gen.schedule(schedule))),
        )
    progress.set_phase("main", limit)
    t = time.monotonic()
    loop.run(interp.run(main))
    stats["main-seconds"] = round(time.monotonic() - t, 2)
    stats["main-ops"] = len(interp.ops)
    stats["operations"] = len(interp.ops)
    stats["ops-per-second"] = round(len(interp.ops) / max(stats["main-seconds"], 1e-9), 1)

    progress.set_phase("heal")
    loop.run(interp.run(gen.nemesis(nemesis.heal_ops())))
    progress.set_phase("recover", RECOVERY_TIMEOUT)
    t = time.monotonic()
    # every node the nemesis stopped is running again; one that is not stopped by itself (a crash or a
    # fatal safety check): wait for the others only, and not at all without a majority
    running = [name for name, up in db.running().items() if up]
    down = sorted(set(h.name for h in db.hosts) - set(running))
    if down:
        stats["exited-by-themselves"] = down
        progress.say(f"warning: {', '.join(down)} exited on their own (see nodes/<node>/node.log)")
    recovered = len(running) > len(db.hosts) // 2
    if recovered:
        try:
            leader, _ = loop.run(db.wait_ready(RECOVERY_TIMEOUT, running))
            progress.say(f"healed; leader {leader} known to every running node after {time.monotonic() - t:.1f}s")
        except ClusterNotReady as e:
            recovered = False
            progress.say(f"warning: not recovered: {e}")
    # `kraftwerk replay` of a simulator run: its final reads came a fixed time after the heal; so do ours
    settle = t + args.settle - time.monotonic()
    if recovered and settle > 0:
        progress.say(f"waiting {settle:.1f}s more before the final reads, as the replayed run did")
        loop.run(asyncio.sleep(settle))
    stats["recovered"] = recovered
    stats["recovery-seconds"] = round(time.monotonic() - t, 2)

    keys = sorted({o["key"] for o in interp.ops if o.get("key") is not None}, key=lambda k: (len(str(k)), str(k)))
    final = workload.final(keys, args.concurrency) if len(running) > len(db.hosts) // 2 else None
    progress.set_phase("final", FINAL_SECONDS)
    start = len(interp.recorder.ops)
    t = time.monotonic()
    if final is not None:
        loop.run(interp.run(gen.clients(gen.time_limit(FINAL_SECONDS, final))))
    stats["final-seconds"] = round(time.monotonic() - t, 2)
    read = {op.key for op in interp.recorder.ops[start:] if op.type == "ok" and op.f in ("read", "poll")}
    stats["unread-keys"] = [k for k in keys if k not in read]
    stats["operations"] = len(interp.ops)
    stats["nemesis-events"] = len(interp.nemesis_log)
    progress.set_phase("done")
