"""`ChaosCluster`: our Kafka-speaking nodes on a real backend, with the nemesis's faults at hand.

For people who test their own Kafka application: the cluster is the one `kraftwerk test --workload queue`
starts (same backend, DB and node settings), and every fault method is one schedule event handed to the
nemesis interpreter over the real `Faults` port, exactly as a test's nemesis does, so there is no second
implementation of any fault. Targets are the nemesis's own: ``"leader"`` (the quorum leader, or with
``topic=`` a partition's leader), ``"all"``, a node name (``"n2"``) or a list of names.

    with ChaosCluster(backend="local", nodes=3) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        kafka.kill("leader", topic="orders")     # SIGKILL the leader of orders/0
        kafka.partition("halves")                # or a grudge: {"n1": ["n2", "n3"], …}
        kafka.heal()                             # every fault in force, healed
    # leaving: healed, stopped and removed, whatever the test did

`ChaosCluster.attach(DIR)` takes over a cluster ``kraftwerk cluster up`` left running instead: leaving heals
the faults and leaves the nodes running (harness.chaos.keeper holds one for ``kraftwerk cluster pause`` and
the other fault verbs).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core.shape import Shape
from harness.core.spec import SpecError, TestSpec
from harness.db import registry as dbs
from harness.db.nodes import NodeDB, metadata_at
from harness.nemesis.schedule import PACKAGES
from harness.real.backends import registry
from harness.real.backends.base import BackendError
from harness.real.cluster_local import ClusterError
from harness.real.cluster_remote import attach as attach_cluster
from harness.real.run import assemble, make_backend, make_nemesis, runnable_problem

__all__ = ["ChaosCluster", "ChaosError"]

Target = str | Sequence[str]
FAULTS = tuple(p for p in PACKAGES if p != "disk")  # the packages a chaos cluster offers
# the packages of a cluster left running: its nodes are killed and started by `kraftwerk cluster kill|start`
LEFT_RUNNING_FAULTS = tuple(p for p in FAULTS if p != "kill")
READY_TIMEOUT = 60.0


def _view(status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The part of a node's AdminDescribe status a person reads: None if it did not answer."""
    if status is None:
        return None
    broker = status.get("broker") or {}
    keys = ("pid", "role", "epoch", "leader", "high_watermark", "log_end_offset")
    return {**{k: status.get(k) for k in keys}, "fenced": broker.get("fenced")}


class ChaosError(RuntimeError):
    """A fault this cluster cannot inject here (the message says why), or a cluster that did not come up."""


class ChaosCluster:
    """``nodes`` combined controller+broker nodes on ``backend`` (local processes by default, or docker
    containers, or network namespaces), with ``bugs`` seeded if asked. Faults this machine cannot inject on
    that backend are left out (``unavailable`` says why) and refused when asked for."""

    def __init__(
        self,
        backend: str = "local",
        nodes: int = 3,
        *,
        bugs: Sequence[str] = (),
        seed: int = 0,
        log: Callable[[str], None] | None = None,
        _left_running: Path | None = None,
    ) -> None:
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.directory = _left_running
        offered = FAULTS if _left_running is None else LEFT_RUNNING_FAULTS
        self.unavailable: dict[str, str] = {}
        for package in FAULTS:
            why = registry.why_not(backend, nemeses=(package,), nodes=nodes)
            if package not in offered:
                why = f"a cluster left running is killed and started with 'kraftwerk cluster {package}|start'"
            if why:
                self.unavailable[package] = why
        packages = tuple(p for p in FAULTS if p not in self.unavailable)
        try:
            self.spec = TestSpec.of(
                workload="queue", backend=backend, nodes=nodes, bugs=tuple(bugs), nemeses=packages, seed=seed
            )
        except SpecError as e:
            raise ChaosError(str(e)) from None
        problem = runnable_problem(self.spec)
        if problem:
            raise ChaosError(problem)
        self.names = [f"n{i}" for i in range(1, nodes + 1)]
        self._stack = contextlib.ExitStack()
        self.db: NodeDB
        if _left_running is not None:
            return
        try:
            self.backend = make_backend(self.spec, self.log)
        except BackendError as e:  # the backend cannot run on this machine
            raise ChaosError(str(e)) from None

    @classmethod
    def attach(cls, directory: Path, *, log: Callable[[str], None] | None = None) -> ChaosCluster:
        """The cluster ``kraftwerk cluster up --dir DIR`` left running, with the faults of this module; entering
        sets the nemesis up over its nodes, leaving heals every fault and leaves the nodes running. ChaosError
        if DIR holds no cluster."""
        try:
            doc, backend, hosts, db = attach_cluster(Path(directory))
        except ClusterError as e:
            raise ChaosError(str(e)) from None
        self = cls(doc["backend"], len(hosts), bugs=doc.get("bugs") or (), log=log, _left_running=Path(directory))
        shape = Shape.from_record(doc.get("shape"), len(hosts))  # the "controllers"/"brokers" targets
        workload = self.spec.workload_options  # no workload runs here: its replication factor need only fit
        rf = min(workload.replication_factor, len(shape.broker_names))  # type: ignore[attr-defined]
        self.spec = replace(
            self.spec,
            controllers=shape.controllers,
            controller_roles=shape.roles,
            workload_options=replace(workload, replication_factor=rf),
        )
        if "clock" not in self.unavailable and not doc.get("faketime"):
            self.unavailable["clock"] = (
                "this cluster's nodes run without libfaketime (it was not found at 'cluster up')"
            )
            self.spec = replace(self.spec, nemeses=tuple(p for p in self.spec.nemeses if p != "clock"))
        self.backend, self._hosts, self.db = backend, hosts, db
        return self

    # ------------------------------------------------------------------ life cycle
    def __enter__(self) -> ChaosCluster:
        stack = self._stack
        if self.directory is not None:
            self.nemesis = make_nemesis(self.spec, self.backend, self._hosts, self.db)
            try:
                stack.callback(self.nemesis.teardown)
                self.nemesis.setup()
                stack.callback(self._heal_quietly)
            except BaseException:
                stack.close()
                raise
            return self
        try:
            stack.enter_context(self.backend)
            hosts = self.backend.create(self.names, ports_per_host=dbs.kind(self.spec.db).ports)
            workload = self.spec.make_workload([h.name for h in hosts], 10.0)
            db, self.nemesis = assemble(self.spec, self.backend, hosts, workload)
            assert isinstance(db, NodeDB)
            self.db = db
            stack.callback(self.nemesis.teardown)
            self.nemesis.setup()
            db.setup()
            stack.enter_context(db)
            stack.callback(self._heal_quietly)
            leader, seconds = asyncio.run(db.wait_ready(READY_TIMEOUT))
            self.log(f"kafka_chaos: {len(hosts)} nodes on {self.spec.backend} up in {seconds:.1f} s, leader {leader}")
        except BaseException:
            stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def close(self) -> None:
        """Heal, stop and remove the cluster (what leaving the ``with`` does)."""
        self._stack.close()

    def _heal_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.heal()

    # ------------------------------------------------------------------ what clients need
    @property
    def bootstrap_servers(self) -> str:
        """``host:port,…`` of every broker's client listener (kafka-python's ``bootstrap_servers``, librdkafka's
        ``bootstrap.servers``): the brokers, as ``cluster up`` prints them."""
        brokers = set(self.db.broker_names())
        return ",".join(f"{h.address}:{self.db.client_port(h)}" for h in self.db.hosts if h.name in brokers)

    def leader(self, topic: str | None = None, partition: int = 0) -> str | None:
        """The node that leads ``topic``'s ``partition`` now (Kafka Metadata), or without a topic the quorum
        leader; None if there is none."""
        if topic is None:
            return asyncio.run(self.db.leader())
        return self.db.partition_leader_now(topic, partition)

    def status(self) -> dict[str, Any]:
        """The quorum leader, each node's view (epoch, role, broker state), every partition's leader and ISR
        (Kafka Metadata of the first node that answers) and the faults in force."""
        views = asyncio.run(self.db.describe_all(timeout=0.5))
        leader = NodeDB.leader_of(views)[0]
        nodes = {n: _view(v) for n, v in views.items()}
        partitions = self.partitions(first=leader)
        status = {"leader": leader, "nodes": nodes, "partitions": partitions, "faults": self.nemesis.active()}
        if "clock" in status["faults"]:  # what the nodes' own clocks read, measured on their hosts
            status["clock-offsets-ms"] = self.nemesis.clock.check_offsets()
        return status

    def partitions(self, first: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """{topic: [{"partition", "leader", "leader-epoch", "replicas", "isr"}, …]} as Kafka Metadata says, asking
        ``first`` before the other nodes; {} if no node answers."""
        endpoints = self.db.endpoints()
        order = sorted(endpoints, key=lambda n: n != first)
        for name in order:
            md = metadata_at(*endpoints[name], None, timeout=1.0)
            if md is None:
                continue
            return {
                t.name: [
                    {
                        "partition": p.partition_index,
                        "leader": f"n{p.leader_id}" if p.leader_id >= 0 else None,
                        "leader-epoch": p.leader_epoch,
                        "replicas": [f"n{i}" for i in p.replica_nodes],
                        "isr": [f"n{i}" for i in p.isr_nodes],
                    }
                    for p in sorted(t.partitions, key=lambda p: p.partition_index)
                ]
                for t in sorted(md.topics, key=lambda t: t.name)
                if not t.error_code
            }
        return {}

    # ------------------------------------------------------------------ faults (the nemesis's own events)
    def kill(self, target: Target = "leader", *, topic: str | None = None, partition: int = 0) -> list[str]:
        """SIGKILL the target nodes; the names killed."""
        return list(self._apply("kill", "kill", self._target(target, topic, partition)) or [])

    def start(self, target: Target | None = None) -> list[str]:
        """Start killed nodes again (default: every one the cluster killed) and wait until they answer."""
        started = list(self._apply("kill", "start", target) or [])
        if started and not asyncio.run(self.db.wait_serving(started, timeout=READY_TIMEOUT)):
            raise ChaosError(f"{', '.join(started)} did not answer within {READY_TIMEOUT:g} s of their start")
        return started

    def pause(self, target: Target = "leader", *, topic: str | None = None, partition: int = 0) -> list[str]:
        """SIGSTOP the target nodes; the names paused."""
        return list(self._apply("pause", "pause", self._target(target, topic, partition)) or [])

    def resume(self, target: Target | None = None) -> list[str]:
        """SIGCONT paused nodes (default: every one)."""
        return list(self._apply("pause", "resume", target) or [])

    def partition(self, shape: str | Mapping[str, Sequence[str]] = "halves") -> dict[str, list[str]]:
        """Cut the network: a partition kind of ``--partition-kinds`` (``halves``, ``one``, ``leader``,
        ``majorities-ring``, ``bridge``, ``one-way``) or a grudge (for each node, the nodes it drops packets
        from). Returns the grudge in force."""
        value = {"kind": shape} if isinstance(shape, str) else {"grudge": {k: list(v) for k, v in shape.items()}}
        return dict(self._apply("partition", "start-partition", value) or {})

    def clock(
        self,
        target: Target = "leader",
        *,
        bump_ms: float | None = None,
        drift_ppm: float = 0.0,
        strobe_ms: float | None = None,
        period_ms: float = 10.0,
        seconds: float = 5.0,
        reset: bool = False,
    ) -> Any:
        """Move the targets' wall clocks: step them by ``bump_ms`` (and drift ``drift_ppm``), or strobe them by
        ``strobe_ms`` every ``period_ms`` for ``seconds``, or ``reset`` them (every node by default)."""
        if reset:
            return self._apply("clock", "reset-clock", None if target == "leader" else target)
        nodes = self.names if target == "all" else [target] if isinstance(target, str) else list(target)
        if strobe_ms is not None:
            params = {"delta-ms": strobe_ms, "period-ms": period_ms, "duration-s": seconds}
            return self._apply("clock", "strobe-clock", dict.fromkeys(nodes, params))
        if bump_ms is None:
            raise ChaosError("clock: give bump_ms, strobe_ms or reset=True")
        return self._apply("clock", "bump-clock", dict.fromkeys(nodes, {"delta-ms": bump_ms, "drift-ppm": drift_ppm}))

    def packet(
        self,
        *,
        loss: float | None = None,
        delay_ms: float | None = None,
        jitter_ms: float = 0.0,
        duplicate: float | None = None,
        reorder: float | None = None,
        nodes: Target = "all",
        peers: Target = "all",
    ) -> Any:
        """Packet faults on what ``nodes`` send to ``peers``: ``loss``/``duplicate``/``reorder`` in percent,
        ``delay_ms`` (± ``jitter_ms``)."""
        behaviours: dict[str, Any] = {}
        if loss is not None:
            behaviours["loss"] = {"percent": loss}
        if delay_ms is not None:
            behaviours["delay"] = {"time-ms": delay_ms, "jitter-ms": jitter_ms}
        if duplicate is not None:
            behaviours["duplicate"] = {"percent": duplicate}
        if reorder is not None:
            behaviours["reorder"] = {"percent": reorder}
        if not behaviours:
            raise ChaosError("packet: give at least one of loss, delay_ms, duplicate, reorder")
        return self._apply("packet", "start-packet", {"behaviours": behaviours, "nodes": nodes, "peers": peers})

    def heal(self) -> list[Any]:
        """Undo every fault in force: network, processes, clocks (the nemesis's own heal)."""
        return [self._apply(None, e["f"], e["value"]) for e in self.nemesis.heal_ops()]

    # ------------------------------------------------------------------ plumbing
    def _target(self, target: Target, topic: str | None, partition: int) -> Target:
        if topic is None:
            return target
        if target != "leader":
            raise ChaosError("topic= picks a partition's leader: use it with target 'leader'")
        leader = self.leader(topic, partition)
        if leader is None:
            raise ChaosError(f"{topic}/{partition} has no leader now")
        return [leader]

    def _apply(self, package: str | None, f: str, value: Any) -> Any:
        if package is not None and package in self.unavailable:
            raise ChaosError(self.unavailable[package])
        try:
            applied = asyncio.run(self.nemesis.apply({"f": f, "value": value}))
        except ValueError as e:
            raise ChaosError(f"{f}: {e}") from None
        self.log(f"kafka_chaos: {f} {value if value is not None else ''} -> {applied.recorded}")
        return applied.recorded
