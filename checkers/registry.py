"""The checker registry: which checkers judge a run, and how their results make one verdict.

Every command that judges a run uses it: `kraftwerk test` (both runtimes), `check RUN_DIR`, `replay`,
`shrink`, `explore`, `suite` and the Spark pipeline behind `analyze`. A workload says how its history is
judged with a `Checking` value (its model, the anomalies the test allows, ww-deps, the operations that never
complete ok by design); `judge` runs the model's checker and the ones every run gets:

- the workload's part (`linearizable` for register models, `queue` for queue and transactional queue),
- `epochs`: one leader per epoch, votes, high watermarks, committed logs (from the nodes' events),
- `partition-logs`: committed partition data across replicas (Kafka-style workloads),
- `invariants`: what the runtime itself observed (the simulator's invariants, nodes that stopped on an
  illegal state), as stored in the run's run.json,
- `stats`: an operation type (f) that never succeeded in the main phase makes the run unknown, naming
  it — a test that tested nothing does not pass (Jepsen's stats checker).

The verdict composes them: false beats unknown beats true.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.history import History, Operation
from checkers.verdict import compose

# model → the name of its part in a composed result
LINEARIZABLE_MODELS = ("cas-register", "register", "kv-append", "mutex", "multi-register")
QUEUE_MODELS = ("queue", "txn-queue")
MODELS = (*LINEARIZABLE_MODELS, *QUEUE_MODELS)


class Checking:
    """How a workload's history is judged.

    model: a linearizability model (`cas-register`, …), `queue` (Kafka queue anomalies) or `txn-queue`
    (transactions of send/poll micro-ops: Jepsen's anomalies and G0/G1c cycles). allow: anomaly types that do
    not make the run invalid. ww_deps: transactional queue, offsets give ww edges (Jepsen's --ww-deps: G1c
    and its variants are allowed when they need a ww edge). never_ok: operation types that by design never
    complete ok (the queue's producer `crash`), left out of the stats rule.
    """

    # An immutable value written out, not a dataclass: `kraftwerk check` starts without generating code.
    __slots__ = ("model", "allow", "ww_deps", "never_ok")
    model: str
    allow: tuple[str, ...]
    ww_deps: bool
    never_ok: tuple[str, ...]

    def __init__(
        self, model: str, allow: tuple[str, ...] = (), ww_deps: bool = False, never_ok: tuple[str, ...] = ()
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"unknown checker model {model!r} (known: {', '.join(MODELS)})")
        for name, value in zip(self.__slots__, (model, allow, ww_deps, never_ok)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Checking is immutable: cannot set {name!r}")

    def _fields(self) -> tuple[str, tuple[str, ...], bool, tuple[str, ...]]:
        return self.model, self.allow, self.ww_deps, self.never_ok

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Checking) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Checking(" + ", ".join(f"{n}={v!r}" for n, v in zip(self.__slots__, self._fields())) + ")"

    def __reduce__(self) -> tuple[type[Checking], tuple[str, tuple[str, ...], bool, tuple[str, ...]]]:
        return Checking, self._fields()

    @property
    def part(self) -> str:
        """The name of the workload's part in a composed result."""
        return "queue" if self.model in QUEUE_MODELS else "linearizable"

    @property
    def split_keys(self) -> bool:
        """Whether the history splits into independent keys, each checked on its own (linearizable models)."""
        return self.model in LINEARIZABLE_MODELS

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "allow": list(self.allow),
            **({"ww-deps": True} if self.ww_deps else {}),
            **({"never-ok": list(self.never_ok)} if self.never_ok else {}),
        }


def check_history(
    history: History,
    checking: Checking,
    *,
    time_limit: float | None = None,
    memory_limit_mb: float | None = None,
    jobs: int = 1,
    initial: Any = None,
    cas_mismatch: bool = False,
) -> dict[str, Any]:
    """The workload's part: `history` judged by `checking`'s model (raises InputError on a malformed history)."""
    if checking.model == "queue":
        from checkers.queue import check_queue

        return check_queue(history, allow=checking.allow)
    if checking.model == "txn-queue":
        from checkers.txn_queue import check_txn_queue

        subscribe = any(op.f == "subscribe" for op in history.operations())
        return check_txn_queue(history, allow=checking.allow, subscribe=subscribe, ww_deps=checking.ww_deps)
    from checkers.linearizable import check

    limits: dict[str, Any] = {} if memory_limit_mb is None else {"memory_limit_mb": memory_limit_mb}
    return check(
        history, checking.model, initial, time_limit=time_limit, jobs=jobs, cas_mismatch=cas_mismatch, **limits
    )


def main_phase_operations(history: History, main: Sequence[int] | None) -> list[Operation]:
    """The client operations invoked in the main phase [start, end) ns (all of them without phase times)."""
    ops = history.operations()
    if main is None:
        return ops
    start, end = main
    return [op for op in ops if start <= op.invoke.time < end]


def stats_part(history: History, checking: Checking, main: Sequence[int] | None) -> dict[str, Any]:
    """Jepsen's stats over the main phase: counts per f; unknown when some f never succeeded there."""
    from checkers.stats import count

    ops = main_phase_operations(history, main)
    out = count(ops)
    out.pop("valid", None)
    never = [f for f in out.get("never-ok", []) if f not in checking.never_ok]
    out.pop("never-ok", None)
    if main is not None:
        out["main-phase"] = [int(main[0]), int(main[1])]
    if not ops:
        return {**out, "valid": "unknown", "error": "no client operation in the main phase"}
    if never:
        return {**out, "valid": "unknown", "never-ok": never}
    return {**out, "valid": True}


def judge(
    history: History,
    checking: Checking,
    *,
    events: Sequence[dict[str, Any]] | None,
    logs: Mapping[str, list[dict[str, Any]]] | None = None,
    partition_logs: Mapping[str, Mapping[str, list[dict[str, Any]]]] | None = None,
    observed: Mapping[str, Any] | None = None,
    main: Sequence[int] | None = None,
    time_limit: float | None = None,
) -> dict[str, Any]:
    """A run's composed verdict: the workload's part, epochs, partition logs, what the runtime observed, stats.

    `observed` is the runtime's own result (the simulator's invariants, node-fatal), or None; `main` the main
    phase's [start, end) in history ns. (The Spark pipeline composes the same parts, checking keys apart.)
    """
    from checkers.epochs import check_events, check_partition_logs

    parts: dict[str, dict[str, Any]] = {}
    parts[checking.part] = check_history(history, checking, time_limit=time_limit)
    if events:
        parts["epochs"] = check_events(list(events), dict(logs or {}))
    else:
        parts["epochs"] = {"valid": "unknown", "error": "no events"}
    if partition_logs:
        parts["partition-logs"] = check_partition_logs(partition_logs)
    if observed is not None:
        parts["invariants"] = dict(observed)
    parts["stats"] = stats_part(history, checking, main)
    result = compose(parts)
    result["checking"] = checking.to_json()
    return result


def allowed_anomalies(result: Mapping[str, Any]) -> list[str]:
    """The anomaly types a composed result found but allowed (they do not make it invalid)."""
    bad = set(bad_anomalies(result))
    return [t for t in result.get("anomaly-types", []) if t not in bad]


PARTS = ("linearizable", "queue", "history", "epochs", "partition-logs", "invariants", "stats")


def bad_anomalies(result: Mapping[str, Any]) -> list[str]:
    """The anomaly types that make a result invalid: of a composed result's parts, or of one checker's result
    (its `bad-anomaly-types` when it tells allowed ones apart, else all its types when it is invalid)."""
    parts = {k: result[k] for k in PARTS if isinstance(result.get(k), Mapping) and "valid" in result[k]}
    out: list[str] = []
    for name, part in (parts or {"result": result}).items():
        if "bad-anomaly-types" in part:
            found = list(part["bad-anomaly-types"])
        elif part.get("valid") is False:
            found = list(part.get("anomaly-types", [])) or [name]
        else:
            found = []
        out += [t for t in found if t not in out]
    return out


# -- what a stored run's files hold besides its history --------------------------------------------


def stored_observations(run_dir: str | Path) -> tuple[Mapping[str, Any] | None, Sequence[int] | None]:
    """(what the runtime observed, the main phase's [start, end)) of a stored run, from its run.json; runs
    stored before run.json: the invariants their results.json recorded, and no phase times."""
    d = Path(run_dir)
    run = d / "run.json"
    if run.exists():
        try:
            doc = json.loads(run.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"unreadable run.json: {e}", str(d)) from None
        main = (doc.get("phases") or {}).get("main")
        return observed_of(doc), (tuple(main) if main else None)
    results = d / "results.json"
    if results.exists():
        try:
            old = json.loads(results.read_text())
        except (OSError, json.JSONDecodeError):
            old = {}
        invariants = old.get("invariants") if isinstance(old, dict) else None
        return (invariants if isinstance(invariants, dict) else None), None
    return None, None


def observed_of(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdict part a run.json's observations make: the simulator's invariants, and real nodes that
    stopped themselves on an illegal state (node-fatal); None when the runtime observed nothing of the sort."""
    invariants = run.get("invariants")
    fatal = list(run.get("node-fatal") or [])
    if invariants is None and not fatal:
        return None
    out = dict(invariants) if invariants is not None else {"valid": True}
    if fatal:
        out["valid"] = False
        out["node-fatal"] = fatal
        types = list(out.get("anomaly-types", []))
        if "node-fatal" not in types:
            types.append("node-fatal")
        out["anomaly-types"] = types
    return out
