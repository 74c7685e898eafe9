"""Jepsen-style generators: immutable values that say which operation comes next, and when.

A generator answers `op(ctx)` with None (exhausted), `(PENDING, successor)` (nothing now;
ask again after time passes or an operation completes) or `(op, successor)` where `op` is a
dict with `process` and `time` (nanoseconds since the test started; a time in the future
means "not before then"). `update(ctx, event)` returns the generator that has seen an
invocation or completion. Generators never sleep or do I/O: an interpreter drives them, in
real time on real clusters and in virtual time in the simulator.

Plain values lift to generators: a dict is one operation, a list runs its items in order,
a callable `f(ctx) -> op | None` is asked for an operation each time.

Combinators: `mix`, `any_of`, `limit`, `repeat`, `stagger`, `delay`, `time_limit`, `sleep`,
`log`, `phases`/`synchronize`, `on_threads`, `clients`, `nemesis`, `each_thread`,
`until_ok`, `schedule` (timed nemesis events), `plan` (recorded operations again).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NEMESIS = "nemesis"
SECOND = 1_000_000_000


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()

Op = dict[str, Any]
Thread = Hashable
Result = tuple[Any, "Generator | None"] | None


def thread_order(t: Thread) -> tuple[int, Any, str]:
    """The sort key of threads: client threads by number, then named ones (the nemesis)."""
    return (1, 0, t) if isinstance(t, str) else (0, t, "")


@dataclass(frozen=True)
class Context:
    """What a generator may look at: the time, the threads (all / free) and their current processes."""

    time: int
    workers: Mapping[Thread, Any]  # thread -> its current process (only the threads in scope)
    free: frozenset[Thread]
    rng: random.Random
    # the threads of `workers` in `threads()` order, when the caller knows them (they rarely change)
    order: tuple[Thread, ...] | None = field(default=None, compare=False, repr=False)

    def threads(self) -> list[Thread]:
        if self.order is not None:
            return list(self.order)
        return sorted(self.workers, key=thread_order)

    def free_threads(self) -> list[Thread]:
        return sorted(self.free, key=thread_order)

    def thread_of(self, process: Any) -> Thread | None:
        for t, p in self.workers.items():
            if p == process:
                return t
        return None

    def some_free_process(self) -> Any:
        """The process of a free thread chosen at random; None if every thread is busy.

        One draw over all the threads in scope, then the first free one from there on: the draws do
        not depend on which threads happen to be busy, so runtimes whose operations take different
        times still give an operation the same thread whenever the one drawn is free in both.
        """
        if not self.free:
            return None
        threads = self.threads()
        i = self.rng.randrange(len(threads)) if len(threads) > 1 else 0
        for t in threads[i:] + threads[:i]:
            if t in self.free:
                return self.workers[t]
        return None

    def restrict(self, pred: Callable[[Thread], bool]) -> Context:
        workers = {t: p for t, p in self.workers.items() if pred(t)}
        return Context(self.time, workers, frozenset(t for t in self.free if t in workers), self.rng)

    def all_free(self) -> bool:
        return set(self.workers) <= self.free


class Generator:
    """Base class: override `op`, and `update` when the generator reacts to events."""

    def op(self, ctx: Context) -> Result:
        raise NotImplementedError

    def update(self, ctx: Context, event: Op) -> Generator | None:
        return self


def lift(x: Any) -> Generator | None:
    """Turn a dict (one op), a list (a sequence), a callable (an op source) or a generator into a generator."""
    if x is None or isinstance(x, Generator):
        return x
    if isinstance(x, Mapping):
        return Once(x)
    if isinstance(x, (list, tuple)):
        return Seq([g for g in (lift(i) for i in x) if g is not None])
    if callable(x):
        return Fn(x)
    raise TypeError(f"cannot make a generator of {x!r}")


def fill(op: Mapping[str, Any], ctx: Context) -> Op | Any:
    """Complete an op with a free process and the current time (PENDING when no thread is free)."""
    out = dict(op)
    out.setdefault("type", "invoke")
    out.setdefault("time", ctx.time)
    if out["type"] == "log":
        return out
    if "process" in out:
        t = ctx.thread_of(out["process"])
        return out if t is not None and t in ctx.free else PENDING
    p = ctx.some_free_process()
    if p is None:
        return PENDING
    out["process"] = p
    return out


class Once(Generator):
    """One operation, then exhausted."""

    def __init__(self, op: Mapping[str, Any]) -> None:
        self.template = dict(op)

    def op(self, ctx: Context) -> Result:
        out = fill(self.template, ctx)
        return (PENDING, self) if out is PENDING else (out, None)


class Fn(Generator):
    """Asks `f(ctx)` for each operation (only when a thread is free to run it); None from f ends it."""

    def __init__(self, f: Callable[[Context], Mapping[str, Any] | None]) -> None:
        self.f = f

    def op(self, ctx: Context) -> Result:
        if not ctx.free:
            return (PENDING, self)
        template = self.f(ctx)
        if template is None:
            return None
        out = fill(template, ctx)
        return (PENDING, self) if out is PENDING else (out, self)


class Seq(Generator):
    """Each generator until it is exhausted, then the next."""

    def __init__(self, gens: Sequence[Generator]) -> None:
        self.gens = list(gens)

    def op(self, ctx: Context) -> Result:
        gens = self.gens
        while gens:
            r = gens[0].op(ctx)
            if r is None:
                gens = gens[1:]
                continue
            op, nxt = r
            return op, Seq(([nxt] if nxt is not None else []) + gens[1:])
        return None

    def update(self, ctx: Context, event: Op) -> Generator | None:
        if not self.gens:
            return self
        head = self.gens[0].update(ctx, event)
        return Seq(([head] if head is not None else []) + self.gens[1:])


class Limit(Generator):
    """At most `n` operations."""

    def __init__(self, n: int, gen: Generator | None) -> None:
        self.n, self.gen = n, gen

    def op(self, ctx: Context) -> Result:
        if self.n <= 0 or self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        op, nxt = r
        if op is PENDING:
            return op, Limit(self.n, nxt)
        return op, Limit(self.n - 1, nxt)

    def update(self, ctx: Context, event: Op) -> Generator | None:
        return Limit(self.n, self.gen.update(ctx, event)) if self.gen is not None else self


class Repeat(Generator):
    """The same generator's first operation again and again (`n` times, or forever)."""

    def __init__(self, gen: Generator, n: int | None = None) -> None:
        self.gen, self.n = gen, n

    def op(self, ctx: Context) -> Result:
        if self.n is not None and self.n <= 0:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        op, _ = r
        if op is PENDING:
            return op, self
        return op, Repeat(self.gen, None if self.n is None else self.n - 1)


class Mix(Generator):
    """Each operation from a generator chosen uniformly at random; exhausted ones drop out."""

    def __init__(self, gens: Sequence[Generator]) -> None:
        self.gens = list(gens)

    def op(self, ctx: Context) -> Result:
        gens = list(self.gens)
        while gens:
            i = ctx.rng.randrange(len(gens))
            r = gens[i].op(ctx)
            if r is None:
                del gens[i]
                continue
            op, nxt = r
            if nxt is None:
                del gens[i]
            else:
                gens[i] = nxt
            return op, Mix(gens)
        return None


class _Buffered:
    """An answer a combinator got from a child but did not emit yet (kept, never thrown away)."""

    __slots__ = ("op", "successor")

    def __init__(self, op: Op, successor: Generator | None) -> None:
        self.op, self.successor = op, successor


def _refill(op: Op, ctx: Context) -> Op | Any:
    """A buffered op again, on a free process of this context (its own if still free)."""
    t = ctx.thread_of(op.get("process"))
    if t is not None and t in ctx.free:
        return op
    return fill({k: v for k, v in op.items() if k != "process"}, ctx)


Child = tuple["Generator | None", "_Buffered | None"]


def _ask(child: Child, ctx: Context) -> tuple[Child | None, Op | None]:
    """Ask one child: (its new state or None if exhausted, a ready op or None)."""
    g, buf = child
    if buf is not None:
        op = _refill(buf.op, ctx)
        if op is PENDING:
            return child, None
        return (g, _Buffered(op, buf.successor)), op
    if g is None:
        return None, None
    r = g.op(ctx)
    if r is None:
        return None, None
    op, nxt = r
    if op is PENDING:
        return (nxt, None), None
    return (g, _Buffered(op, nxt)), op


def _update_child(child: Child, ctx: Context, event: Op) -> Child:
    g, buf = child
    if buf is not None:
        nxt = buf.successor.update(ctx, event) if buf.successor is not None else None
        return g, _Buffered(buf.op, nxt)
    return (g.update(ctx, event) if g is not None else None), None


def _emit(child: Child) -> tuple[Op, Child | None]:
    """The buffered op of a child, and the child's state once that op is emitted."""
    _, buf = child
    assert buf is not None
    return buf.op, ((buf.successor, None) if buf.successor is not None else None)


class AnyOf(Generator):
    """The soonest operation of any of the generators (Jepsen's `any`); every one sees every event.

    Answers not chosen are kept for later, so no child is asked twice for the same operation
    (random draws are not wasted, first-ask deadlines and anchors stay put).
    """

    def __init__(self, children: Sequence[Child]) -> None:
        self.children = list(children)

    @classmethod
    def of(cls, gens: Sequence[Generator]) -> AnyOf:
        return cls([(g, None) for g in gens])

    def op(self, ctx: Context) -> Result:
        kids: list[Child] = []
        best: int | None = None
        best_op: Op | None = None
        for child in self.children:
            state, op = _ask(child, ctx)
            if state is None:
                continue
            kids.append(state)
            if op is not None and (best_op is None or op["time"] < best_op["time"]):
                best, best_op = len(kids) - 1, op
        if not kids:
            return None
        if best is None:
            return PENDING, AnyOf(kids)
        op, rest = _emit(kids[best])
        kids = kids[:best] + ([rest] if rest is not None else []) + kids[best + 1 :]
        return op, AnyOf(kids)

    def update(self, ctx: Context, event: Op) -> Generator | None:
        return AnyOf([_update_child(c, ctx, event) for c in self.children])


class Stagger(Generator):
    """Operations spaced by a random 0..2·dt (mean dt) — a total rate across all threads, as Jepsen's stagger."""

    def __init__(self, dt_s: float, gen: Generator | None, next_time: int | None = None) -> None:
        self.dt, self.gen, self.next_time = dt_s, gen, next_time

    def gap(self, ctx: Context) -> int:
        return int(ctx.rng.uniform(0, 2 * self.dt) * SECOND)

    def op(self, ctx: Context) -> Result:
        if self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        op, nxt = r
        if op is PENDING:
            return op, type(self)(self.dt, nxt, self.next_time)
        t = max(op["time"], self.next_time if self.next_time is not None else ctx.time)
        return {**op, "time": t}, type(self)(self.dt, nxt, t + self.gap(ctx))

    def update(self, ctx: Context, event: Op) -> Generator | None:
        if self.gen is None:
            return self
        nxt = self.gen.update(ctx, event)
        return self if nxt is self.gen else type(self)(self.dt, nxt, self.next_time)


class Delay(Stagger):
    """Operations exactly dt apart."""

    def gap(self, ctx: Context) -> int:
        return int(self.dt * SECOND)


class TimeLimit(Generator):
    """Operations until dt seconds have passed since this generator was first asked."""

    def __init__(self, dt_s: float, gen: Generator | None, deadline: int | None = None) -> None:
        self.dt, self.gen, self.deadline = dt_s, gen, deadline

    def op(self, ctx: Context) -> Result:
        deadline = self.deadline if self.deadline is not None else ctx.time + int(self.dt * SECOND)
        if ctx.time >= deadline or self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        op, nxt = r
        if op is not PENDING and op["time"] >= deadline:
            return None
        return op, TimeLimit(self.dt, nxt, deadline)

    def update(self, ctx: Context, event: Op) -> Generator | None:
        if self.gen is None:
            return self
        nxt = self.gen.update(ctx, event)
        return self if nxt is self.gen else TimeLimit(self.dt, nxt, self.deadline)


class Sleep(Generator):
    """Nothing for dt seconds from when it is first asked, then exhausted (in a sequence: a pause)."""

    def __init__(self, dt_s: float, until: int | None = None) -> None:
        self.dt, self.until = dt_s, until

    def op(self, ctx: Context) -> Result:
        until = self.until if self.until is not None else ctx.time + int(self.dt * SECOND)
        if ctx.time >= until:
            return None
        return PENDING, Sleep(self.dt, until)


class Log(Generator):
    """A message for the run's log (a `log` op; not part of the history)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def op(self, ctx: Context) -> Result:
        return {"type": "log", "time": ctx.time, "value": self.message}, None


class Synchronize(Generator):
    """Waits until every thread in scope is free, then behaves as `gen`."""

    def __init__(self, gen: Generator | None) -> None:
        self.gen = gen

    def op(self, ctx: Context) -> Result:
        if self.gen is None:
            return None
        if not ctx.all_free():
            return PENDING, self
        return self.gen.op(ctx)

    def update(self, ctx: Context, event: Op) -> Generator | None:
        return self  # events before the barrier belong to the phase before


class OnThreads(Generator):
    """`gen` sees (and schedules) only the threads for which `pred(thread)` holds."""

    def __init__(
        self,
        pred: Callable[[Thread], bool],
        gen: Generator | None,
        scope: tuple[frozenset, frozenset, tuple] | None = None,
    ) -> None:
        self.pred, self.gen = pred, gen
        # (threads of the last context, those of them in scope, the latter in order): pred asked once per set
        self._scope = scope

    def _restrict(self, ctx: Context) -> Context:
        scope = self._scope
        if scope is None or scope[0] != ctx.workers.keys():
            threads = frozenset(ctx.workers)
            inside = frozenset(t for t in threads if self.pred(t))
            scope = self._scope = (threads, inside, tuple(sorted(inside, key=thread_order)))
        inside = scope[1]
        if len(inside) == len(scope[0]):
            return ctx  # every thread is in scope: the same view
        workers = {t: p for t, p in ctx.workers.items() if t in inside}
        return Context(ctx.time, workers, ctx.free & inside, ctx.rng, scope[2])

    def op(self, ctx: Context) -> Result:
        if self.gen is None:
            return None
        r = self.gen.op(self._restrict(ctx))
        if r is None:
            return None
        op, nxt = r
        return op, OnThreads(self.pred, nxt, self._scope)

    def update(self, ctx: Context, event: Op) -> Generator | None:
        if ignores_events(self.gen):
            return self
        t = ctx.thread_of(event.get("process"))
        if t is None or not self.pred(t):
            return self
        nxt = self.gen.update(self._restrict(ctx), event)
        return self if nxt is self.gen else OnThreads(self.pred, nxt, self._scope)


def ignores_events(g: Generator | None) -> bool:
    """True when `g.update` returns `g` itself whatever the event (so an interpreter may skip asking it)."""
    while g is not None:
        kind = type(g)
        if kind.update is Generator.update:
            return True
        if kind is TimeLimit or kind is Stagger or kind is Delay or kind is OnThreads:
            g = g.gen  # these return themselves when the generator inside does
            continue
        return False
    return True


class EachThread(Generator):
    """An independent copy of `gen` for every thread in scope (Jepsen's each-thread)."""

    def __init__(self, gen: Generator, per: Mapping[Thread, Child | None] | None = None) -> None:
        self.gen, self.per = gen, dict(per or {})

    def op(self, ctx: Context) -> Result:
        per = dict(self.per)
        best: Thread | None = None
        best_op: Op | None = None
        live = False
        for t in ctx.threads():
            child = per.get(t, (self.gen, None))
            if child is None:
                continue
            if t not in ctx.free:
                live = True
                continue
            state, op = _ask(child, ctx.restrict(lambda x, t=t: x == t))
            per[t] = state
            if state is None:
                continue
            live = True
            if op is not None and (best_op is None or op["time"] < best_op["time"]):
                best, best_op = t, op
        if not live:
            return None
        if best is None:
            return PENDING, EachThread(self.gen, per)
        op, rest = _emit(per[best])  # type: ignore[arg-type]
        per[best] = rest
        return op, EachThread(self.gen, per)

    def update(self, ctx: Context, event: Op) -> Generator | None:
        t = ctx.thread_of(event.get("process"))
        if t is None:
            return self
        child = self.per.get(t, (self.gen, None))
        if child is None:
            return self
        per = dict(self.per)
        per[t] = _update_child(child, ctx.restrict(lambda x: x == t), event)
        return EachThread(self.gen, per)


class UntilOk(Generator):
    """Operations of `gen` until one of them completes `ok`."""

    def __init__(self, gen: Generator | None, processes: frozenset[Any] = frozenset(), done: bool = False) -> None:
        self.gen, self.processes, self.done = gen, processes, done

    def op(self, ctx: Context) -> Result:
        if self.done or self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        op, nxt = r
        if op is PENDING:
            return op, UntilOk(nxt, self.processes)
        return op, UntilOk(nxt, self.processes | {op["process"]})

    def update(self, ctx: Context, event: Op) -> Generator | None:
        if self.done:
            return self
        if event.get("type") == "ok" and event.get("process") in self.processes:
            return UntilOk(self.gen, self.processes, done=True)
        return UntilOk(self.gen.update(ctx, event) if self.gen is not None else None, self.processes)


class Schedule(Generator):
    """Timed events `{"at": ns after this generator is first asked, …}` (a nemesis schedule)."""

    def __init__(self, events: Sequence[Mapping[str, Any]], anchor: int | None = None) -> None:
        self.events, self.anchor = list(events), anchor

    def op(self, ctx: Context) -> Result:
        anchor = self.anchor if self.anchor is not None else ctx.time
        if not self.events:
            return None
        event = self.events[0]
        out = fill({**event, "time": anchor + int(event["at"])}, ctx)
        if out is PENDING:
            return PENDING, Schedule(self.events, anchor)
        return out, Schedule(self.events[1:], anchor)


class Plan(Generator):
    """Recorded operations again: each lane's (client thread's, nemesis') items in order, each at anchor +
    its `at`, on the lane's current process. `ordered`: an item also waits until the items (by `seq`) in
    its `after` have completed; otherwise whatever has not started `limit_ns` after the anchor is dropped."""

    def __init__(
        self,
        lanes: Mapping[Any, Sequence[Mapping[str, Any]]],
        limit_ns: int,
        ordered: bool,
        anchor: int | None = None,
        done: frozenset[int] = frozenset(),
        inflight: Mapping[Any, int] | None = None,
    ) -> None:
        self.lanes, self.limit, self.ordered, self.anchor = dict(lanes), limit_ns, ordered, anchor
        self.done, self.inflight = done, dict(inflight or {})

    def _with(self, **kw: Any) -> Plan:
        lanes = kw.pop("lanes", self.lanes)
        state = {"anchor": self.anchor, "done": self.done, "inflight": self.inflight, **kw}
        return Plan(lanes, self.limit, self.ordered, **state)

    def op(self, ctx: Context) -> Result:
        anchor = self.anchor if self.anchor is not None else ctx.time
        if not any(self.lanes.values()):
            return None
        if not self.ordered and ctx.time >= anchor + self.limit:
            return None  # out of time, as the normal runner's time limit
        best: tuple[int, Any, Mapping[str, Any]] | None = None
        for lane, items in self.lanes.items():
            if not items or lane not in ctx.free:
                continue
            item = items[0]
            if self.ordered and not set(item.get("after", ())) <= self.done:
                continue
            t = anchor + int(item["at"])
            if best is None or t < best[0]:
                best = (t, lane, item)
        if best is None:
            return PENDING, self._with(anchor=anchor)
        t, lane, item = best
        op = {k: v for k, v in item.items() if k not in ("after", "client", "seq")}
        op.update(type="invoke", time=t, process=ctx.workers[lane])
        lanes = {**self.lanes, lane: self.lanes[lane][1:]}
        return op, self._with(anchor=anchor, lanes=lanes, inflight={**self.inflight, lane: item["seq"]})

    def update(self, ctx: Context, event: Op) -> Generator | None:
        if event.get("type") not in ("ok", "fail", "info"):
            return self
        lane = ctx.thread_of(event.get("process"))
        if lane not in self.inflight:
            return self
        inflight = {k: v for k, v in self.inflight.items() if k != lane}
        return self._with(done=self.done | {self.inflight[lane]}, inflight=inflight)


# ---------------------------------------------------------------------------------------- API


def _g(x: Any) -> Generator:
    g = lift(x)
    if g is None:
        raise ValueError("a generator is needed here")
    return g


def mix(gens: Iterable[Any]) -> Generator:
    return Mix([_g(g) for g in gens])


def any_of(*gens: Any) -> Generator:
    return AnyOf.of([_g(g) for g in gens])


def limit(n: int, gen: Any) -> Generator:
    return Limit(n, _g(gen))


def repeat(gen: Any, n: int | None = None) -> Generator:
    return Repeat(_g(gen), n)


def stagger(dt_s: float, gen: Any) -> Generator:
    return Stagger(dt_s, _g(gen))


def delay(dt_s: float, gen: Any) -> Generator:
    return Delay(dt_s, _g(gen))


def time_limit(dt_s: float, gen: Any) -> Generator:
    return TimeLimit(dt_s, _g(gen))


def sleep(dt_s: float) -> Generator:
    return Sleep(dt_s)


def log(message: str) -> Generator:
    return Log(message)


def synchronize(gen: Any) -> Generator:
    return Synchronize(_g(gen))


def phases(*gens: Any) -> Generator:
    """Each generator in turn, each starting once every thread is free."""
    return Seq([Synchronize(_g(g)) for g in gens])


def on_threads(pred: Callable[[Thread], bool], gen: Any) -> Generator:
    return OnThreads(pred, _g(gen))


def clients(gen: Any) -> Generator:
    """Only the client threads."""
    return OnThreads(lambda t: t != NEMESIS, _g(gen))


def nemesis(gen: Any) -> Generator:
    """Only the nemesis thread."""
    return OnThreads(lambda t: t == NEMESIS, _g(gen))


def each_thread(gen: Any) -> Generator:
    return EachThread(_g(gen))


def until_ok(gen: Any) -> Generator:
    return UntilOk(_g(gen))


def schedule(events: Sequence[Mapping[str, Any]]) -> Generator:
    return Schedule(events)


def plan(lanes: Mapping[Any, Sequence[Mapping[str, Any]]], limit_s: float, ordered: bool = False) -> Generator:
    """Recorded operations (`{"seq", "at", "f", …}` per lane), replayed at their times (see `Plan`)."""
    return Plan({lane: tuple(items) for lane, items in lanes.items()}, int(limit_s * SECOND), ordered)
