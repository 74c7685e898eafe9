"""`TestSpec`: one test as an immutable value — every option, validated, and its random streams.

Commands build TestSpecs (from their options, a stored `test.json` or a suite entry) and pass
them down; nothing below the command line reads argparse objects. Building one validates it
without side effects: a bad option raises `SpecError` naming it (exit 254). `to_json` is
`test.json` (the keys docs/formats.md "test.json" names; options that do not apply to the workload or
backend are left out), `from_json` reads it back. `spec.rng(name, …)` is the named random
stream of the test's seed (harness.core.streams).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from harness.core.streams import stream
from harness.nemesis.partitions import KINDS
from harness.nemesis.schedule import ALL, PACKAGES, parse_nemeses, parse_partition_kinds
from harness.real.backends import registry
from nodes.runtime.config import CLOCK_SOURCES

if TYPE_CHECKING:
    from workloads.protocol import Workload

BACKENDS = registry.NAMES
WORKLOADS = ("register", "queue")
REAL_WORKLOADS = ("register", "queue")
ACKS = {"all": -1, "1": 1, "0": 0}  # --acks → the producer's acks
DBS = ("kraftwerk", "etcd")  # --db: our KRaft-style nodes, or etcd (harness.db.etcd)
ETCD_READS = ("linearizable", "serializable")  # --etcd-read
SUB_VIA = ("assign", "subscribe")  # --sub-via (workloads.queue.SUB_VIA)


class SpecError(ValueError):
    """A test option that cannot be run: exit 254 with the message (which names the option)."""


@dataclass(frozen=True)
class TestSpec:
    """Every option of one test. Options that do not apply (queue options of a register test, ssh
    options off the ssh backend) take their defaults, so two specs of the same test are equal."""

    __test__ = False  # not a pytest test class

    workload: str = "register"
    backend: str = "sim"
    nemeses: tuple[str, ...] = ALL  # `--nemesis all`: every package but packet
    partition_kinds: tuple[str, ...] = KINDS
    nodes: int = 5
    concurrency: int = 10
    time_limit: float = 60.0  # seconds of faults and load
    interval: float = 5.0  # mean seconds between faults
    seed: int = 0
    bugs: tuple[str, ...] = ()
    lose_unsynced: bool = False
    fsync_delay: int = 0  # ms before each fsync
    check_time_limit: float = 300.0
    # queue workload
    acks: str = "all"
    min_isr: int = 2
    replication_factor: int = 3
    partitions: int = 3
    unclean: bool = False
    allow: tuple[str, ...] = ()
    sub_via: str = "assign"  # assign | subscribe (Jepsen's :sub-via: consumer groups)
    txn: bool = False  # transactions of send and poll micro-ops (Jepsen's :txn), judged by checkers.txn_queue
    # ssh backend
    ssh_hosts: str | None = None
    ssh_user: str = "root"
    ssh_key: str | None = None
    ssh_known_hosts: str | None = None
    name: str = ""  # in the store; "" → WORKLOAD-BACKEND
    settle: float = 0.0  # replays of simulator runs: seconds from the heal to the final reads
    rate: float = 100.0  # client operations per second, all threads together (Jepsen's stagger)
    clock_source: str = "wall"  # the nodes' `clock.source`: what their timers read (wall or monotonic)
    lease_reads: bool = False  # leader leases: the leader answers reads from its state while its lease lasts
    db: str = "kraftwerk"  # the system under test: our nodes, or etcd
    etcd_read: str = "linearizable"  # etcd: how register reads are served (serializable: any member's local state)

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem:
            raise SpecError(problem)
        put = object.__setattr__  # construction of a frozen value: normalise what equal tests spell differently
        put(self, "nemeses", tuple(self.nemeses))
        put(self, "partition_kinds", tuple(self.partition_kinds))
        put(self, "bugs", tuple(sorted(set(self.bugs))))
        put(self, "allow", tuple(self.allow))
        put(self, "time_limit", float(self.time_limit))
        put(self, "interval", float(self.interval))
        put(self, "check_time_limit", float(self.check_time_limit))
        put(self, "settle", float(self.settle))
        put(self, "rate", float(self.rate))
        put(
            self,
            "name",
            self.name or "-".join((self.workload, *(() if self.db == "kraftwerk" else (self.db,)), self.backend)),
        )
        default = TestSpec.__dataclass_fields__
        if self.workload != "queue":
            for f in ("acks", "min_isr", "replication_factor", "partitions", "unclean", "allow", "sub_via", "txn"):
                put(self, f, default[f].default)
        if self.db != "etcd":
            put(self, "etcd_read", default["etcd_read"].default)
        if self.backend != "ssh":
            for f in ("ssh_hosts", "ssh_user", "ssh_key", "ssh_known_hosts"):
                put(self, f, default[f].default)

    def problem(self) -> str | None:
        """What is wrong with these options (naming the option), or None. Reads only, changes nothing."""
        from checkers.queue import ANOMALY_TYPES
        from checkers.txn_queue import ANOMALY_TYPES as TXN_ANOMALY_TYPES
        from harness.db.nodes import BUGS

        if self.backend not in BACKENDS:
            return f"--backend {self.backend}: unknown (known: {', '.join(BACKENDS)})"
        if self.workload not in WORKLOADS:
            return f"--workload {self.workload} is not available yet (available: {', '.join(WORKLOADS)})"
        if self.backend != "sim" and self.workload not in REAL_WORKLOADS:
            return f"--workload {self.workload} is not available yet on --backend {self.backend} (use --backend sim)"
        if not 1 <= self.nodes <= 15:
            return f"--nodes must be between 1 and 15, got {self.nodes}"
        if not 1 <= self.concurrency <= 1000:
            return f"--concurrency must be between 1 and 1000, got {self.concurrency}"
        if not 0 < self.time_limit <= 86400:
            return f"--time-limit must be a positive number of seconds, got {self.time_limit}"
        if not self.interval > 0:
            return f"--interval must be positive, got {self.interval}"
        if self.txn and self.workload != "queue":
            return f"--txn is an option of --workload queue, not --workload {self.workload}"
        if self.workload == "queue":
            if self.acks not in ACKS:
                return f"--acks must be one of {', '.join(ACKS)}, got {self.acks!r}"
            if not 1 <= self.replication_factor <= self.nodes:
                return (
                    f"--replication-factor must be between 1 and --nodes ({self.nodes}), got {self.replication_factor}"
                )
            if not 1 <= self.min_isr <= self.replication_factor:
                return f"--min-isr must be between 1 and --replication-factor, got {self.min_isr}"
            if not 1 <= self.partitions <= 100:
                return f"--partitions must be between 1 and 100, got {self.partitions}"
            if self.sub_via not in SUB_VIA:
                return f"--sub-via must be one of {', '.join(SUB_VIA)}, got {self.sub_via!r}"
            if self.txn and self.sub_via != "assign":
                return "--txn works with --sub-via assign only (transactional consumers here assign their partitions)"
            if self.txn and self.acks != "all":
                return f"--txn needs --acks all (a transactional producer is idempotent), got --acks {self.acks}"
            known = TXN_ANOMALY_TYPES if self.txn else ANOMALY_TYPES
            bad = sorted(set(self.allow) - set(known))
            if bad:
                kind = "transactional queue" if self.txn else "queue"
                return f"--allow {', '.join(bad)}: not a {kind} anomaly ({', '.join(known)})"
        unknown = sorted(set(self.bugs) - BUGS)
        if unknown:
            return f"--bug {', '.join(unknown)}: unknown (known: {', '.join(sorted(BUGS))})"
        bad = [n for n in self.nemeses if n not in PACKAGES]
        if bad:
            return f"--nemesis: unknown {', '.join(bad)} (known: {', '.join(PACKAGES)})"
        bad = [k for k in self.partition_kinds if k not in KINDS]
        if bad or not self.partition_kinds:
            return f"--partition-kinds: unknown {', '.join(bad) or '(none)'} (known: {', '.join(KINDS)})"
        if not self.check_time_limit > 0:
            return f"--check-time-limit must be positive, got {self.check_time_limit}"
        if self.fsync_delay < 0:
            return f"--fsync-delay must be 0 or more, got {self.fsync_delay}"
        if not self.settle >= 0:
            return f"settle must be 0 or more seconds, got {self.settle}"
        if not 0 < self.rate <= 100_000:
            return f"rate must be a positive number of operations per second, got {self.rate}"
        if self.clock_source not in CLOCK_SOURCES:
            return f"--clock-source must be one of {', '.join(CLOCK_SOURCES)}, got {self.clock_source!r}"
        if self.db not in DBS:
            return f"--db {self.db}: unknown (known: {', '.join(DBS)})"
        if self.etcd_read not in ETCD_READS:
            return f"--etcd-read {self.etcd_read}: unknown (known: {', '.join(ETCD_READS)})"
        if self.db == "etcd":
            problem = self._etcd_problem()
            if problem:
                return problem
        if self.backend == "ssh" and not self.ssh_hosts:
            return "--backend ssh needs --ssh-hosts FILE"
        if self.backend not in ("sim", "ssh") and self.ssh_hosts:
            return "--ssh-hosts is only for --backend ssh"
        return None

    def _etcd_problem(self) -> str | None:
        """What `--db etcd` cannot do with these options: it is a real system, with a register API only."""
        if self.backend not in ("docker", "netns", "local"):
            return f"--db etcd runs on --backend docker, netns or local, not {self.backend}"
        if self.workload != "register":
            return f"--db etcd serves only the register workload, not --workload {self.workload}"
        if self.bugs:
            return "--bug: seeded bugs are our nodes' own; etcd has none (drop --bug or use --db kraftwerk)"
        if self.lose_unsynced or self.fsync_delay:
            return "--lose-unsynced and --fsync-delay are our nodes' disk models; etcd always fsyncs"
        return None

    # -- building ----------------------------------------------------------------------------

    @classmethod
    def from_options(
        cls, *, nemesis: str = "partition,kill,pause,clock", partition_kinds: str = "all", **options: Any
    ) -> TestSpec:
        """A spec from `kraftwerk test`'s option values (`nemesis` and `partition_kinds` as typed,
        `bug` as a list); SpecError naming the first bad option, in the order the command checks them."""
        known = {f.name for f in fields(cls)}
        if "bug" in options:
            options["bugs"] = options.pop("bug")
        unknown = sorted(set(options) - known - {"nemeses"})
        if unknown:
            raise TypeError(f"TestSpec has no option(s) {', '.join(unknown)}")
        try:
            nemeses = parse_nemeses(nemesis)
        except ValueError as e:
            nemeses, bad_nemesis = [], f"--nemesis: {e}"
        else:
            bad_nemesis = None
        try:
            kinds = parse_partition_kinds(partition_kinds)
        except ValueError as e:
            kinds, bad_kinds = KINDS, f"--partition-kinds: {e}"
        else:
            bad_kinds = None
        if options.get("seed") is None:  # a fresh seed (printed by the command, stored in test.json)
            options["seed"] = random.SystemRandom().randrange(2**31)
        spec = cls(**{**options, "nemeses": tuple(nemeses), "partition_kinds": tuple(kinds)})
        if bad_nemesis or bad_kinds:  # the options checked before them are fine
            raise SpecError(bad_nemesis or bad_kinds)
        return spec

    @classmethod
    def from_args(cls, args: Any, **overrides: Any) -> TestSpec:
        """A spec from a parsed `kraftwerk test` command line (an argparse namespace), plus overrides."""
        names = {f.name for f in fields(cls)} | {"nemesis", "partition_kinds", "bug"}
        options = {k: v for k, v in vars(args).items() if k in names and k not in ("nemeses", "partition_kinds")}
        options["partition_kinds"] = getattr(args, "partition_kinds", "all")
        options["name"] = options.get("name") or ""
        return cls.from_options(**{**options, **overrides})

    # -- using -------------------------------------------------------------------------------

    def rng(self, name: str, *parts: object) -> random.Random:
        """The test's random stream `name` (harness.core.streams.STREAMS), optionally per part."""
        return stream(name, self.seed, *parts)

    def workload_options(self) -> dict[str, Any]:
        """The options its workload's class takes (workloads.registry.OPTIONS: acks, partitions, …)."""
        from workloads import registry

        return {k: getattr(self, k) for k in registry.OPTIONS if hasattr(self, k)}

    def make_workload(self, nodes: Sequence[str], timeout_s: float) -> Workload:
        """The test's workload for a cluster of `nodes` ("n1", …), on any runtime."""
        from workloads import registry

        return registry.make(self.workload, list(nodes), self.seed, timeout_s=timeout_s, **self.workload_options())

    @property
    def acks_value(self) -> int:
        """--acks as the producer sends it (-1 for all)."""
        return ACKS[self.acks]

    @property
    def restricted_partition_kinds(self) -> tuple[str, ...]:
        """The partition kinds when the test chose some (or another order), () for the default."""
        return () if self.partition_kinds == KINDS else self.partition_kinds

    # -- test.json ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """test.json's options (the command adds `argv`, `start-time` and what it ran)."""
        kinds = self.restricted_partition_kinds
        return {
            "name": self.name,
            "workload": self.workload,
            "backend": self.backend,
            "nemesis": list(self.nemeses),
            "nodes": self.nodes,
            "concurrency": self.concurrency,
            "time-limit": self.time_limit,
            "interval": self.interval,
            **({"partition-kinds": list(kinds)} if kinds else {}),
            "seed": self.seed,
            "bugs": list(self.bugs),
            **({"lose-unsynced": True} if self.lose_unsynced else {}),
            **({"fsync-delay-ms": self.fsync_delay} if self.fsync_delay else {}),
            **(
                {
                    "acks": self.acks,
                    "min-isr": self.min_isr,
                    "replication-factor": self.replication_factor,
                    "partitions": self.partitions,
                    "unclean": self.unclean,
                    "allow": list(self.allow),
                    **({"sub-via": self.sub_via} if self.sub_via != "assign" else {}),
                    **({"txn": True} if self.txn else {}),
                }
                if self.workload == "queue"
                else {}
            ),
            **(
                {
                    "ssh-hosts": self.ssh_hosts,
                    "ssh-user": self.ssh_user,
                    "ssh-key": self.ssh_key,
                    **({"ssh-known-hosts": self.ssh_known_hosts} if self.ssh_known_hosts else {}),
                }
                if self.backend == "ssh"
                else {}
            ),
            "check-time-limit": self.check_time_limit,
            **({"settle-seconds": self.settle} if self.settle else {}),
            **({"rate": self.rate} if self.rate != 100.0 else {}),
            "clock-source": self.clock_source,
            **({"lease-reads": True} if self.lease_reads else {}),
            **({"db": self.db, "etcd-read": self.etcd_read} if self.db != "kraftwerk" else {}),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TestSpec:
        """The spec a test.json describes; SpecError naming the key if it is not one.

        Keys a run adds (argv, start-time, replay, …) are ignored; missing options take their
        defaults (older runs); `acks` may be the producer's number (-1, 1, 0) as explore wrote it.
        """
        if not isinstance(doc, Mapping):
            raise SpecError("test.json: not a JSON object")
        d = cls.__dataclass_fields__
        out: dict[str, Any] = {}

        def take(key: str, attr: str, convert: Any) -> None:
            if key in doc and doc[key] is not None:
                try:
                    out[attr] = convert(doc[key])
                except (TypeError, ValueError):
                    raise SpecError(f"test.json: {key} {doc[key]!r} is not a valid value") from None

        take("name", "name", str)
        take("workload", "workload", str)
        take("backend", "backend", str)
        take("nemesis", "nemeses", _names)
        take("partition-kinds", "partition_kinds", _names)
        take("nodes", "nodes", _int)
        take("concurrency", "concurrency", _int)
        take("time-limit", "time_limit", float)
        take("interval", "interval", float)
        take("seed", "seed", _int)
        take("bugs", "bugs", _names)
        take("lose-unsynced", "lose_unsynced", _bool)
        take("fsync-delay-ms", "fsync_delay", _int)
        take("check-time-limit", "check_time_limit", float)
        take("acks", "acks", _acks)
        take("min-isr", "min_isr", _int)
        take("replication-factor", "replication_factor", _int)
        take("partitions", "partitions", _int)
        take("unclean", "unclean", _bool)
        take("allow", "allow", _names)
        take("sub-via", "sub_via", str)
        take("txn", "txn", _bool)
        take("ssh-hosts", "ssh_hosts", str)
        take("ssh-user", "ssh_user", str)
        take("ssh-key", "ssh_key", str)
        take("ssh-known-hosts", "ssh_known_hosts", str)
        take("settle-seconds", "settle", float)
        take("rate", "rate", float)
        take("clock-source", "clock_source", str)
        take("lease-reads", "lease_reads", _bool)
        take("db", "db", str)
        take("etcd-read", "etcd_read", str)
        if "replication_factor" not in out and out.get("workload") == "queue":
            out["replication_factor"] = min(d["replication_factor"].default, out.get("nodes", d["nodes"].default))
        try:
            return cls(**out)
        except SpecError as e:
            raise SpecError(f"test.json: {e}") from None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(value)
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise TypeError(value)
    return tuple(value)


def _acks(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return {v: k for k, v in ACKS.items()}.get(value, str(value))
    return str(value)
