"""Wing–Gong–Lowe search over one partition, as a resumable generator.

The history becomes a doubly linked list of call and return entries in real-time
order (crashed operations have a call but no return: they may be linearized at
any point after their invocation, or never). The search repeatedly linearizes
the first call it can — applying the model step — and lifts that operation out
of the list; reaching a return means the pending operation can no longer be
placed, so it backtracks. A memo of (linearized set, state) prunes configurations
seen before (Lowe). It succeeds as soon as every `ok` operation is linearized.

Two reductions keep crashed operations cheap:
- identical crashed operations ("twins") are linearized in invocation order only,
  so k identical crashed writes cost k+1 configurations instead of 2^k;
- the caller drops crashed operations that provably cannot matter.

Three more cut the search without changing a verdict:
- each configuration first tries the operation whose return comes first (it must be placed
  before that return, and usually took effect first), then the others in invocation order;
- a configuration is dropped when one with the same ok operations and state but fewer crashed
  operations already failed (a crashed operation may always be left out);
- string states that appends only grow (kv-append): once a read waiting in the window sees a
  value the state is not a prefix of, and no overwrite can come before that read, give up.

The generator yields `None` every `quantum` steps so callers can interleave many
partitions (fail fast) and enforce time and memory limits; its return value is
a `Outcome`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from checkers.linearizable.models import APPEND, ILLEGAL, OBSERVE, OVERWRITE, Prepared

VALID = True
INVALID = False


class Outcome:
    """The result of one partition's search."""

    __slots__ = ("valid", "steps", "configurations", "prefix", "state", "blocked")

    def __init__(
        self,
        valid: bool,
        steps: int = 0,
        configurations: int = 0,
        prefix: list[int] | None = None,
        state: Any = None,
        blocked: int | None = None,
    ) -> None:
        self.valid = valid
        self.steps = steps
        self.configurations = configurations
        # for an invalid verdict: the deepest partial linearization found
        self.prefix = prefix if prefix is not None else []  # positions into the prepared list, in order
        self.state = state
        self.blocked = blocked  # the ok operation whose return could not be reached


def search(
    ops: list[Prepared], initial: Any, quantum: int = 4096, probing: bool = True
) -> Generator[None, None, Outcome]:
    """Check that `ops` (one partition, any order) linearize from `initial`.

    `probing`: each configuration tries the operation that returns first before the others (see
    below); the verdict is the same either way, only the work differs.
    """
    n = len(ops)
    # entries: 0 = head sentinel, 1..n = calls, n+1..2n = returns, 2n+1 = tail sentinel
    tail = 2 * n + 1
    fail = tail + 1  # pseudo-entry: "this configuration is known to fail, backtrack"
    events: list[tuple[int, int, int]] = []
    for i, p in enumerate(ops):
        op = p.operation
        events.append((op.call, 0, i + 1))
        if not p.crashed:
            events.append((op.ret if op.ret is not None else 1 << 62, 1, n + 1 + i))
    events.sort()
    order = _earliest_return_first(events, ops, n)
    nxt = [0] * (tail + 1)
    prv = [0] * (tail + 1)
    prev_entry = 0
    for e in order:
        nxt[prev_entry] = e
        prv[e] = prev_entry
        prev_entry = e
    nxt[prev_entry] = tail
    prv[tail] = prev_entry

    steps = [p.step for p in ops]
    bit = [1 << i for i in range(n)]
    is_ok = [not p.crashed for p in ops]
    # twin gate: a crashed op may be linearized only after the earlier-invoked identical one
    gate = [0] * n
    last_twin: dict[Any, int] = {}
    for i in sorted(range(n), key=lambda i: ops[i].operation.call):
        t = ops[i].twin
        if ops[i].crashed and t is not None:
            if t in last_twin:
                gate[i] = bit[last_twin[t]]
            last_twin[t] = i

    remaining = total_ok = sum(is_ok)
    # Appends only grow a string state, so a pending read of a value the state is not a prefix of
    # can no longer be satisfied unless an overwrite (put) may still come before that read.
    growing = isinstance(initial, str) and APPEND in (p.kind for p in ops)
    growing = growing and all(p.kind in (OBSERVE, OVERWRITE, APPEND) for p in ops)
    ret_at = [p.operation.ret if p.operation.ret is not None else 1 << 62 for p in ops]
    puts = sorted((p.operation.call, i) for i, p in enumerate(ops) if p.kind == OVERWRITE)
    kind = [p.kind for p in ops]
    arg_a = [p.a for p in ops]
    arg_b = [p.b for p in ops]
    state = initial
    mask = 0
    stack: list[tuple[int, Any, int, int]] = []
    cache: set[tuple[int, Any]] = set()
    cache_add = cache.add
    # Dominance (crashed operations only): a configuration that failed with crashed set C also
    # fails with any larger crashed set and the same ok operations and state, since a crashed
    # operation may always be left out. failed[(ok part, state)] lists the crashed sets that failed.
    ok_bits = sum(bit[i] for i in range(n) if is_ok[i])
    crashed_bits = ((1 << n) - 1) ^ ok_bits
    failed: dict[tuple[int, Any], list[int]] = {}
    best_depth = -1
    best: Outcome | None = None
    total = 0
    budget = quantum
    if remaining == 0:
        return Outcome(VALID, 0, 0)
    # Each configuration first tries the operation whose return comes first (it must be placed
    # before that return anyway, and usually took effect first), then every call in list order.
    # `probe` is that call's entry while it is being tried; a stack mark above `probed` says so.
    by_ret = sorted((i for i in range(n) if is_ok[i]), key=lambda i: ops[i].operation.ret)
    rp = 0
    probed = fail + 1
    if probing:
        probe = e = by_ret[0] + 1
    else:
        probe, e = 0, nxt[0]
    while True:
        budget -= 1
        if not budget:
            total += quantum
            budget = quantum
            yield None
        if e <= n:
            i = e - 1
            g = gate[i]
            if g and not (mask & g):
                if e == probe:
                    probe = 0
                    e = nxt[0]
                else:
                    e = nxt[e]
                continue
            # the common steps inline (see models.Kind); anything else calls the model
            k = kind[i]
            if k == 1 or k == 5:  # observe (state equals a) or differs (state is not a)
                if (state == arg_a[i]) != (k == 1):
                    if e == probe:
                        probe = 0
                        e = nxt[0]
                    else:
                        e = nxt[e]
                    continue
                # A legal observation changes nothing, so if any linearization exists from here one
                # exists that places this read first: take it without branching, and if that
                # configuration already failed, this one fails too.
                nm = mask | bit[i]
                key = (nm, state)
                if key in cache or (crashed_bits and _dominated(failed, nm, ok_bits, state)):
                    e = fail
                    continue
                cache_add(key)
                stack.append((-e, state, mask, rp))
                mask = nm
                p_, q_ = prv[e], nxt[e]
                nxt[p_] = q_
                prv[q_] = p_
                r = e + n
                p_, q_ = prv[r], nxt[r]
                nxt[p_] = q_
                prv[q_] = p_
                remaining -= 1
                if not remaining:
                    return Outcome(VALID, total + quantum - budget, len(cache))
                if probing:
                    while mask & bit[by_ret[rp]]:
                        rp += 1
                    probe = e = by_ret[rp] + 1
                else:
                    e = nxt[0]
                continue
            elif k == 2:  # overwrite with a
                ns = arg_a[i]
            elif k == 3:  # compare-and-set a -> b
                if state != arg_a[i]:
                    if e == probe:
                        probe = 0
                        e = nxt[0]
                    else:
                        e = nxt[e]
                    continue
                ns = arg_b[i]
            elif k == 4:  # append a
                ns = state + arg_a[i]
            else:
                ns = steps[i](state)
                if ns is ILLEGAL:
                    if e == probe:
                        probe = 0
                        e = nxt[0]
                    else:
                        e = nxt[e]
                    continue
            nm = mask | bit[i]
            key = (nm, ns)
            if (
                key in cache
                or (crashed_bits and _dominated(failed, nm, ok_bits, ns))
                or (k == 4 and growing and _unreachable_read(ns, nm, e, nxt, n, kind, arg_a, ret_at, puts, bit))
            ):
                if e == probe:
                    probe = 0
                    e = nxt[0]
                else:
                    e = nxt[e]
                continue
            cache_add(key)
            stack.append((e + probed if e == probe else e, state, mask, rp))
            state = ns
            mask = nm
            p_, q_ = prv[e], nxt[e]
            nxt[p_] = q_
            prv[q_] = p_
            if is_ok[i]:
                r = e + n
                p_, q_ = prv[r], nxt[r]
                nxt[p_] = q_
                prv[q_] = p_
                remaining -= 1
                if not remaining:
                    return Outcome(VALID, total + quantum - budget, len(cache))
            if probing:
                while mask & bit[by_ret[rp]]:
                    rp += 1
                probe = e = by_ret[rp] + 1
            else:
                e = nxt[0]
        else:
            # a return entry (or the tail): the operation pending here cannot be placed later
            depth = total_ok - remaining
            if depth > best_depth and e < fail:
                best_depth = depth
                best = Outcome(
                    INVALID,
                    prefix=[_entry(s[0], probed) - 1 for s in stack],
                    state=state,
                    blocked=(e - n - 1) if e != tail else None,
                )
            if not stack:
                assert best is not None
                best.steps = total + quantum - budget
                best.configurations = len(cache)
                return best
            if crashed_bits and mask & crashed_bits:
                failed.setdefault((mask & ok_bits, state), []).append(mask & crashed_bits)
            e, state, mask, rp = stack.pop()
            probe = 0
            forced = e < 0
            if forced:
                e = -e
            was_probe = e > probed
            if was_probe:
                e -= probed
            i = e - 1
            if is_ok[i]:
                r = e + n
                p_, q_ = prv[r], nxt[r]
                nxt[p_] = r
                prv[q_] = r
                remaining += 1
            p_, q_ = prv[e], nxt[e]
            nxt[p_] = e
            prv[q_] = e
            # after a forced read there is no alternative to try at this level; after the
            # first-tried call, every call in list order is still to try
            e = fail if forced else (nxt[0] if was_probe else nxt[e])


def _unreachable_read(
    state: str,
    mask: int,
    taken: int,
    nxt: list[int],
    n: int,
    kind: list[int],
    arg_a: list[Any],
    ret_at: list[int],
    puts: list[tuple[int, int]],
    bit: list[int],
) -> bool:
    """After an append gives `state` (call entry `taken`): does some read still waiting in the window
    see a value that `state` is not a prefix of, with no overwrite able to come before that read?"""
    first_put = 1 << 62
    for call, j in puts:
        if not mask & bit[j]:
            first_put = call
            break
    e = nxt[0]
    while e <= n:
        j = e - 1
        if e != taken and kind[j] == OBSERVE and not arg_a[j].startswith(state) and first_put > ret_at[j]:
            return True
        e = nxt[e]
    return False


def _entry(marked: int, probed: int) -> int:
    """The call entry of a stack mark (negative: forced; above `probed`: tried first)."""
    e = abs(marked)
    return e - probed if e > probed else e


def _dominated(failed: dict[tuple[int, Any], list[int]], mask: int, ok_bits: int, state: Any) -> bool:
    """Did a configuration with the same ok operations and state, and fewer crashed ones, fail?"""
    sets = failed.get((mask & ok_bits, state))
    if sets:
        for c in sets[-4:]:  # the latest few only: a bounded check, still sound
            if c & mask == c:
                return True
    return False


def _earliest_return_first(events: list[tuple[int, int, int]], ops: list[Prepared], n: int) -> list[int]:
    """The entries in time order, each run of consecutive calls sorted by return (crashed last).

    Which calls the search may take next is "every call before the first remaining return", so
    reordering calls between two returns changes no candidate set, only the order candidates are
    tried: an operation that returned first usually took effect first, and trying it first finds
    a linearization of a valid history with far less backtracking.
    """
    never = 1 << 62
    out: list[int] = []
    run: list[tuple[int, int]] = []
    for _, is_return, e in events:
        if is_return:
            if run:
                run.sort()
                out.extend(c for _, c in run)
                run = []
            out.append(e)
        else:
            ret = ops[e - 1].operation.ret
            run.append((never if ret is None or ops[e - 1].crashed else ret, e))
    run.sort()
    out.extend(c for _, c in run)
    return out


def run(ops: list[Prepared], initial: Any, probing: bool = True) -> Outcome:
    """Run a search to completion (no interleaving)."""
    gen = search(ops, initial, probing=probing)
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
