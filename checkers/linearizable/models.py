"""Sequential models for the linearizability checker.

A model compiles each completed operation into a *step*: a function from a state
to the next state, or `ILLEGAL` when the operation cannot happen in that state.
States are small hashable values, so (linearized set, state) pairs memoise well.

Semantics (docs/formats.md "Register ops"): registers start at `null` and reads are strict (reading
`null` means "no value"); `fail` means the operation definitely did not happen,
so failed operations are dropped; `info` (or never completed) means it may have
happened at any time after its invocation, or never. A crashed read has no
effect and is dropped too.

Opt-in (`cas_mismatch=True`): a `fail` cas whose `error` is `CAS_MISMATCH` says more
than "did not happen": the register was compared and held something other than
`expected`. It is then checked as a read of "any value but `expected`" at some point
between its invocation and its completion.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from checkers.errors import InputError
from checkers.history import Operation, freeze

ILLEGAL = object()
Step = Callable[[Any], Any]

# Step kinds the search runs inline (no function call); GENERIC calls `step`.
# OBSERVE: legal when the state equals a; DIFFERS: legal when it does not (both change nothing).
GENERIC, OBSERVE, OVERWRITE, CAS, APPEND, DIFFERS = range(6)
CAS_MISMATCH = "cas-mismatch"  # the `error` of a cas that failed because the compare failed


class Prepared:
    """One operation ready for the search."""

    __slots__ = ("operation", "step", "crashed", "twin", "writes", "kind", "a", "b")

    def __init__(
        self,
        operation: Operation,
        step: Step,
        crashed: bool,
        twin: Any = None,
        writes: Any = None,
        kind: int = GENERIC,
        a: Any = None,
        b: Any = None,
    ) -> None:
        self.operation = operation
        self.step = step
        self.crashed = crashed
        # crashed operations with the same `twin` are interchangeable (symmetry reduction)
        self.twin = twin
        # the value this operation leaves in the register, when it writes one (for pruning)
        self.writes = writes
        self.kind = kind
        self.a = a
        self.b = b


def show(value: Any) -> str:
    return json.dumps(value, default=lambda v: list(v) if isinstance(v, (tuple, frozenset)) else str(v))


class Model:
    """Base class: subclasses set `name`, `fs` and implement `compile`."""

    name = "model"
    fs: tuple[str, ...] = ()
    prunes_unobserved_writes = False

    def __init__(self, initial: Any = None, cas_mismatch: bool = False) -> None:
        self.initial = freeze(initial)
        self.cas_mismatch = cas_mismatch

    def prepare(self, op: Operation, source: str) -> Prepared | None:
        """Compile an operation, or None when it cannot matter (failed, crashed read)."""
        if op.f not in self.fs:
            raise InputError(
                f"operation {op.f!r} is not part of the {self.name} model (expected one of {', '.join(self.fs)})",
                source,
                op.line,
            )
        if op.type == "fail":
            if self.cas_mismatch and op.f == "cas" and op.complete is not None and op.complete.error == CAS_MISMATCH:
                return self.compile_mismatch(op, source)
            return None
        return self.compile(op, op.type != "ok", source)

    def compile_mismatch(self, op: Operation, source: str) -> Prepared | None:
        return None  # only registers with cas know compare failures

    def compile(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        raise NotImplementedError

    def describe_state(self, state: Any) -> str:
        return show(state)

    def why_illegal(self, prepared: Prepared, state: Any) -> str:
        return f"{prepared.operation.f} {show(prepared.operation.value)} cannot happen in state {show(state)}"


def _pair(value: Any, op: Operation, source: str) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InputError(
            f"{op.f} value must be a pair [expected, new], got {show(value)}",
            source,
            op.line,
        )
    return freeze(value[0]), freeze(value[1])


class Register(Model):
    """A read/write register."""

    name = "register"
    fs = ("read", "write")
    prunes_unobserved_writes = True

    def compile(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        f = op.f
        if f == "read":
            if crashed:
                return None
            v = freeze(op.value)
            return Prepared(op, lambda s, v=v: s if s == v else ILLEGAL, False, kind=OBSERVE, a=v)
        if f == "write":
            v = freeze(op.invoke.value)
            if isinstance(op.invoke.value, dict):
                raise InputError(f"write value must be a scalar or list, got {show(op.invoke.value)}", source, op.line)
            twin = ("write", v) if crashed else None
            return Prepared(op, lambda s, v=v: v, crashed, twin, v, kind=OVERWRITE, a=v)
        return self._compile_more(op, crashed, source)

    def _compile_more(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        raise AssertionError(op.f)  # pragma: no cover

    def why_illegal(self, prepared: Prepared, state: Any) -> str:
        op = prepared.operation
        if op.f == "read":
            return f"read {show(op.value)} but the register holds {show(state)}"
        if op.f == "cas":
            exp, new = _pair(op.invoke.value, op, "")
            if prepared.kind == DIFFERS:
                return f"cas {show(exp)}->{show(new)} failed with {CAS_MISMATCH} but the register holds {show(exp)}"
            return f"cas {show(exp)}->{show(new)} but the register holds {show(state)}"
        return super().why_illegal(prepared, state)


class CasRegister(Register):
    """A register with compare-and-set: `cas [expected, new]` swaps only when it holds `expected`."""

    name = "cas-register"
    fs = ("read", "write", "cas")

    def _compile_more(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        exp, new = _pair(op.invoke.value, op, source)
        step = lambda s, e=exp, n=new: n if s == e else ILLEGAL  # noqa: E731
        twin = ("cas", exp, new) if crashed else None
        return Prepared(op, step, crashed, twin, new, kind=CAS, a=exp, b=new)

    def compile_mismatch(self, op: Operation, source: str) -> Prepared | None:
        exp, _ = _pair(op.invoke.value, op, source)
        return Prepared(op, lambda s, e=exp: s if s != e else ILLEGAL, False, kind=DIFFERS, a=exp)


class KvAppend(Model):
    """Porcupine's string KV per key: get, put, append (concatenate); initial ""."""

    name = "kv-append"
    fs = ("get", "put", "append")

    def __init__(self, initial: Any = None, cas_mismatch: bool = False) -> None:
        super().__init__("" if initial is None else initial, cas_mismatch)

    def compile(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        f = op.f
        if f == "get":
            if crashed:
                return None
            v = op.value if op.value is not None else ""
            if not isinstance(v, str):
                raise InputError(f"get must return a string, got {show(v)}", source, op.line)
            return Prepared(op, lambda s, v=v: s if s == v else ILLEGAL, False, kind=OBSERVE, a=v)
        v = op.invoke.value
        if not isinstance(v, str):
            raise InputError(f"{f} value must be a string, got {show(v)}", source, op.line)
        if f == "put":
            return Prepared(op, lambda s, v=v: v, crashed, ("put", v) if crashed else None, kind=OVERWRITE, a=v)
        twin = ("append", v) if crashed else None
        return Prepared(op, lambda s, v=v: s + v, crashed, twin, kind=APPEND, a=v)

    def why_illegal(self, prepared: Prepared, state: Any) -> str:
        op = prepared.operation
        if op.f == "get":
            return f"get returned {show(op.value)} but the value is {show(state)}"
        return super().why_illegal(prepared, state)


class Mutex(Model):
    """A lock: acquire succeeds only when free, release only when held."""

    name = "mutex"
    fs = ("acquire", "release")

    def __init__(self, initial: Any = None, cas_mismatch: bool = False) -> None:
        super().__init__(bool(initial) and initial not in ("unlocked", "free"), cas_mismatch)

    def compile(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        if op.f == "acquire":
            return Prepared(op, lambda s: True if s is False else ILLEGAL, crashed, ("acquire",) if crashed else None)
        return Prepared(op, lambda s: False if s is True else ILLEGAL, crashed, ("release",) if crashed else None)

    def describe_state(self, state: Any) -> str:
        return "locked" if state else "unlocked"

    def why_illegal(self, prepared: Prepared, state: Any) -> str:
        f = prepared.operation.f
        return f"{f} while the lock is {'held' if state else 'free'}"


class MultiRegister(Model):
    """Knossos' multi-register: `txn` of [[read k v] [write k v] …] over named registers."""

    name = "multi-register"
    fs = ("txn",)

    def __init__(self, initial: Any = None, cas_mismatch: bool = False) -> None:
        self.names: list[Any] = sorted(initial) if isinstance(initial, dict) else []
        self.start = dict(initial) if isinstance(initial, dict) else {}
        super().__init__(None, cas_mismatch)
        self.initial = None  # fixed by bind() once every register name is known

    def bind(self, names: set[Any]) -> None:
        self.names = sorted(set(self.names) | names, key=str)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.initial = tuple(freeze(self.start.get(n)) for n in self.names)

    def micro_ops(self, op: Operation, source: str) -> list[tuple[str, Any, Any]]:
        value = op.value
        if not isinstance(value, list):
            raise InputError(f"txn value must be a list of [f key value], got {show(value)}", source, op.line)
        out = []
        for mop in value:
            if not isinstance(mop, list) or len(mop) != 3 or mop[0] not in ("read", "write"):
                raise InputError(f"bad txn micro-op {show(mop)}", source, op.line)
            out.append((mop[0], freeze(mop[1]), freeze(mop[2])))
        return out

    def compile(self, op: Operation, crashed: bool, source: str) -> Prepared | None:
        mops = self.micro_ops(op, source)
        if crashed:
            mops = [m for m in mops if m[0] == "write"]
            if not mops:
                return None
        idx = self.index
        plan = tuple((m[0] == "write", idx[m[1]], m[2]) for m in mops)

        def step(s: Any, plan: tuple = plan) -> Any:
            cur = list(s)
            for is_write, i, v in plan:
                if is_write:
                    cur[i] = v
                elif cur[i] != v:
                    return ILLEGAL
            return tuple(cur)

        return Prepared(op, step, crashed, ("txn", plan) if crashed else None)

    def describe_state(self, state: Any) -> str:
        return show(dict(zip(map(str, self.names), state)))


MODELS: dict[str, type[Model]] = {
    "register": Register,
    "cas-register": CasRegister,
    "kv-append": KvAppend,
    "mutex": Mutex,
    "multi-register": MultiRegister,
}


def make_model(name: str, initial: Any = None, cas_mismatch: bool = False) -> Model:
    """A model by name; `cas_mismatch` opts in to reading `fail` cas marked CAS_MISMATCH (see above)."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise InputError(f"unknown model {name!r} (expected one of {', '.join(MODELS)})") from None
    return cls(initial, cas_mismatch)
