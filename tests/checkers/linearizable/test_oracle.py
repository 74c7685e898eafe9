"""The WGL checker agrees with a brute-force oracle on random small concurrent histories."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from checkers.history import from_dicts
from checkers.linearizable import check

VALUES = (None, 0, 1, 2)


# ---------------------------------------------------------------- the oracle
def _step(model: str, state: Any, f: str, value: Any, crashed: bool) -> tuple[bool, Any]:
    """Sequential semantics written independently of checkers.linearizable.models."""
    if model == "cas-register":
        if f == "read":
            return (True, state) if crashed or state == value else (False, state)
        if f == "write":
            return True, value
        exp, new = value
        return (True, new) if state == exp else (False, state)
    if model == "kv-append":
        if f == "get":
            return (True, state) if crashed or state == value else (False, state)
        if f == "put":
            return True, value
        return True, state + value
    if model == "mutex":
        if f == "acquire":
            return (True, True) if not state else (False, state)
        return (True, False) if state else (False, state)
    raise AssertionError(model)


def oracle(model: str, ops: list[dict[str, Any]], initial: Any) -> bool:
    """Does some subset of crashed ops plus all ok ops have a legal order respecting real time?"""
    live = [o for o in ops if o["type"] in ("ok", "info") or o.get("mismatch")]
    must = frozenset(i for i, o in enumerate(live) if o["type"] == "ok" or o.get("mismatch"))

    def rec(done: frozenset[int], state: Any) -> bool:
        if must <= done:
            return True
        for i, o in enumerate(live):
            if i in done:
                continue
            # o can go next only if no other pending op must precede it in real time
            if any(j not in done and j != i and live[j]["ret"] < o["call"] for j in range(len(live))):
                continue
            if o.get("mismatch"):  # a compare that failed: the register held something else
                ok, nxt = state != o["value"][0], state
            else:
                ok, nxt = _step(model, state, o["f"], o["value"], o["type"] == "info")
            if ok and rec(done | {i}, nxt):
                return True
        return False

    return rec(frozenset(), initial)


# ---------------------------------------------------------------- generators
@st.composite
def plans(draw: st.DrawFn, model: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A random concurrent execution, its history rows, and the oracle's op list."""
    slots = draw(st.integers(1, 3))
    n = draw(st.integers(1, 7))
    clock = [0] * slots
    generation = [0] * slots
    planned = []
    for k in range(n):
        slot = draw(st.integers(0, slots - 1))
        start = clock[slot] + draw(st.integers(0, 3))
        end = start + draw(st.integers(1, 6))
        lin = draw(st.integers(start, end))
        if model == "cas-register":
            f = draw(st.sampled_from(["read", "write", "cas"]))
            arg = (
                None
                if f == "read"
                else draw(st.sampled_from(VALUES[1:]))
                if f == "write"
                else [draw(st.sampled_from(VALUES)), draw(st.sampled_from(VALUES[1:]))]
            )
        elif model == "kv-append":
            f = draw(st.sampled_from(["get", "put", "append"]))
            arg = None if f == "get" else draw(st.sampled_from(["a", "b", "c"]))
        else:
            f = draw(st.sampled_from(["acquire", "release"]))
            arg = None
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
        happens = outcome == "ok" or (outcome == "info" and draw(st.booleans()))
        process = slot + slots * generation[slot]
        if outcome == "info":
            generation[slot] += 1
        clock[slot] = end + 1
        planned.append(
            {
                "k": k,
                "process": process,
                "f": f,
                "arg": arg,
                "start": start,
                "end": end,
                "lin": lin,
                "outcome": outcome,
                "happens": happens,
                "never_completes": outcome == "info" and draw(st.booleans()),
            }
        )
    # apply the ops that happen at their linearization points to get what reads saw
    state: Any = "" if model == "kv-append" else (False if model == "mutex" else None)
    results: dict[int, Any] = {}
    for p in sorted(planned, key=lambda p: (p["lin"], p["k"])):
        if not p["happens"]:
            continue
        ok, nxt = _step(model, state, p["f"], p["arg"] if p["f"] not in ("read", "get") else state, False)
        if not ok:
            if p["outcome"] == "ok":
                p["outcome"] = "fail"  # a cas/acquire that could not succeed reports a definite failure
            p["happens"] = False
            continue
        results[p["k"]] = state if p["f"] in ("read", "get") else p["arg"]
        state = nxt
    # sometimes corrupt a read so that some histories are not linearizable
    reads = [p for p in planned if p["f"] in ("read", "get") and p["outcome"] == "ok"]
    if reads and draw(st.booleans()):
        victim = draw(st.sampled_from(reads))
        choices = VALUES if model == "cas-register" else ("", "a", "ab", "ba", "x")
        results[victim["k"]] = draw(st.sampled_from([v for v in choices if v != results.get(victim["k"])]))
    # for the mutex, sometimes claim success for an acquire/release that could not succeed
    failed = [p for p in planned if p["outcome"] == "fail"]
    if model == "mutex" and failed and draw(st.booleans()):
        draw(st.sampled_from(failed))["outcome"] = "ok"
    events = []
    for p in planned:
        events.append((p["start"], 1, p["k"], "invoke"))
        if not p["never_completes"]:
            events.append((p["end"], 0, p["k"], p["outcome"]))
    events.sort()
    rows: list[dict[str, Any]] = []
    by_k = {p["k"]: p for p in planned}
    pos: dict[int, dict[str, int]] = {}
    for t, _, k, typ in events:
        p = by_k[k]
        if p["f"] in ("read", "get"):
            value = None if typ != "ok" else results.get(k, state)
        else:
            value = p["arg"]
        rows.append({"time": t, "process": p["process"], "type": typ, "f": p["f"], "value": value})
        pos.setdefault(k, {})["call" if typ == "invoke" else "ret"] = len(rows) - 1
    oracle_ops = []
    for p in planned:
        typ = p["outcome"]
        value = rows[pos[p["k"]]["ret"]]["value"] if typ == "ok" else p["arg"]
        if p["f"] in ("read", "get") and typ != "ok":
            value = None
        oracle_ops.append(
            {
                "f": p["f"],
                "value": value,
                "type": "info" if p["never_completes"] else typ,
                "call": pos[p["k"]]["call"],
                "ret": pos[p["k"]].get("ret", 1 << 30) if typ == "ok" else 1 << 30,
                "done": pos[p["k"]].get("ret"),
            }
        )
    return rows, oracle_ops


INITIAL = {"cas-register": None, "kv-append": "", "mutex": False}


def _agree(model: str, plan: tuple[list[dict[str, Any]], list[dict[str, Any]]], cas_mismatch: bool = False) -> None:
    rows, ops = plan
    history = from_dicts(rows)
    expected = oracle(model, ops, INITIAL[model])
    result = check(history, model, cas_mismatch=cas_mismatch)
    assert result["valid"] is expected, (result, rows)
    if not expected:
        assert result["failure"]["summary"]


@given(plans("cas-register"))
def test_cas_register_agrees_with_oracle(plan: Any) -> None:
    _agree("cas-register", plan)


@st.composite
def marked_plans(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """A cas-register plan where some failed cas say "cas-mismatch" (truthfully or not), and whether any do."""
    rows, ops = draw(plans("cas-register"))
    rows = [dict(r) for r in rows]
    ops = [dict(o) for o in ops]
    marked = False
    for o in ops:
        if o["f"] == "cas" and o["type"] == "fail" and o["done"] is not None and draw(st.booleans()):
            rows[o["done"]]["error"] = "cas-mismatch"
            o["mismatch"] = True
            o["ret"] = o["done"]
            marked = True
    return rows, ops, marked


@given(marked_plans())
def test_cas_mismatch_agrees_with_oracle(plan: Any) -> None:
    """Opted in, a fail cas marked cas-mismatch is a read of any value but the expected one."""
    rows, ops, _ = plan
    _agree("cas-register", (rows, ops), cas_mismatch=True)


@given(marked_plans())
def test_cas_mismatch_is_ignored_by_default(plan: Any) -> None:
    """By default a marked fail cas did not happen, exactly as an unmarked one."""
    rows, ops, _ = plan
    unmarked = [{**o, "mismatch": False} for o in ops]
    _agree("cas-register", (rows, unmarked))


@given(plans("kv-append"))
def test_kv_append_agrees_with_oracle(plan: Any) -> None:
    _agree("kv-append", plan)


@given(plans("mutex"))
def test_mutex_agrees_with_oracle(plan: Any) -> None:
    _agree("mutex", plan)


@given(st.lists(plans("cas-register"), min_size=1, max_size=3))
def test_keys_compose(plans_: list[Any]) -> None:
    """A keyed history is valid iff every key's sub-history is (P-compositionality), in 1 or 2 processes."""
    rows: list[dict[str, Any]] = []
    expected = True
    offset = 0
    for key, (sub_rows, ops) in enumerate(plans_):
        expected &= oracle("cas-register", ops, None)
        for r in sub_rows:
            rows.append({**r, "key": f"k{key}", "process": r["process"] + offset})
        offset += 100
    # interleave keys by time so that keys overlap in the merged history
    rows.sort(key=lambda r: r["time"])
    history = from_dicts(rows)
    assert check(history, "cas-register")["valid"] is expected
    assert check(history, "cas-register", jobs=2)["valid"] is expected


@given(st.sampled_from(["cas-register", "kv-append", "mutex"]).flatmap(lambda m: st.tuples(st.just(m), plans(m))))
def test_search_order_does_not_change_verdicts(case: Any) -> None:
    """Trying the first-returning operation first (probing) or not, every partition agrees with the oracle."""
    from checkers.linearizable.check import prepare
    from checkers.linearizable.models import make_model
    from checkers.linearizable.wgl import run

    model_name, (rows, ops) = case
    expected = oracle(model_name, ops, INITIAL[model_name])
    model = make_model(model_name)
    prepared, _ = prepare(model, from_dicts(rows).operations(), "<plan>")
    assert run(prepared, model.initial, probing=True).valid is expected
    assert run(prepared, model.initial, probing=False).valid is expected
