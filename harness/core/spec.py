"""`TestSpec`: one test as an immutable value — every option, validated, and its random streams.

The spec is the one description of a test. Its fields are declared with `workloads.options.option`, so that
their flags, test.json keys and help exist once: `add_arguments` gives every command that takes test options
(`test`, `explore`, `replay`, `shrink`, suite entries) the same options, `to_json`/`from_json` are test.json,
and `to_argv` is the reproduce command (`from_argv(to_argv(s)) == s`). The workload's own options are a
typed value of its options class (`workloads.registry`): `spec.workload_options`, stored beside the others in
test.json; the DB's own options a value of its class (`harness.db.registry`): `spec.db_options`, stored under
the DB's name. What the workload or the DB cannot do (a DB on a backend it does not run on, a seeded bug no
request of the workload reaches) is refused here, in one place.

Building a spec validates it without side effects: a bad option raises `SpecError` naming it (exit 254).
Options that do not apply (ssh options off the ssh backend) take their defaults, so two specs of the same
test are equal. `spec.rng(name, …)` is the named random stream of the test's seed (harness.core.streams).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from harness.core.phases import SETTLE
from harness.core.shape import CONTROLLER_ROLES, DEDICATED, Shape
from harness.core.streams import stream
from harness.db import registry as dbs
from harness.nemesis.partitions import KINDS
from harness.nemesis.schedule import ALL, PACKAGES, parse_nemeses, parse_partition_kinds
from harness.real.backends import registry as backends
from workloads import options as opts
from workloads import registry as workloads
from workloads.options import OptionError, option
from workloads.protocol import Workload

SSH = "ssh backend (hosts you already have)"
SEED_SPACE = 2**31  # seeds are 0 ≤ seed < 2**31; a fresh one is drawn from it, and the next ones wrap around it


def seed_after(seed: int, steps: int = 1) -> int:
    """The seed `steps` after `seed` (explore's next attempt, test --test-count's next run), wrapping around."""
    return (seed + steps) % SEED_SPACE


# the parts of a system a seeded bug lives in (harness.db.registry DBKind.bugs), in words
PART_NAMES = {
    "raft": "quorum (raft)",
    "kv": "register state machine",
    "broker": "partition logs",
    "idempotence": "idempotent producer's deduplication",
    "group": "group coordinator (consumer groups)",
    "txn": "transaction coordinator",
    "storage": "log recovery",
}


class SpecError(ValueError):
    """A test option that cannot be run: exit 254 with the message (which names the option)."""


def _nemeses(text: str) -> tuple[str, ...]:
    return tuple(parse_nemeses(text))


def _partition_kinds(text: str) -> tuple[str, ...]:
    return tuple(parse_partition_kinds(text))


@dataclass(frozen=True)
class TestSpec:
    """Every option of one test (see the module docstring)."""

    __test__ = False  # not a pytest test class

    workload: str = option("register", "--workload", "what the clients do", choices=workloads.NAMES, always=True)
    backend: str = option("sim", "--backend", "where the nodes run", choices=backends.NAMES, always=True)
    db: str = option(
        dbs.names()[0],
        "--db",
        "the system under test: " + "; ".join(f"{name}: {dbs.summary(name)}" for name in dbs.names()),
        choices=dbs.names(),
    )
    nemeses: tuple[str, ...] = option(
        ALL,
        "--nemesis",
        "faults to inject: comma-separated from partition, kill, pause, clock, packet (loss, delay, duplicate, "
        "reorder; on real hosts tc netem, or an NFQUEUE shaper where the kernel has no netem), disk (lose "
        "unsynced writes, torn write, flipped bit); or all (every one but packet and disk) / none",
        key="nemesis",
        kind="list",
        parse=_nemeses,
        always=True,
    )
    partition_kinds: tuple[str, ...] = option(
        KINDS,
        "--partition-kinds",
        "which partitions the partition nemesis makes: comma-separated from halves, one (isolate a random "
        "node), leader (isolate the leader: the quorum leader, or for the queue workload the node leading the "
        "most partitions), majorities-ring, bridge, one-way; or all",
        kind="list",
        parse=_partition_kinds,
    )
    nodes: int = option(5, "--nodes", "cluster size", metavar="N", always=True)
    controllers: int = option(
        0,
        "--controllers",
        "lay the cluster out as KRaft is deployed: n1..nN are the quorum's voters (controllers), the other nodes "
        "broker-only observers of it (Kafka-API workloads, --db kraftwerk; default: every node a combined voter)",
        metavar="N",
    )
    controller_roles: str = option(
        DEDICATED,
        "--controller-roles",
        "with --controllers: dedicated (the controllers run no broker) or combined (they are brokers too)",
        choices=CONTROLLER_ROLES,
    )
    concurrency: int = option(10, "--concurrency", "client worker threads", metavar="N", always=True)
    time_limit: float = option(60.0, "--time-limit", "seconds of faults and load", metavar="S", always=True)
    interval: float = option(5.0, "--interval", "mean seconds between faults", metavar="S", always=True)
    rate: float = option(
        100.0, "--rate", "client operations per second, all threads together (Jepsen's stagger)", metavar="OPS"
    )
    seed: int = option(0, "--seed", "random seed (default: a fresh one, printed)", metavar="N", always=True)
    bugs: tuple[str, ...] = option((), "--bug", "turn on a seeded bug (repeatable)", key="bugs", kind="repeat")
    check_time_limit: float = option(300.0, "--check-time-limit", "checker budget in seconds", metavar="S")
    settle: float = option(
        SETTLE,
        "--settle",
        "seconds from the heal to the final reads at least, so that late consequences of a fault show before them",
        key="settle-seconds",
        metavar="S",
    )
    name: str = option("", "--name", "test name in the store (default WORKLOAD-BACKEND, or WORKLOAD-DB-BACKEND)")
    ssh_hosts: str | None = option(
        None, "--ssh-hosts", "one host per line: [user@]address[:port]; nodes n1, n2, …", metavar="FILE", group=SSH
    )
    ssh_user: str = option("root", "--ssh-user", "login user (others use sudo)", metavar="USER", group=SSH)
    ssh_key: str | None = option(
        None, "--ssh-key", "private key file (default: ssh's usual keys)", metavar="FILE", group=SSH
    )
    ssh_known_hosts: str | None = option(
        None,
        "--ssh-known-hosts",
        "known_hosts to check host keys against (default ~/.ssh/known_hosts)",
        metavar="FILE",
        group=SSH,
    )
    # the workload's own options: an instance of its options class (None: its defaults)
    workload_options: Any = field(default=None)
    # the DB's own options: an instance of its options class (harness.db.registry; None: its defaults)
    db_options: Any = field(default=None)

    def __post_init__(self) -> None:
        put = object.__setattr__  # construction of a frozen value: normalise what equal tests spell differently
        put(self, "nemeses", tuple(self.nemeses))
        put(self, "partition_kinds", tuple(self.partition_kinds))
        put(self, "bugs", tuple(sorted(set(self.bugs))))
        for name in ("time_limit", "interval", "check_time_limit", "settle", "rate"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                put(self, name, float(value))
        kind = workloads.KINDS.get(self.workload)
        if kind is not None:
            if self.workload_options is None:
                put(self, "workload_options", kind.options())
            elif not isinstance(self.workload_options, kind.options):
                raise SpecError(
                    f"--workload {self.workload} takes {kind.options.__name__}, "
                    f"not {type(self.workload_options).__name__}"
                )
        if self.db in dbs.MODULES:
            options = dbs.kind(self.db).options
            if self.db_options is None:
                put(self, "db_options", options())
            elif not isinstance(self.db_options, options):
                raise SpecError(f"--db {self.db} takes {options.__name__}, not {type(self.db_options).__name__}")
        problem = self.problem()
        if problem:
            raise SpecError(problem)
        put(self, "name", self.name or self._default_name())
        default = TestSpec.__dataclass_fields__
        if self.backend != "ssh":
            for f in ("ssh_hosts", "ssh_user", "ssh_key", "ssh_known_hosts"):
                put(self, f, default[f].default)

    def problem(self) -> str | None:
        """What is wrong with these options (naming the option), or None. Reads only, changes nothing."""
        if self.backend not in backends.NAMES:
            return f"--backend {self.backend}: unknown (known: {', '.join(backends.NAMES)})"
        if self.workload not in workloads.NAMES:
            return f"--workload {self.workload}: unknown (known: {', '.join(workloads.NAMES)})"
        if self.db not in dbs.MODULES:
            return f"--db {self.db}: unknown (known: {', '.join(dbs.names())})"
        if not 1 <= self.nodes <= 15:
            return f"--nodes must be between 1 and 15, got {self.nodes}"
        if not 1 <= self.concurrency <= 1000:
            return f"--concurrency must be between 1 and 1000, got {self.concurrency}"
        if not 0 < self.time_limit <= 86400:
            return f"--time-limit must be a positive number of seconds, got {self.time_limit}"
        if not self.interval > 0:
            return f"--interval must be positive, got {self.interval}"
        problem = self.workload_options.problem(self.nodes)
        if problem:
            return problem
        bad = [n for n in self.nemeses if n not in PACKAGES]
        if bad:
            return f"--nemesis: unknown {', '.join(bad)} (known: {', '.join(PACKAGES)})"
        bad = [k for k in self.partition_kinds if k not in KINDS]
        if bad or not self.partition_kinds:
            return f"--partition-kinds: unknown {', '.join(bad) or '(none)'} (known: {', '.join(KINDS)})"
        if not self.check_time_limit > 0:
            return f"--check-time-limit must be positive, got {self.check_time_limit}"
        if not self.settle >= 0:
            return f"--settle must be 0 or more seconds, got {self.settle}"
        if not 0 < self.rate <= 100_000:
            return f"--rate must be a positive number of operations per second, got {self.rate}"
        kind = workloads.kind(self.workload)
        problem = self._shape_problem(kind.api)
        if problem:
            return problem
        problem = dbs.problem(
            self.db,
            self.backend,
            kind.api,
            self.nemeses,
            self.bugs,
            workload=self.workload,
            options=self.db_options,
        )
        if problem:
            return problem
        problem = self._unreachable_bug()
        if problem:
            return problem
        if self.backend == "ssh" and not self.ssh_hosts:
            return "--backend ssh needs --ssh-hosts FILE"
        if self.backend not in ("sim", "ssh") and self.ssh_hosts:
            return "--ssh-hosts is only for --backend ssh"
        return None

    def _shape_problem(self, api: str) -> str | None:
        """What is wrong with --controllers / --controller-roles for this workload and DB, or None. A workload
        with no brokers (register) is refused: its clients talk to every node, and a broker-only observer
        serves none of them."""
        shape = self.shape
        problem = shape.problem()
        if problem or not shape.separate:
            return problem  # the default shape: as before the option (--nodes 1 --nemesis disk included)
        if api != "kafka":
            return (
                f"--controllers: --workload {self.workload} has no brokers (its clients need every node to be a "
                "voter); it applies to Kafka-API workloads (queue)"
            )
        if self.db != _default("db"):
            return f"--controllers: only our nodes (--db {_default('db')}) can be laid out in roles, not --db {self.db}"
        if shape.controllers == 1 and "disk" in self.nemeses:
            return (
                "--controllers 1 --nemesis disk: a single controller's metadata log has no other copy, so a "
                "flipped bit in it loses committed records whatever the nodes do (use 2 or more controllers)"
            )
        brokers = len(shape.broker_names)
        rf = getattr(self.workload_options, "replication_factor", 1)
        if rf > brokers:
            return (
                f"--replication-factor {rf} needs {rf} brokers; --controllers {shape.controllers} "
                f"--controller-roles {shape.roles} leaves {brokers} of --nodes {self.nodes}"
            )
        return None

    def _unreachable_bug(self) -> str | None:
        """A seeded bug in a part of the system this test's workload never reaches (it could not fire: the run
        would pass whatever the bug does), naming the workloads that reach it."""
        parts = dbs.kind(self.db).bugs
        reached = self.workload_options.exercises()
        for bug in self.bugs:
            part = parts[bug]
            if part in reached:
                continue
            reaching = workloads.reaching(part)
            return (
                f"--bug {bug}: it lives in the {PART_NAMES.get(part, part)}, which --workload {self.workload}"
                + (f" {' '.join(opts.to_argv(self.workload_options))}" if opts.to_argv(self.workload_options) else "")
                + " never reaches, so it could not fire"
                + (f"; it is reached by {' and by '.join(reaching)}" if reaching else "")
            )
        return None

    def _default_name(self) -> str:
        """WORKLOAD-BACKEND, or WORKLOAD-DB-BACKEND for a DB other than the default one (our nodes)."""
        return "-".join((self.workload, *(() if self.db == _default("db") else (self.db,)), self.backend))

    # -- using -------------------------------------------------------------------------------

    def rng(self, name: str, *parts: object) -> random.Random:
        """The test's random stream `name` (harness.core.streams.STREAMS), optionally per part."""
        return stream(name, self.seed, *parts)

    def make_workload(self, nodes: Sequence[str], timeout_s: float) -> Workload:
        """The test's workload for a cluster of `nodes` ("n1", …), on any runtime."""
        return workloads.kind(self.workload).make(nodes, self.seed, self.workload_options, timeout_s)

    def checking(self) -> Any:
        """How this test's history is judged (`checkers.registry.Checking`), as its workload says."""
        return self.workload_options.checking()

    @property
    def shape(self) -> Shape:
        """Which nodes are controllers and which are brokers (harness.core.shape)."""
        return Shape(self.nodes, self.controllers, self.controller_roles)

    @property
    def restricted_partition_kinds(self) -> tuple[str, ...]:
        """The partition kinds when the test chose some (or another order), () for the default."""
        return () if self.partition_kinds == KINDS else self.partition_kinds

    def with_options(self, **changes: Any) -> TestSpec:
        """The same test with some options changed, by field name: the TestSpec's own, its workload's (`acks`)
        and its DB's (`fsync_delay`). A changed workload or DB starts from its own defaults. SpecError if the
        result is not a test, or an option is none of these."""
        mine = {f.name for f in fields(self)}
        general = {k: v for k, v in changes.items() if k in mine}
        rest = {k: v for k, v in changes.items() if k not in mine}
        workload = general.get("workload", self.workload)
        db = general.get("db", self.db)
        kind = workloads.kind(workload)
        try:
            db_kind = dbs.kind(db)
        except dbs.UnknownDB as e:
            raise SpecError(str(e)) from None
        for name, cls, base_value, same in (
            ("workload_options", kind.options, self.workload_options, workload == self.workload),
            ("db_options", db_kind.options, self.db_options, db == self.db),
        ):
            own = {k: rest.pop(k) for k in list(rest) if k in {f.name for f in fields(cls)}}
            if name not in general:
                base = base_value if same else cls()
                general[name] = replace(base, **own) if own else base
        if rest:
            raise SpecError(
                f"no option(s) {', '.join(sorted(rest))} for --workload {workload} --db {db} (options of another "
                "workload or DB?)"
            )
        return replace(self, **general)

    @classmethod
    def of(cls, **options: Any) -> TestSpec:
        """A spec from options by field name, the workload's and the DB's among them (`TestSpec.of(workload=
        "queue", acks="1", fsync_delay=200)`): what a test or a benchmark writes. SpecError as the constructor's,
        or naming an option that is not one of these."""
        workload = workloads.kind(options.get("workload", _default("workload")))
        try:
            db = dbs.kind(options.get("db", _default("db")))
        except dbs.UnknownDB as e:
            raise SpecError(str(e)) from None
        own = {f.name for f in fields(workload.options)}
        db_own = {f.name for f in fields(db.options)}
        mine = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - own - db_own - mine)
        if unknown:
            raise SpecError(f"no option(s) {', '.join(unknown)} for --workload {workload.name} --db {db.name}")
        return cls(
            **{k: v for k, v in options.items() if k in mine},
            workload_options=workload.options(**{k: v for k, v in options.items() if k in own}),
            db_options=db.options(**{k: v for k, v in options.items() if k in db_own}),
        )

    # -- the command line ----------------------------------------------------------------------

    def to_argv(self) -> list[str]:
        """The `kraftwerk test` options that run this exact test again (same seed, same options)."""
        words = opts.to_argv(
            self, only=lambda n: self._applies(n) and (n != "name" or self.name != self._default_name())
        )
        return words + opts.to_argv(self.workload_options) + opts.to_argv(self.db_options)

    def reproduce(self) -> str:
        """The command line that runs this exact test again."""
        import shlex

        return shlex.join(["kraftwerk", "test", *self.to_argv()])

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> TestSpec:
        """The spec a `kraftwerk test` command line's options give (the inverse of `to_argv`)."""
        parser = argparse.ArgumentParser(prog="kraftwerk test", add_help=False, exit_on_error=False)
        add_arguments(parser)
        try:
            namespace = parser.parse_args(list(argv))
        except argparse.ArgumentError as e:
            raise SpecError(str(e)) from None
        return from_args(namespace)

    def _applies(self, name: str) -> bool:
        """Whether an option (by field name) applies to this test: ssh options only on the ssh backend."""
        if name.startswith("ssh_"):
            return self.backend == "ssh"
        return True

    # -- configurations ------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """What makes two runs the same test (checkers.pipeline.config): every option but the seed, the name and
        the checker budget, by test.json key; options at their default are left out (but the ones the reproduce
        command always names), so runs stored before an option existed keep their configuration."""
        out: dict[str, Any] = {}
        for value in (self, self.workload_options, self.db_options):
            for f, meta in opts.options_of(type(value)):
                v = getattr(value, f.name)
                if f.name in ("seed", "name", "check_time_limit") or (value is self and not self._applies(f.name)):
                    continue
                if meta.always or v != opts.default_of(f) or f.name in ("nemeses", "bugs"):
                    out[meta.key] = list(v) if isinstance(v, tuple) else v
        return out

    # -- test.json ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """test.json's options (a command adds `argv`, `start-time` and what it ran): every option that applies,
        the workload's own ones beside the others."""
        return {
            **opts.to_json(self, only=self._applies),
            **opts.to_json(self.workload_options),
            self.db: opts.to_json(self.db_options),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TestSpec:
        """The spec a test.json describes; SpecError naming the key if it is not one.

        Keys a run adds (argv, start-time, replay, …) are ignored; missing options take their defaults (runs
        stored by older versions); `acks` may be the producer's number (-1, 1, 0) as older runs wrote it.
        """
        if not isinstance(doc, Mapping):
            raise SpecError("test.json: not a JSON object")
        try:
            values = opts.from_json(cls, doc)
            workload = values.get("workload", cls.__dataclass_fields__["workload"].default)
            kind = workloads.KINDS.get(workload)
            if kind is None:
                raise SpecError(f"test.json: unknown workload {workload!r} (known: {', '.join(workloads.NAMES)})")
            own = opts.from_json(kind.options, doc)
            # runs stored before the replication factor was stored used min(3, nodes)
            if "replication_factor" in {f.name for f in fields(kind.options)} and "replication_factor" not in own:
                own["replication_factor"] = min(3, values.get("nodes", cls.__dataclass_fields__["nodes"].default))
            db = values.get("db", cls.__dataclass_fields__["db"].default)
            try:
                db_options = dbs.stored_options(db, doc)  # under the DB's name, or flat (runs stored before)
            except dbs.UnknownDB as e:
                raise SpecError(f"test.json: {e}") from None
            return cls(**values, workload_options=kind.options(**own), db_options=db_options)
        except OptionError as e:
            raise SpecError(f"test.json: {e}") from None
        except SpecError as e:
            raise SpecError(str(e) if str(e).startswith("test.json") else f"test.json: {e}") from None


# -- the command line ------------------------------------------------------------------------------


def add_arguments(
    parser: argparse.ArgumentParser,
    *,
    defaults: bool = True,
    title: str | None = None,
    default_overrides: Mapping[str, Any] | None = None,
) -> None:
    """Every test option, as each command that takes test options has them: the test's own (in a group `title`
    if given), then each workload's in a group of its own. defaults=False: an option not given is left out of
    the namespace (replay and shrink replace only the stored options given); `default_overrides` gives some
    options (by field name) another default for this command (explore's shorter runs)."""
    groups: dict[str, Any] = {}
    opts.add_arguments(
        parser, TestSpec, defaults=defaults, groups=groups, title=title, default_overrides=default_overrides
    )
    for kind in workloads.KINDS.values():
        opts.add_arguments(parser, kind.options, defaults=defaults, groups=groups, title=f"{kind.name} workload")
    for name, cls in dbs.option_classes().items():
        opts.add_arguments(parser, cls, defaults=defaults, groups=groups, title=f"--db {name}")
    if defaults:
        parser.set_defaults(seed=None)  # no --seed: a fresh one (from_args draws it; the command prints it)


def given(namespace: argparse.Namespace) -> dict[str, Any]:
    """The test options a parsed command line holds, by field name (TestSpec's and the workloads' together)."""
    out = opts.given(TestSpec, namespace)
    for cls in _option_classes():
        out.update(opts.given(cls, namespace))
    return out


def _option_classes() -> list[type]:
    """Every workload's and every DB's options class."""
    return [k.options for k in workloads.KINDS.values()] + list(dbs.option_classes().values())


def from_args(namespace: argparse.Namespace, **overrides: Any) -> TestSpec:
    """The spec a parsed command line (with `add_arguments(defaults=True)`) describes, plus overrides. An option
    of another workload or DB than the test's, given a value other than its default, is refused (naming it)."""
    values = {**given(namespace), **overrides}
    if values.get("seed") is None:  # a fresh seed (the command prints it; test.json stores it)
        values["seed"] = random.SystemRandom().randrange(SEED_SPACE)
    workload = values.get("workload", _default("workload"))
    db = values.get("db", _default("db"))
    kind = workloads.KINDS.get(workload)
    if kind is None:
        raise SpecError(f"--workload {workload}: unknown (known: {', '.join(workloads.NAMES)})")
    if db not in dbs.MODULES:
        raise SpecError(f"--db {db}: unknown (known: {', '.join(dbs.names())})")
    chosen = {kind.options, dbs.kind(db).options}
    own: dict[str, Any] = {}
    for cls in _option_classes():
        for f, meta in opts.options_of(cls):
            if f.name not in values:
                continue
            if cls in chosen:
                own[f.name] = values[f.name]
            elif values[f.name] != opts.default_of(f) and f.name not in {g.name for c in chosen for g in fields(c)}:
                raise SpecError(f"{meta.flag} is an option of {_owner_of(cls)}, not of --workload {workload} --db {db}")
    taken = {f.name for cls in _option_classes() for f in fields(cls)}
    general = {k: v for k, v in values.items() if k not in ("workload", "db") and k not in taken}
    db_options = dbs.kind(db).options

    def part(cls: type) -> dict[str, Any]:
        return {k: v for k, v in own.items() if k in {f.name for f in fields(cls)}}

    return TestSpec(
        workload=workload,
        db=db,
        **general,
        workload_options=kind.options(**part(kind.options)),
        db_options=db_options(**part(db_options)),
    )


def _default(name: str) -> Any:
    """The default of a TestSpec option (by field name)."""
    return TestSpec.__dataclass_fields__[name].default


def _owner_of(cls: type) -> str:
    """The command-line words that choose the workload or DB whose options class `cls` is."""
    for kind in workloads.KINDS.values():
        if kind.options is cls:
            return f"--workload {kind.name}"
    for name, options in dbs.option_classes().items():
        if options is cls:
            return f"--db {name}"
    return cls.__name__


def config_label(test: Mapping[str, Any]) -> str:
    """The configuration label of a stored run's test.json (checkers.pipeline.config.config_label over
    `TestSpec.config()`); a test.json that is no test here is labelled from its keys as they are."""
    from checkers.pipeline.config import config_label as label

    try:
        return label(TestSpec.from_json(test).config())
    except SpecError:
        return label(test)
