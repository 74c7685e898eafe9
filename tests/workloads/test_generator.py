"""Generator combinators as pure values: what they emit, when, on which threads, and how they react."""

from __future__ import annotations

import random

from workloads import generator as gen
from workloads.generator import NEMESIS, PENDING, SECOND, Context


def ctx(time: int = 0, threads: int = 3, free: set | None = None, nemesis: bool = True, seed: int = 0) -> Context:
    workers = {t: t for t in range(threads)}
    if nemesis:
        workers[NEMESIS] = NEMESIS
    return Context(time, workers, frozenset(workers if free is None else free), random.Random(seed))


def drain(g: gen.Generator | None, c: Context, n: int = 100) -> list[dict]:
    """Ops a generator emits at a fixed context, as long as it answers with ops (each one dispatched at once)."""
    out = []
    while g is not None and len(out) < n:
        r = g.op(c)
        if r is None:
            break
        op, g = r
        if op is PENDING:
            break
        out.append(op)
        if g is not None:
            g = g.update(c, {**op, "type": "invoke"})
    return out


def test_plain_values_lift_to_generators() -> None:
    c = ctx()
    assert [o["f"] for o in drain(gen.lift([{"f": "a"}, {"f": "b"}]), c)] == ["a", "b"]
    ops = drain(gen.limit(3, lambda ctx: {"f": "read"}), c)
    assert [o["f"] for o in ops] == ["read"] * 3
    assert all(o["type"] == "invoke" and o["time"] == 0 and o["process"] in (0, 1, 2, NEMESIS) for o in ops)


def test_fill_waits_for_a_free_thread() -> None:
    assert gen.Once({"f": "x"}).op(ctx(free=set()))[0] is PENDING
    # a fixed process must itself be free
    assert gen.Once({"f": "x", "process": 1}).op(ctx(free={0}))[0] is PENDING
    op, nxt = gen.Once({"f": "x", "process": 1}).op(ctx(free={1}))
    assert op["process"] == 1 and nxt is None


def test_fn_is_not_called_while_every_thread_is_busy() -> None:
    calls = []
    g = gen.Fn(lambda c: calls.append(1) or {"f": "w"})
    assert g.op(ctx(free=set()))[0] is PENDING
    assert calls == []
    assert gen.Fn(lambda c: None).op(ctx()) is None


def test_clients_and_nemesis_restrict_threads() -> None:
    c = ctx()
    assert {o["process"] for o in drain(gen.clients(gen.repeat({"f": "r"}, 20)), c)} <= {0, 1, 2}
    assert {o["process"] for o in drain(gen.nemesis(gen.repeat({"f": "kill"}, 5)), c)} == {NEMESIS}
    # no client thread free: a client generator is pending even though the nemesis thread is free
    assert gen.clients({"f": "r"}).op(ctx(free={NEMESIS}))[0] is PENDING


def test_mix_draws_from_every_generator_until_all_are_exhausted() -> None:
    g = gen.mix([gen.limit(5, lambda c: {"f": "a"}), gen.limit(5, lambda c: {"f": "b"})])
    fs = [o["f"] for o in drain(g, ctx())]
    assert sorted(fs) == ["a"] * 5 + ["b"] * 5 and fs != sorted(fs)


def test_stagger_spaces_operations_with_mean_dt() -> None:
    g = gen.stagger(0.1, gen.repeat({"f": "r"}, 400))
    times = [o["time"] for o in drain(g, ctx(), 400)]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(0 <= gap <= 0.2 * SECOND for gap in gaps)
    assert 0.08 * SECOND < sum(gaps) / len(gaps) < 0.12 * SECOND
    d = [o["time"] for o in drain(gen.delay(0.5, gen.repeat({"f": "r"}, 3)), ctx(time=7))]
    assert d == [7, 7 + SECOND // 2, 7 + SECOND]


def test_time_limit_counts_from_the_first_question_and_cuts_ops_past_the_deadline() -> None:
    g = gen.time_limit(1.0, gen.delay(0.3, gen.repeat({"f": "r"})))
    ops = drain(g, ctx(time=5 * SECOND))
    assert [o["time"] - 5 * SECOND for o in ops] == [0, int(0.3 * SECOND), int(0.6 * SECOND), int(0.9 * SECOND)]
    # a pending answer already fixes the deadline
    g2 = gen.time_limit(1.0, gen.clients({"f": "r"}))
    _, g2 = g2.op(ctx(time=0, free=set()))
    assert g2.op(ctx(time=2 * SECOND)) is None


def test_phases_wait_for_every_thread() -> None:
    g = gen.phases({"f": "a"}, {"f": "b"})
    op, g = g.op(ctx(free={0, 1, 2, NEMESIS}))
    assert op["f"] == "a"
    busy = ctx(free={1, 2, NEMESIS})
    g = g.update(busy, {**op, "type": "invoke"})
    assert g.op(busy)[0] is PENDING  # thread 0 still busy with "a"
    assert g.op(ctx())[0]["f"] == "b"


def test_sleep_is_pending_until_its_time_then_exhausted() -> None:
    g = gen.lift([gen.sleep(1.0), {"f": "after"}])
    op, g = g.op(ctx(time=0))
    assert op is PENDING
    assert g.op(ctx(time=SECOND // 2))[0] is PENDING
    assert g.op(ctx(time=SECOND))[0]["f"] == "after"


def test_each_thread_gives_every_thread_its_own_copy() -> None:
    g = gen.clients(gen.each_thread([{"f": "x"}, {"f": "y"}]))
    ops = drain(g, ctx())
    assert sorted((o["process"], o["f"]) for o in ops) == [(t, f) for t in range(3) for f in ("x", "y")]


def test_until_ok_stops_after_an_ok_of_its_own() -> None:
    g = gen.until_ok(gen.repeat({"f": "read", "key": "k"}))
    c = ctx(threads=1, nemesis=False)
    op, g = g.op(c)
    g = g.update(c, {**op, "type": "invoke"}).update(c, {**op, "type": "fail"})
    op, g = g.op(c)
    assert op["f"] == "read"
    g = g.update(c, {"type": "ok", "process": 99, "f": "read"})  # someone else's ok
    assert g.op(c) is not None
    g = g.update(c, {**op, "type": "ok"})
    assert g.op(c) is None


def test_schedule_is_anchored_at_first_question() -> None:
    events = [{"at": SECOND, "f": "kill", "value": "leader"}, {"at": 3 * SECOND, "f": "start", "value": None}]
    g = gen.nemesis(gen.schedule(events))
    op, g = g.op(ctx(time=10 * SECOND))
    assert (op["f"], op["time"], op["process"]) == ("kill", 11 * SECOND, NEMESIS)
    assert g.op(ctx(time=10 * SECOND, free={0}))[0] is PENDING  # nemesis busy
    op, g = g.op(ctx(time=12 * SECOND))
    assert (op["f"], op["time"]) == ("start", 13 * SECOND)
    assert g.op(ctx()) is None


def test_any_of_takes_the_soonest_and_keeps_the_others_answers() -> None:
    draws = []

    def client_op(c: Context) -> dict:
        draws.append(c.time)
        return {"f": "w", "value": len(draws)}

    g = gen.any_of(gen.clients(gen.Fn(client_op)), gen.nemesis(gen.schedule([{"at": 5 * SECOND, "f": "kill"}])))
    op, g = g.op(ctx(time=0))
    assert op["f"] == "w"
    op2, g = g.op(ctx(time=0, free={NEMESIS}))  # clients busy: the buffered nemesis op is next
    assert (op2["f"], op2["time"]) == ("kill", 5 * SECOND)
    # clients free again: the client draw that lost to nothing is reused, not drawn again
    g = gen.any_of(gen.clients(gen.Fn(client_op)), gen.nemesis(gen.schedule([{"at": 5 * SECOND, "f": "kill"}])))
    draws.clear()
    op, g = g.op(ctx(time=0, free={NEMESIS}))  # client pending (not free), nemesis op emitted
    assert op["f"] == "kill" and draws == []
    op, g = g.op(ctx(time=SECOND))
    assert op["f"] == "w" and draws == [SECOND]
    # the nemesis anchor was fixed at the first question: not re-anchored later
    g = gen.any_of(gen.clients(gen.Fn(client_op)), gen.nemesis(gen.schedule([{"at": 5 * SECOND, "f": "kill"}])))
    for t in range(0, 4):
        op, g = g.op(ctx(time=t * SECOND))
        assert op["f"] == "w"
        g = g.update(ctx(time=t * SECOND), {**op, "type": "invoke"})
    op, g = g.op(ctx(time=4 * SECOND, free={NEMESIS}))
    assert (op["f"], op["time"]) == ("kill", 5 * SECOND)


def test_on_threads_routes_updates_by_thread() -> None:
    g = gen.on_threads(lambda t: t == 1, gen.until_ok(gen.repeat({"f": "r"})))
    c = ctx()
    op, g = g.op(c)
    assert op["process"] == 1
    g = g.update(c, {"type": "ok", "process": 0, "f": "r"})  # another thread: ignored
    assert g.op(c) is not None
    g = g.update(c, {**op, "type": "ok"})
    assert g.op(c) is None


def test_log_ops_need_no_thread() -> None:
    op, nxt = gen.log("hello").op(ctx(free=set()))
    assert op == {"type": "log", "time": 0, "value": "hello"} and nxt is None


def test_a_thread_drawn_free_is_used_whatever_else_is_busy() -> None:
    """One draw over all threads: the same draw picks the same thread whether or not others are busy."""
    for seed in range(20):
        all_free = ctx(threads=4, nemesis=False, seed=seed).some_free_process()
        others_busy = ctx(threads=4, nemesis=False, seed=seed, free={all_free}).some_free_process()
        assert others_busy == all_free
    assert ctx(threads=4, nemesis=False, free=set()).some_free_process() is None


def test_plan_replays_each_lane_in_order_at_its_times() -> None:
    lanes = {
        0: [{"seq": 0, "at": 5, "f": "write", "key": "r0", "value": 1, "node": "n2", "client": 0}],
        1: [{"seq": 1, "at": 2, "f": "read", "key": "r0", "value": None, "node": "n1", "client": 1}],
    }
    g = gen.clients(gen.plan(lanes, 1.0))
    first, g = g.op(ctx(time=100))
    assert (first["time"], first["process"], first["node"], first["f"]) == (102, 1, "n1", "read")
    assert "client" not in first and "seq" not in first
    busy = ctx(time=100, free={0, NEMESIS})
    second, g = g.update(busy, {**first, "type": "invoke"}).op(busy)
    assert (second["time"], second["process"], second["value"]) == (105, 0, 1)
    assert g.op(ctx(time=200)) is None  # every lane done
    _, late = gen.clients(gen.plan(lanes, 1e-6)).op(ctx(time=100))
    assert late.op(ctx(time=100 + SECOND)) is None  # the other lane's op is out of time: dropped


def test_ignores_events_sees_through_wrappers_that_pass_events_on() -> None:
    """The interpreters skip `update` (and the context it needs) only for generators that return themselves."""
    ops = gen.Fn(lambda ctx: {"f": "read"})
    quiet = gen.clients(gen.time_limit(1.0, gen.stagger(0.01, ops)))
    assert gen.ignores_events(quiet) and gen.ignores_events(None)
    loud = gen.clients(gen.time_limit(1.0, gen.until_ok(gen.repeat({"f": "read"}))))
    assert not gen.ignores_events(loud)
    ctx = Context(0, {0: 0, 1: 1}, frozenset({0, 1}), random.Random(1))
    assert quiet.update(ctx, {"type": "ok", "process": 0, "f": "read"}) is quiet
    assert loud.update(ctx, {"type": "ok", "process": 0, "f": "read"}) is not loud


def test_a_context_given_its_thread_order_behaves_as_one_that_sorts() -> None:
    """`order` (the interpreter's threads, sorted once) changes nothing a generator sees or draws."""
    workers = {3: 13, NEMESIS: NEMESIS, 0: 10, 2: 12, 1: 11}
    free = frozenset({0, 2, 3, NEMESIS})
    order = tuple(sorted(workers, key=gen.thread_order))
    for seed in range(20):
        plain = Context(5, workers, free, random.Random(seed))
        given = Context(5, workers, free, random.Random(seed), order)
        assert plain.threads() == given.threads() == [0, 1, 2, 3, NEMESIS]
        assert [plain.some_free_process() for _ in range(5)] == [given.some_free_process() for _ in range(5)]
    inner = gen.on_threads(lambda t: t != NEMESIS, gen.Fn(lambda ctx: {"f": "read"}))
    r = inner.op(Context(5, workers, free, random.Random(3), order))
    s = inner.op(Context(5, workers, free, random.Random(3)))
    assert r is not None and s is not None and r[0] == s[0]
