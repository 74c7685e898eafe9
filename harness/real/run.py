"""One chaos test on a real cluster (docker, netns, local or ssh): `RealRuntime`, the real side of the
`harness.core.runtime.Runtime` port, on which `harness.core.run.run_test` runs the test's phases.

Entering the runtime creates the backend's hosts (containers, namespaces, loopback addresses, SSH hosts),
sets up the nemesis (iptables chains, libfaketime files) and the DB (`--db`, built by its entry in
harness.db.registry: our nodes' node.properties, say), and starts every node; clients reach the nodes
through the DB's transport.
`run_test` then waits for a leader known to every node, runs the workload's setup, the main phase (clients
at a staggered rate while the seeded schedule, harness.nemesis.schedule.generate, injects faults —
any_of(clients, nemesis), each under the time limit — or `kraftwerk replay`'s stored schedule), heals
(stop partitions, resume, restart killed nodes, reset clocks: nemesis ops), waits for recovery (the
settle, then a leader known to every running node), reads every key back, collects (stop the nodes,
copy their files, dump committed logs) and checks. Leaving the runtime tears everything down. A node that
stopped itself on an illegal state (its raft core's Fatal, exit 3) makes the run invalid (`node-fatal`),
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
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from checkers.history import History
from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL, exit_code
from harness.core.interpreter import client_phase
from harness.core.phases import PHASES, Phases
from harness.core.recorder import Recorder
from harness.core.run import run_test
from harness.core.runtime import SETTLE_READY, Collected
from harness.core.spec import TestSpec
from harness.core.streams import stream
from harness.db import registry as dbs
from harness.db.protocol import DB, ClusterNotReady
from harness.nemesis.schedule import cuts_links, generate
from harness.real.backends import registry
from harness.real.backends.base import Backend, BackendError, Host
from harness.real.interpreter import Interpreter, close_loop, monotonic_clock
from harness.real.nemesis import RunnerNemesis, parallel
from harness.real.progress import Progress
from harness.store.runs import RunDir, write_json
from harness.store.schedule import document
from harness.store.summary import print_verdict
from workloads import generator as gen
from workloads.protocol import Workload

T = TypeVar("T")


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
    if h.name in backend.ports:
        rec["ports"] = list(backend.ports[h.name])
    return rec


def run_real(
    args: TestSpec, run_dir: Path, quiet: bool = False, replay: ReplayMain | None = None
) -> tuple[dict[str, Any], History]:
    """Run the test `args` on its real backend and store it in `run_dir` (harness.core.run.run_test on a
    RealRuntime); returns (results, history). `replay`: drive this main phase instead of the seeded one
    (`kraftwerk replay`: a stored schedule, given the fresh cluster's leaders).

    Raises BackendError (the backend cannot run here) or ClusterNotReady; Ctrl-C/SIGTERM unwind
    through every `with`, so the cluster is healed, stopped and removed on every way out.
    """
    run = run_test(args, RealRuntime(args, run_dir, quiet=quiet, replay=replay), RunDir(run_dir))
    return run.results, run.history


def make_db(args: TestSpec, backend: Backend, hosts: list[Host], workload: Workload) -> DB:
    """The DB `args.db` names on these hosts, built by its registry entry (harness.db.registry)."""
    context = dbs.DBContext(
        hosts=hosts,
        ports=backend.ports,
        listen_any=backend.listen_any,
        seed=args.seed,
        bugs=tuple(args.bugs),
        workload=workload,
        options=args.db_options,
        nemeses=tuple(args.nemeses),
        cluster_id=backend.cluster_id,
        shape=args.shape,
    )
    return dbs.kind(args.db).factory(context)


def assemble(
    args: TestSpec, backend: Backend, hosts: list[Host], workload: Workload, replay: ReplayMain | None = None
) -> tuple[DB, RunnerNemesis]:
    """The DB and the nemesis of these hosts, wired together (restarts get the clock env)."""
    db = make_db(args, backend, hosts, workload)
    # a replay: a restart completes once the node answers, as a simulated restart serves at once
    nemesis = make_nemesis(args, backend, hosts, db, serving=replay is not None)
    db.env = lambda h: {**nemesis.clock_env(h), **backend.node_env(h)}
    return db, nemesis


def make_nemesis(
    args: TestSpec, backend: Backend, hosts: list[Host], db: DB, *, serving: bool = False
) -> RunnerNemesis:
    """The nemesis of `args.nemeses` over these hosts and their DB (a test's, or a cluster left running's:
    harness.chaos). `serving`: a restart completes only once the restarted nodes answer."""
    return RunnerNemesis(
        hosts,
        db.spec,
        args.nemeses,
        leader=db.partition_leader,  # the quorum leader, or the busiest partition leader of a DB with partitions
        controller=db.leader,  # the quorum leader: the active controller
        groups=args.shape.groups(),
        rng=stream("nemesis-run", args.seed),
        partition=backend.partition_nemesis(hosts) if cuts_links(args.nemeses) else None,
        packet=backend.packet_nemesis(hosts) if "packet" in args.nemeses else None,
        serving=db.wait_serving if serving else None,
        data_dir=db.data_dir,
    )


class RealRuntime:
    """A real cluster of `spec.backend` as a `harness.core.runtime.Runtime`: hosts, the DB (`--db`) and the
    nemesis, driven on one asyncio loop. Entering it creates the hosts, sets up the nemesis and the DB and
    starts every node; leaving it heals, stops and removes everything. `replay`: `kraftwerk replay`'s
    stored schedule as the main phase (fitted to the fresh cluster's leaders) instead of the seeded one.
    `run_dir` receives cluster.json and what the DB copies from its hosts (nodes/<node>/).

    What is a real cluster's own, behind the port: real time; faults driven through the interpreter's
    nemesis thread (and healed through it); a cluster probed at least once (for a second) when asked
    whether it is ready; the history's clock started when the main phase begins.
    """

    recovery = SETTLE_READY

    def __init__(
        self,
        spec: TestSpec,
        run_dir: str | Path,
        *,
        quiet: bool = False,
        replay: ReplayMain | None = None,
        phases: Phases = PHASES,
    ) -> None:
        self.spec = spec
        self.run_dir = Path(run_dir)
        self.replay = replay
        self.phases = phases
        self.progress = Progress(quiet)
        self.backend = make_backend(spec, self.progress.say)  # BackendError if it cannot run here
        self.names = [f"n{i}" for i in range(1, spec.nodes + 1)]
        self.stats: dict[str, Any] = {"backend": spec.backend, "seed": spec.seed}
        self.interp: Interpreter | None = None
        self._stack = contextlib.ExitStack()
        self._loop: asyncio.Runner | None = None
        self._started = self._creating = 0.0
        self._t0: int | None = None  # the history's clock: monotonic ns when the main phase began
        self._leader: str | None = None
        self._election = 0.0
        self._main_ops = 0
        self._collected = False

    def __enter__(self) -> RealRuntime:
        spec, backend, stack, stats = self.spec, self.backend, self._stack, self.stats
        self._started = time.monotonic()
        try:
            stack.enter_context(backend)
            self._creating = time.monotonic()
            hosts = backend.create(self.names, ports_per_host=dbs.kind(spec.db).ports)
            stats["cluster"] = backend.cluster_id
            stats["hosts-seconds"] = round(time.monotonic() - self._creating, 2)
            records = [_host_record(backend, h) for h in hosts]
            write_json(
                self.run_dir / "cluster.json",
                {"backend": spec.backend, "cluster": backend.cluster_id, "hosts": records},
            )
            self.log(f"{spec.backend} cluster {backend.cluster_id}: {len(hosts)} hosts in {stats['hosts-seconds']}s")
            # the clients talk to the nodes that serve them: the brokers (every node but in a dedicated layout)
            serving = [h.name for h in hosts if h.name in spec.shape.broker_names]
            self.workload = spec.make_workload(serving, self.phases.op_timeout)
            self.db, self.nemesis = assemble(spec, backend, hosts, self.workload, self.replay)
            self.progress.faults = self.nemesis.active
            stack.callback(self.nemesis.teardown)
            t = time.monotonic()
            parallel(self.nemesis.setup, self.db.setup)
            stats["setup-seconds"] = round(time.monotonic() - t, 2)
            t = time.monotonic()
            stack.enter_context(self.db)
            stats["start-seconds"] = round(time.monotonic() - t, 2)
            self._loop = asyncio.Runner()
            stack.callback(self._close_loop)
            stack.enter_context(self.progress)
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if kind is not None and issubclass(kind, ClusterNotReady) and not self._collected:
                self._close_loop()
                with contextlib.suppress(Exception):  # what the nodes said about it
                    self.db.collect(self.run_dir)
        finally:
            self._stack.__exit__(kind, error, tb)
            self.stats["wall-seconds"] = round(time.monotonic() - self._started, 2)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "the runtime is not entered"
        return self._loop.run(coroutine)

    def _close_loop(self, clients: bool = False) -> None:
        """Stop the progress display and close the event loop, once (`clients`: close the clients first, on
        the way to collecting; any other way out cancels whatever runs)."""
        if self._loop is None:
            return
        try:
            if clients and self.interp is not None:
                self._loop.run(self.interp.close())
        finally:
            self.progress.__exit__(None, None, None)
            close_loop(self._loop, log=self.progress.say)
            self._loop = None

    def now(self) -> int:
        return 0 if self._t0 is None else time.monotonic_ns() - self._t0

    def log(self, message: str) -> None:
        self.progress.say(message)

    def set_phase(self, name: str, seconds: float | None = None) -> None:
        self.progress.set_phase(name, seconds)

    def wait_ready(self, timeout: float, nodes: Sequence[str] | None = None) -> str | None:
        leader, seconds = self._run(self.db.wait_ready(max(timeout, 1.0), nodes))
        if self.interp is None:  # the fresh cluster
            self._leader, self._election = leader, seconds
            self.stats["election-seconds"] = round(seconds, 2)
        return leader

    def prepare(self, leader: str | None) -> None:
        if self.replay is not None:
            self.replay.prepare(leader, self.workload)

    def setup(self, generator: gen.Generator, timeout: float) -> None:
        self.stats["topic-seconds"] = round(self._run(self._setup(generator, timeout)), 2)

    async def _setup(self, generator: gen.Generator, timeout: float) -> float:
        """The workload's setup on clients of its own (its ops are not part of the history); seconds taken."""
        started = time.monotonic()
        clock = monotonic_clock()
        interp = Interpreter(
            self.spec.concurrency,
            self.workload.client,
            None,
            Recorder(clock),
            clock,
            transport=self.db.transport(self.spec.seed),
            rng=stream("setup", self.spec.seed),
        )
        try:
            await asyncio.wait_for(interp.run(gen.clients(generator)), timeout)
        except TimeoutError:
            why = getattr(self.workload, "setup_error", "")  # the last reason it gave, if it keeps one
            raise ClusterNotReady(f"{self.workload.name} setup unfinished after {timeout:g}s: {why}") from None
        finally:
            await interp.close()
        return time.monotonic() - started

    def main(self, recorder: Recorder, time_limit: float) -> int:
        """The seeded main phase — any_of(clients, nemesis), each under the time limit — or the replay's."""
        spec, stats = self.spec, self.stats
        stats["ready-seconds"] = round(time.monotonic() - self._creating, 2)
        self.log(
            f"cluster ready {stats['ready-seconds']:.1f}s after creating the hosts (leader {self._leader} elected "
            f"and known to every node {self._election:.1f}s after the nodes started)"
        )
        self._t0 = time.monotonic_ns()  # the history's clock starts
        self.interp = interp = Interpreter(
            spec.concurrency,
            self.workload.client,
            self.nemesis.apply,
            recorder,
            self.now,
            transport=self.db.transport(spec.seed),
            rng=stream("interpreter", spec.seed),
            listener=self.progress.on_event,
            log=self.progress.say,
        )
        if self.replay is not None:
            main = self.replay(self._leader, dict(getattr(self.workload, "partition_leaders", {})))
        else:
            schedule = generate(
                spec.seed,
                self.names,
                list(spec.nemeses),
                time_limit,
                spec.interval,
                spec.partition_kinds,
                roles=spec.shape.separate,
            )
            main = gen.any_of(
                client_phase(self.workload, time_limit, spec.rate),
                gen.nemesis(gen.time_limit(time_limit, gen.schedule(schedule))),
            )
        start = self.now()
        t = time.monotonic()
        self._run(interp.run(main))
        stats["main-seconds"] = round(time.monotonic() - t, 2)
        self._main_ops = len(interp.ops)
        stats["operations"] = len(interp.ops)
        stats["ops-per-second"] = round(len(interp.ops) / max(stats["main-seconds"], 1e-9), 1)
        return start

    def heal(self) -> None:
        assert self.interp is not None
        self._run(self.interp.run(gen.nemesis(self.nemesis.heal_ops())))

    def sleep_until(self, time: int) -> None:
        delay = (time - self.now()) / 1e9
        if delay > 0:
            self._run(asyncio.sleep(delay))

    def running(self) -> list[str]:
        return [name for name, up in self.db.running().items() if up]

    def ops(self) -> list[dict[str, Any]]:
        return self.interp.ops if self.interp is not None else []

    def final(self, generator: gen.Generator | None, seconds: float) -> None:
        """The final reads (under their time limit, in `generator`); they end once every operation has."""
        assert self.interp is not None
        t = time.monotonic()
        if generator is not None:
            self._run(self.interp.run(generator))
        self.stats["final-seconds"] = round(time.monotonic() - t, 2)
        self.stats["operations"] = len(self.interp.ops)
        self.stats["nemesis-events"] = len(self.interp.nemesis_log)

    def collect(self) -> Collected:
        """Stop the nodes, gather their events, logs and dumps (and copy their files into nodes/<node>/)."""
        self._close_loop(clients=True)
        t = time.monotonic()
        events, logs, notes = self.db.collect(self.run_dir)
        self._collected = True
        self.stats["collect-seconds"] = round(time.monotonic() - t, 2)
        if any(notes.values()):
            self.stats["collect-notes"] = notes
        # as in the simulator: a node that stopped itself on an illegal state is a finding of its own
        fatal = [{"node": n, "reason": r} for n, reasons in sorted(notes.get("fatal", {}).items()) for r in reasons]
        return Collected(events, logs, dict(self.db.partition_logs), None, fatal, notes)

    def schedule_document(self) -> dict[str, Any]:
        """What was really done (every nemesis event with resolved targets and time, every client op of the main
        phase with its node and time), in the simulator's shape."""
        spec = self.spec
        realised = self.interp.nemesis_log if self.interp is not None else []
        self.stats["nemesis-errors"] = [e for e in realised if e.get("error")]
        ops = self.interp.ops[: self._main_ops] if self.interp is not None else []
        return document(
            spec,
            nemesis=[e for e in realised if e.get("package")],
            heal=[e for e in realised if not e.get("package")],
            ops=sorted(ops, key=lambda o: o["at"]),
        )


def runnable_problem(spec: TestSpec) -> str | None:
    """Why this machine cannot run `spec` (what its DB or its backend lacks here, or faults it cannot inject),
    or None. What no machine could run is refused when the spec is built (TestSpec.problem)."""
    if spec.backend == "sim":
        return None
    problem = dbs.kind(spec.db).why_not(spec.backend, spec.nemeses)
    if problem:
        return problem
    return registry.why_not(spec.backend, nemeses=spec.nemeses, ssh_hosts=spec.ssh_hosts, nodes=spec.nodes)


def run_real_test(
    spec: TestSpec,
    run_dir: Path,
    replay: str,
    quiet: bool = False,
    main: ReplayMain | None = None,
    verb: str = "test",
) -> int:
    """A run on docker/netns/local/ssh (harness.real): the same phases (harness.core.run.run_test), store
    layout, report and exit code. `main`: `kraftwerk replay`'s stored schedule instead of the seeded one."""
    from harness.real.faults.net import PacketFaultUnsupported

    try:
        runtime = RealRuntime(spec, run_dir, quiet=quiet, replay=main)
        run = run_test(spec, runtime, RunDir(run_dir, {"run-dir": str(run_dir), "reproduce": replay}))
    except PacketFaultUnsupported as e:  # the hosts cannot inject a fault the options ask for
        print(f"kraftwerk {verb}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (BackendError, ClusterNotReady) as e:
        print(f"kraftwerk {verb}: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    print_verdict(run.results, run_dir, replay)
    return exit_code(run.results["valid"])
