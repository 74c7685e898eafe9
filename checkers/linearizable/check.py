"""Linearizability of a whole history: split by key, prune, search keys interleaved, explain.

P-compositionality: a history is linearizable iff every key's sub-history is, so
each key is searched on its own. The searches run round-robin in small quanta,
so the first key to be refuted settles the verdict quickly even when other keys
are expensive, and a global time limit or memory budget ends the rest with
`unknown` rather than a crash.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Generator
from typing import Any

from checkers.history import History, Operation, freeze
from checkers.linearizable.models import DIFFERS, ILLEGAL, Model, MultiRegister, Prepared, make_model, show
from checkers.linearizable.wgl import Outcome, search

DEFAULT_MEMORY_LIMIT_MB = 2048
PREFIX_SHOWN = 20
# Below this many searched operations, forking costs more than it saves: Porcupine's c50 kv
# logs (1,712 and 2,024 operations, about 0.1 s of search each) are faster in one process.
PARALLEL_MIN_OPS = 4096
_NONE = object()  # "no key refuted yet" (None is a real key: unkeyed histories)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def op_summary(op: Operation) -> dict[str, Any]:
    """A compact, JSON-ready description of an operation."""
    out: dict[str, Any] = {
        "index": op.invoke.index,
        "process": op.process,
        "f": op.f,
        "value": op.value,
        "type": op.type,
        "line": op.invoke.line,
    }
    if op.complete is not None:
        out["completed-index"] = op.complete.index
    if op.key is not None:
        out["key"] = op.key
    return out


def partition(ops: list[Operation]) -> dict[Any, list[Operation]]:
    parts: dict[Any, list[Operation]] = {}
    for op in ops:
        parts.setdefault(op.key, []).append(op)
    return parts


def prepare(model: Model, ops: list[Operation], source: str) -> tuple[list[Prepared], dict[str, int]]:
    """Compile a partition's operations, dropping those that cannot matter."""
    prepared = []
    dropped = 0
    for op in ops:
        p = model.prepare(op, source)
        if p is None:
            dropped += 1
        else:
            prepared.append(p)
    pruned = 0
    # a "differs" observation can be satisfied by any write, observed or not: no pruning then
    if model.prunes_unobserved_writes and not any(p.kind == DIFFERS for p in prepared):
        observed: set[Any] = set()
        for p in prepared:
            op = p.operation
            if op.f == "read":
                observed.add(freeze(op.value))
            elif op.f == "cas":
                observed.add(freeze(op.invoke.value[0]))
        kept = [p for p in prepared if not (p.crashed and p.writes not in observed)]
        pruned = len(prepared) - len(kept)
        prepared = kept
    crashed = sum(1 for p in prepared if p.crashed)
    stats = {
        "operations": len(ops),
        "searched": len(prepared),
        "crashed": crashed,
        "dropped": dropped,
        "pruned": pruned,
    }
    return prepared, stats


def explain(model: Model, prepared: list[Prepared], outcome: Outcome, initial: Any) -> dict[str, Any]:
    """Turn the deepest partial linearization into something a person can act on."""
    prefix_ops = [prepared[i] for i in outcome.prefix]
    state = outcome.state
    placed = set(outcome.prefix)
    blocked = prepared[outcome.blocked] if outcome.blocked is not None else None
    result: dict[str, Any] = {}
    if blocked is not None:
        result["op"] = op_summary(blocked.operation)
        horizon = blocked.operation.ret if blocked.operation.ret is not None else 1 << 62
    else:
        horizon = 1 << 62
    result["state"] = model.describe_state(state)
    result["prefix-length"] = len(prefix_ops)
    result["prefix"] = [op_summary(p.operation) for p in prefix_ops[-PREFIX_SHOWN:]]
    pending = []
    for i, p in enumerate(prepared):
        if i in placed or p.operation.call > horizon:
            continue
        nxt = p.step(state)
        if nxt is ILLEGAL:
            why = model.why_illegal(p, state)
        elif p.crashed:
            continue  # a crashed op that could go here but does not help
        else:
            why = f"possible here (state would become {model.describe_state(nxt)}) but every order after it fails"
        pending.append({"op": op_summary(p.operation), "why": why})
    result["pending"] = pending[:PREFIX_SHOWN]
    if blocked is not None:
        result["summary"] = (
            f"after linearizing {len(prefix_ops)} operation(s) the model is in state "
            f"{model.describe_state(state)}; {blocked.operation.describe()} completed but cannot be placed"
        )
    else:
        result["summary"] = "no linearization exists"
    return result


def interleave(
    prepared: dict[Any, list[Prepared]],
    initial: Any,
    deadline: float | None,
    memory_limit_mb: float | None,
    quantum: int,
    stop: Callable[[], bool] | None = None,
) -> tuple[dict[Any, Outcome], dict[Any, str], Any]:
    """Search every key round-robin until one is refuted, all finish, or a limit is hit.

    Returns (outcomes of finished keys, {key: cause} for keys given up, the refuted key or _NONE).
    """
    gens: dict[Any, Generator[None, None, Outcome]] = {key: search(p, initial, quantum) for key, p in prepared.items()}
    outcomes: dict[Any, Outcome] = {}
    unknown: dict[Any, str] = {}
    invalid_key: Any = _NONE
    active = list(gens)
    try:
        while active:
            still = []
            for key in active:
                try:
                    next(gens[key])
                    still.append(key)
                except StopIteration as done:
                    outcomes[key] = done.value
                    if not done.value.valid:
                        return outcomes, unknown, key
            active = still
            if not active:
                break
            if stop is not None and stop():
                break
            if deadline is not None and time.monotonic() > deadline:
                unknown.update((k, "timeout") for k in active)
                break
            if memory_limit_mb is not None and _peak_rss_mb() > memory_limit_mb:
                unknown.update((k, "out-of-memory") for k in active)
                break
    finally:
        for g in gens.values():
            g.close()
    return outcomes, unknown, invalid_key


def _search_forked(
    prepared: dict[Any, list[Prepared]],
    initial: Any,
    jobs: int,
    deadline: float | None,
    memory_limit_mb: float | None,
    quantum: int,
) -> tuple[dict[Any, Outcome], dict[Any, str], Any, float]:
    """Split keys over `jobs` processes (this one and forked children); the first refutation stops them all."""
    import mmap

    from checkers.forked import balanced, map_forked

    refuted = mmap.mmap(-1, 1)  # shared with the children: set by the first that refutes a key
    keys = list(prepared)
    sizes = [len(prepared[k]) for k in keys]
    groups = balanced(sizes, jobs)
    per_process_mb = memory_limit_mb / len(groups) if memory_limit_mb is not None else None

    def search_group(group: list[int]) -> tuple[dict[Any, Outcome], dict[Any, str], bool, Any, float]:
        mine = {keys[i]: prepared[keys[i]] for i in sorted(group, key=lambda i: -sizes[i])}
        outcomes, unknown, invalid = interleave(
            mine, initial, deadline, per_process_mb, quantum, stop=lambda: refuted[0] == 1
        )
        if invalid is not _NONE:
            refuted[0] = 1
        return outcomes, unknown, invalid is not _NONE, invalid if invalid is not _NONE else None, _peak_rss_mb()

    outcomes: dict[Any, Outcome] = {}
    unknown: dict[Any, str] = {}
    invalid_key: Any = _NONE
    rss = 0.0
    done = map_forked(search_group, [[g] for g in groups])
    if any(result is None for result in done):
        raise RuntimeError(f"{sum(r is None for r in done)} linearizability worker process(es) failed")
    for result in done:
        assert result is not None
        ((group_outcomes, group_unknown, has_invalid, key, group_rss),) = result
        outcomes.update(group_outcomes)
        unknown.update(group_unknown)
        rss += group_rss
        if has_invalid and invalid_key is _NONE:
            invalid_key = key
    return outcomes, unknown, invalid_key, rss


def check(
    history: History,
    model_name: str,
    initial: Any = None,
    time_limit: float | None = None,
    memory_limit_mb: float | None = DEFAULT_MEMORY_LIMIT_MB,
    quantum: int = 2048,
    jobs: int = 1,
    cas_mismatch: bool = False,
) -> dict[str, Any]:
    """Check a history against a model. Returns the result dict (valid: True/False/"unknown").

    With `jobs > 1`, keys are searched in that many forked processes (fail-fast across them).
    With `cas_mismatch`, a `fail` cas with error "cas-mismatch" is a read of any value but its
    expected one (models.CAS_MISMATCH); by default every `fail` is dropped, as in Knossos.
    """
    started = time.monotonic()
    deadline = started + time_limit if time_limit is not None else None
    model = make_model(model_name, initial, cas_mismatch)
    ops = [op for op in history.operations()]
    parts = partition(ops)
    if isinstance(model, MultiRegister):
        names = set()
        for op in ops:
            if op.type != "fail":
                names.update(m[1] for m in model.micro_ops(op, history.source))
        model.bind(names)

    prepared: dict[Any, list[Prepared]] = {}
    totals = {"operations": 0, "searched": 0, "crashed": 0, "dropped": 0, "pruned": 0}
    for key, part in parts.items():
        prepared[key], stats = prepare(model, part, history.source)
        for k, v in stats.items():
            totals[k] += v

    searched = sum(len(p) for p in prepared.values())
    if jobs > 1 and len(prepared) > 1 and searched >= PARALLEL_MIN_OPS:
        outcomes, unknown, invalid_key, rss = _search_forked(
            prepared, model.initial, jobs, deadline, memory_limit_mb, quantum
        )
    else:
        outcomes, unknown, invalid_key = interleave(prepared, model.initial, deadline, memory_limit_mb, quantum)
        rss = _peak_rss_mb()

    steps = sum(o.steps for o in outcomes.values())
    configs = sum(o.configurations for o in outcomes.values())
    result: dict[str, Any] = {"valid": True, "model": model.name}
    if invalid_key is not _NONE:
        outcome = outcomes[invalid_key]
        failure = explain(model, prepared[invalid_key], outcome, model.initial)
        failure = {"key": invalid_key, **failure}
        result["valid"] = False
        result["anomaly-types"] = ["nonlinearizable"]
        result["failure"] = failure
    elif unknown:
        result["valid"] = "unknown"
        causes = sorted(set(unknown.values()))
        result["cause"] = causes[0] if len(causes) == 1 else causes
        result["unknown-keys"] = [{"key": k, "cause": c} for k, c in unknown.items()][:50]
    result["keys"] = {
        "total": len(parts),
        "valid": sum(1 for o in outcomes.values() if o.valid),
        "invalid": 0 if invalid_key is _NONE else 1,
        "unknown": len(unknown),
        "not-finished": len(parts) - len(outcomes) - len(unknown),
    }
    result["stats"] = {
        **totals,
        "configurations": configs,
        "steps": steps,
        "seconds": round(time.monotonic() - started, 4),
        "peak-rss-mb": round(rss, 1),
    }
    return result


def describe_failure(result: dict[str, Any]) -> str:
    """One human line for an invalid result."""
    failure = result.get("failure") or {}
    key = failure.get("key")
    where = f"key {show(key)}: " if key is not None else ""
    return where + str(failure.get("summary", "not linearizable"))
