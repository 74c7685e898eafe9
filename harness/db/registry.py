"""Every DB by name: what it is, what it can do, whether it can run here (and why not), how to build it.

The one place that knows the DBs. `kraftwerk test` (its choices and validation), `replay`, the
test spec and the real runner all ask here; nothing else names a DB. Each DB is one module holding
a `KIND = DBKind(...)` declaration, listed below by one line and imported only when asked for
(importlib), so this module stays light and free of import cycles.

    registry.names()                                  # ("kraftwerk", "etcd", "zookeeper")
    registry.kind("etcd").apis                        # ("kv",)
    registry.problem("etcd", backend="sim")           # "--db etcd runs on --backend docker, netns or local, …"
    registry.kind("etcd").why_not("local", ["partition"])   # what this machine lacks, or None
    db = registry.kind(name).factory(DBContext(...))  # the DB of a run (harness.db.protocol.DB)

Adding a DB: one module with its `KIND` (options, capabilities, `why_not`, factory) and its DB class
(on `harness.db.base.ProbedDB`, which needs one `(epoch, role, leader)` probe per member), plus its
line in MODULES.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MODULES: dict[str, str] = {
    "kraftwerk": "harness.db.kraftwerk",  # our KRaft-style nodes
    "etcd": "harness.db.etcd",  # Debian's etcd-server 3.4
    "zookeeper": "harness.db.zookeeper",  # Debian's zookeeper 3.8
}


class UnknownDB(ValueError):
    """A DB name that is not registered (the message names the known ones)."""


@dataclass(frozen=True)
class DBContext:
    """What a DB's factory gets to build the DB of one run."""

    hosts: Sequence[Any]  # the backend's hosts (harness.real.backends.base.Host), named n1, n2, …
    ports: Mapping[str, tuple[int, ...]]  # {host: its DBKind.ports ports} from a backend that chooses them, else {}
    listen_any: bool  # listen on 0.0.0.0 (each host has addresses of its own), else on the host's address
    seed: int
    bugs: tuple[str, ...]  # seeded bugs to turn on (only ones this DB's `bugs` names)
    workload: Any  # the run's workload (workloads.protocol.Workload): its `api` and `options()`
    options: Any  # this DB's options value (an instance of DBKind.options)
    nemeses: tuple[str, ...]  # the fault packages of the run
    cluster_id: str  # the backend's cluster id (unique per run)
    shape: Any = None  # the cluster's layout in roles (harness.core.shape.Shape; None: every node a combined voter)


@dataclass(frozen=True)
class DBKind:
    """One DB: what it is, what it can do, and how to build it."""

    name: str  # --db NAME (its key in MODULES)
    summary: str  # one line for --help
    options: type  # a frozen dataclass of its own options, declared with workloads.options.option(...), whose
    # fields all have defaults and whose `problem()` says what is wrong with a value (naming the option) or None
    backends: tuple[str, ...]  # the backends it runs on (only our nodes run on "sim")
    apis: tuple[str, ...]  # the client APIs it serves (a workload's `api`: "kv", "kafka")
    nemeses: tuple[str, ...]  # the fault packages it supports
    factory: Callable[[DBContext], Any]  # builds the DB of a run (harness.db.protocol.DB)
    bugs: Mapping[str, str] = field(default_factory=dict)  # {seeded bug: the part of the system it lives in}
    ports: int = 2  # ports per host it needs from a backend that chooses them (the local backend)
    why_not: Callable[[str, Sequence[str]], str | None] = lambda _backend, _nemeses: None
    """what this machine lacks to run it on a backend with these faults (a message naming the option), or None"""


def names() -> tuple[str, ...]:
    """Every registered DB, in MODULES's order (the first is the default)."""
    return tuple(MODULES)


def kind(name: str) -> DBKind:
    """The DB called `name` (UnknownDB naming the known ones if there is none)."""
    try:
        module = MODULES[name]
    except KeyError:
        raise UnknownDB(f"--db {name}: unknown (known: {', '.join(MODULES)})") from None
    declared = importlib.import_module(module).KIND
    if not isinstance(declared, DBKind) or declared.name != name:
        raise TypeError(f"{module}.KIND must be the DBKind named {name!r}")
    return declared


def summary(name: str) -> str:
    """DB `name`'s one line for --help."""
    return kind(name).summary


def kinds() -> tuple[DBKind, ...]:
    return tuple(kind(n) for n in MODULES)


def option_classes() -> dict[str, type]:
    """{DB name: its options class}: what the command line and test.json take for each DB."""
    return {k.name: k.options for k in kinds()}


def _either(items: Iterable[str]) -> str:
    items = list(items)
    return " or ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} or {items[-1]}"


def problem(
    name: str,
    backend: str | None = None,
    workload_api: str | None = None,
    nemeses: Collection[str] = (),
    bugs: Collection[str] = (),
    *,
    workload: str | None = None,
    options: Any = None,
) -> str | None:
    """Why DB `name` cannot be tested so, whatever the machine (a message naming the option and what would
    work, for exit 254), or None: a backend it does not run on, a workload API it does not serve, a
    fault package it does not support, a seeded bug it does not have, a bad value of its own `options`.
    `workload` only names the workload in the message."""
    try:
        k = kind(name)
    except UnknownDB as e:
        return str(e)
    if options is not None:
        if not isinstance(options, k.options):
            return f"--db {name} takes {k.options.__name__}, not {type(options).__name__}"
        bad_option = options.problem()
        if bad_option:
            return bad_option
    if backend is not None and backend not in k.backends:
        return f"--db {name} runs on --backend {_either(k.backends)}, not {backend}"
    if workload_api is not None and workload_api not in k.apis:
        served = _workloads_speaking(k.apis)
        return (
            f"--db {name} does not serve the {workload_api!r} client API"
            + (f" of --workload {workload}" if workload else "")
            + (f"; it serves --workload {_either(served)}" if served else "")
        )
    bad = [n for n in nemeses if n not in k.nemeses]
    if bad:
        return f"--nemesis {','.join(bad)}: --db {name} does not support it (it supports {', '.join(k.nemeses)})"
    bad = sorted(set(bugs) - set(k.bugs))
    if bad:
        having = [o.name for o in kinds() if set(bad) <= set(o.bugs)]
        return (
            f"--bug {', '.join(bad)}: not a seeded bug of --db {name}"
            + (f" (its bugs: {', '.join(sorted(k.bugs))})" if k.bugs else f" ({name} has none: drop --bug)")
            + (f"; --db {_either(having)} has it" if having else "")
        )
    return None


def _workloads_speaking(apis: Collection[str]) -> list[str]:
    """The workloads whose client API is one of `apis`."""
    from workloads.registry import KINDS

    return [name for name, w in KINDS.items() if w.api in apis]


def stored_options(name: str, test: Mapping[str, Any]) -> Any:
    """DB `name`'s options as a stored test.json has them: under the DB's name (`{"etcd": {"etcd-read": …}}`),
    or, in runs stored before DBs had options of their own, beside the other options. OptionError (a
    ValueError) names a key whose value is not one."""
    from workloads.options import from_json

    cls = kind(name).options
    own = test.get(name)
    doc = {**test, **own} if isinstance(own, Mapping) else test
    return cls(**from_json(cls, doc))
