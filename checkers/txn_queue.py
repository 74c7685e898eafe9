"""Transactional queue checker: Jepsen's Kafka anomalies and dependency cycles on `txn` histories.

An operation's value is a list of micro-ops (Jepsen's ``:txn``; ``f`` may be ``txn``, ``send`` or
``poll``): ``["send", key, value]``, completed as ``["send", key, [offset, value]]`` (offset may be
``null``), and ``["poll"]``, completed as ``["poll", {key: [[offset, value], ...]}]``. The op's type
is ``ok`` (committed), ``fail`` (aborted: none of its sends happened) or ``info`` (unknown). Consumer
offsets committed inside a transaction need no micro-op of their own: they are the positions the
transaction polled to. ``assign``/``subscribe`` ops reset/forget a process's positions as in
checkers/queue.py; other ``f`` are counted and ignored. Integer keys compare as decimal strings.

A transaction is *committed* when it is ``ok``, or ``info`` and some poll read one of its sends
(reading part of an indeterminate transaction proves it committed).

Anomalies (Jepsen's names; each is bad unless in the allowed set):

* ``duplicate`` / ``inconsistent-offsets`` -- one value at several (key, offset) / one (key, offset)
  holding several values, from acknowledged offsets and polls together.
* ``G1a`` -- a poll read a value whose transaction failed (aborted read).
* ``precommitted-read`` -- a transaction polled a value it sent itself (not yet committed).
* ``lost-write`` -- a committed send at (k, o) was never polled though some poll read k above o.
* ``unseen`` -- a committed send never polled and not a lost write (counted per key).
* ``nonmonotonic-poll`` / ``poll-skip`` -- between successive transactions of a process polling a
  key (no assign/subscribe between), the next poll starts at or before the last offset polled, or
  jumps over known offsets. ``int-nonmonotonic-poll`` / ``int-poll-skip``: the same inside one op.
  An aborted or unknown transaction that polled forgets the process's positions (the consumer
  rewinds to its committed offsets).
* ``nonmonotonic-send`` -- successive committed sends of one process to one key went backwards.
  ``int-nonmonotonic-send``: within one transaction; ``int-send-skip``: another op's value landed
  between two sends of one transaction to a key.
* ``G0``, ``G1c`` and their ``-process`` and ``-realtime`` variants -- cycles in the dependency graph
  of committed transactions: ww (successive offsets of a key written by different ops), wr (writer
  of a value -> the op that polled it), process (successive ops of a process) and realtime (an op
  completed before another was invoked; transitively reduced) edges. Strongly connected components
  are computed first (iterative Tarjan; skipped altogether when every ww and wr edge runs from an
  earlier to a later completion, which makes the completion order a topological order); only
  non-trivial ones are searched, with networkx shortest paths. Each SCC reports its first cycle
  class in the order G0 (ww only), G1c (ww+wr, at least one wr), G0-process, G1c-process,
  G0-realtime, G1c-realtime, with the shortest cycle found (a cycle through each qualifying edge,
  up to ``MAX_SEARCH`` edges per SCC) and its operations. Each G1c class is first searched without
  ww edges; if the SCC's first class needed a ww edge, the later G1c classes are still searched
  without ww edges, so a cycle that exists without any ww edge is always reported. A G1c-class
  example carries ``"ww": false`` when its cycle has no ww edge, and the anomaly a count
  ``"without-ww"`` of such cycles.

Allowed-set policy (as Jepsen's, docs/design.md "Queue anomalies"): int-send-skip, G0, G0-process and
G0-realtime are always allowed; with ``subscribe=True`` also poll-skip and nonmonotonic-poll; with
``ww_deps=True`` also G1c and its variants, but only when they need a ww edge: ww edges are
inferred from log offsets, and Kafka transactions do not isolate writes, while "a G1c built only
from wr edges is a real bug, for example Bufstream's 'early read'" (Jepsen's note). So a G1c,
G1c-process or G1c-realtime cycle made of wr edges only (plus process / realtime edges for the
variants) is bad even with ``ww_deps``; it is reported under Jepsen's name, which then appears in
``bad-anomaly-types``. ``allow`` adds more (naming G1c* there allows even a wr-only cycle).
Result as checkers/queue.py's:
``{"valid", "anomaly-types", "bad-anomaly-types", "anomalies", "stats"}``; valid is "unknown"
when no poll succeeded.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from checkers.errors import InputError
from checkers.history import History, Operation, freeze
from checkers.verdict import AnomalyCounts

__all__ = [
    "ALWAYS_ALLOWED",
    "ANOMALY_TYPES",
    "CYCLE_TYPES",
    "MAX_EXAMPLES",
    "check_txn_queue",
    "is_transactional",
]

CYCLE_TYPES = ("G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
ANOMALY_TYPES = (
    "duplicate",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "int-send-skip",
    "int-nonmonotonic-send",
    "inconsistent-offsets",
    "precommitted-read",
    "G1a",
    "lost-write",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "poll-skip",
    "unseen",
    *CYCLE_TYPES,
)
ALWAYS_ALLOWED = frozenset({"int-send-skip", "G0", "G0-process", "G0-realtime"})
MAX_EXAMPLES = 20
MAX_SEARCH = 200

WW, WR, PROCESS, REALTIME = 1, 2, 4, 8
_EDGE_NAMES = {WW: "ww", WR: "wr", PROCESS: "process", REALTIME: "realtime"}
# (name, edge types allowed, edge type the cycle must use or 0)
_SPECS = (
    ("G0", WW, 0),
    ("G1c", WW | WR, WR),
    ("G0-process", WW | PROCESS, PROCESS),
    ("G1c-process", WW | WR | PROCESS, PROCESS),
    ("G0-realtime", WW | REALTIME, REALTIME),
    ("G1c-realtime", WW | WR | REALTIME, REALTIME),
)


def _key(k: Any) -> Any:
    t = type(k)
    if t is str:
        return k
    if t is int:
        return str(k)
    if isinstance(k, (list, dict, set)):
        return freeze(k)
    return k


def _value(v: Any) -> Any:
    t = type(v)
    if t is int or t is str:
        return v
    if isinstance(v, (list, dict, set)):
        return freeze(v)
    return v


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_mops(v: Any) -> bool:
    if not isinstance(v, (list, tuple)) or not v:
        return False
    m = v[0]
    return isinstance(m, (list, tuple)) and len(m) > 0 and m[0] in ("send", "poll")


def is_transactional(history: History) -> bool:
    """True when some op's value is a list of send/poll micro-ops (a Jepsen ``:txn`` history)."""
    return any(op.f in ("txn", "send", "poll") and _is_mops(op.invoke.value) for op in history.operations())


class _Ref(int):
    """An op id in an example, described only when the result is built."""


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.found = AnomalyCounts(MAX_EXAMPLES)
        self.ops: list[Operation] = []  # txn ops, by id
        self.op_type: list[str] = []
        # value -> (op id, key, offset | None, line)
        self.sends: dict[Any, tuple] = {}
        self.at: dict[Any, dict[int, Any]] = {}  # key -> offset -> first value observed
        self.conflicts: dict[tuple, set] = {}
        self.pos: dict[Any, tuple] = {}  # value -> first (key, offset)
        self.dups: dict[Any, set] = {}
        self.readers: dict[Any, list[int]] = {}  # value -> op ids that polled it
        self.max_read: dict[Any, int] = {}
        # process -> key -> [last offset, op id, reset by assign]
        self.consumers: dict[Any, dict[Any, list]] = {}
        self.producers: dict[tuple, tuple] = {}  # (process, key) -> (offset, value, op id)
        self.jumps: list[tuple] = []  # (name, key, low, high, example)
        self.send_gaps: list[tuple] = []  # (key, low, high, op id, example)
        self.ok_polls = 0
        self.other = 0
        self.pairs = 0
        self.history_len = 0
        self.fast = True
        self.no_ww: dict[str, int] = {}  # G1c-class cycles found without any ww edge

    def error(self, message: str, line: int) -> InputError:
        return InputError(message, file=self.source, line=line)

    def observe(self, key: Any, offset: int, value: Any) -> None:
        by = self.at.get(key)
        if by is None:
            by = self.at[key] = {}
        cur = by.get(offset, by)
        if cur is by:
            by[offset] = value
        elif cur != value:
            self.conflicts.setdefault((key, offset), {cur}).add(value)
        p = self.pos.get(value)
        if p is None:
            self.pos[value] = (key, offset)
        elif p[1] != offset or p[0] != key:
            self.dups.setdefault(value, {p}).add((key, offset))

    def feed(self, op: Operation) -> None:
        f = op.invoke.f
        if f in ("assign", "subscribe"):
            keys = op.invoke.value
            if not isinstance(keys, (list, tuple)):
                raise self.error(f"{f} value must be a list of keys, got {_short(keys)}", op.invoke.line)
            p = op.invoke.process
            if f == "subscribe":
                self.consumers.pop(p, None)
            else:
                for entry in self.consumers.get(p, {}).values():
                    entry[2] = True
            return
        if f not in ("txn", "send", "poll") or not _is_mops(op.invoke.value):
            if f in ("txn", "send", "poll"):
                raise self.error(
                    f"a transactional op's value must be a list of send/poll micro-ops, got {_short(op.invoke.value)}",
                    op.invoke.line,
                )
            self.other += 1
            return
        self.txn(op)

    def txn(self, op: Operation) -> None:
        inv, c = op.invoke, op.complete
        oid = len(self.ops)
        self.ops.append(op)
        typ = op.type
        self.op_type.append(typ)
        mops = inv.value
        if typ == "ok":
            mops = c.value
            if not isinstance(mops, (list, tuple)) or len(mops) != len(inv.value):
                raise self.error(
                    f"an ok txn must complete with as many micro-ops as invoked, got {_short(mops)}", c.line
                )
        line = c.line if typ == "ok" else inv.line
        process = inv.process
        polled_here: dict[Any, int] = {}  # key -> last offset polled in this op
        sent_here: dict[Any, tuple] = {}  # key -> (offset, value) of the last send in this op
        state = None
        if typ == "ok":
            state = self.consumers.get(process)
            if state is None:
                state = self.consumers[process] = {}
        elif any(m[0] == "poll" for m in mops):
            self.consumers.pop(process, None)  # aborted/unknown: the consumer rewinds
        for m in mops:
            if m[0] == "send":
                if len(m) != 3:
                    raise self.error(f"send micro-op must be [send, key, value], got {_short(m)}", line)
                key = _key(m[1])
                val, offset = m[2], None
                if typ == "ok":
                    if not isinstance(val, (list, tuple)) or len(val) != 2:
                        raise self.error(f"completed send must carry [offset, value], got {_short(val)}", line)
                    offset, val = val
                    if offset is not None and (type(offset) is not int or offset < 0):
                        raise self.error(f"send offset must be a non-negative integer or null, got {offset!r}", line)
                val = _value(val)
                if val in self.sends:
                    raise self.error(f"value {_short(val)} sent twice; values must be unique", line)
                self.sends[val] = (oid, key, offset, line)
                if offset is None:
                    continue
                self.observe(key, offset, val)
                prev = sent_here.get(key)
                if prev is not None:
                    ex = {"process": process, "key": key, "offsets": [prev[0], offset], "values": [prev[1], val]}
                    if offset <= prev[0]:
                        self.found.add("int-nonmonotonic-send", {**ex, "op": _Ref(oid)})
                    elif offset > prev[0] + 1:
                        self.send_gaps.append((key, prev[0], offset, oid, ex))
                else:
                    last = self.producers.get((process, key))
                    if last is not None and offset <= last[0]:
                        self.found.add(
                            "nonmonotonic-send",
                            {
                                "process": process,
                                "key": key,
                                "prev-offset": last[0],
                                "offset": offset,
                                "prev-value": last[1],
                                "value": val,
                                "prev-op": _Ref(last[2]),
                                "op": _Ref(oid),
                            },
                        )
                sent_here[key] = (offset, val)
            elif m[0] != "poll":
                raise self.error(f"a micro-op must be [send, key, value] or [poll], got {_short(m)}", line)
            else:
                if typ != "ok":
                    continue
                if len(m) != 2 or not isinstance(m[1], dict):
                    raise self.error(f"completed poll must be [poll, {{key: pairs}}], got {_short(m)}", line)
                self.ok_polls += 1
                for k, pairs in m[1].items():
                    self.poll_key(_key(k), pairs, op, oid, polled_here, state, line)
        for key, (offset, val) in sent_here.items():
            self.producers[(process, key)] = (offset, val, oid)
        if state is not None:
            for key, offset in polled_here.items():
                state[key] = [offset, oid, False]

    def poll_key(self, key, pairs, op, oid, polled_here, state, line) -> None:  # noqa: ANN001
        if not isinstance(pairs, (list, tuple)):
            raise self.error(f"poll of key {_short(key)} must be a list of [offset, value] pairs", line)
        readers = self.readers
        observe = self.observe
        prev = polled_here.get(key)
        top = -1
        for pr in pairs:
            if not isinstance(pr, (list, tuple)) or len(pr) != 2 or type(pr[0]) is not int or pr[0] < 0:
                raise self.error(f"poll of key {_short(key)}: expected [offset, value], got {_short(pr)}", line)
            o, v = pr
            t = type(v)
            if t is not int and t is not str:
                v = _value(v)
            observe(key, o, v)
            r = readers.get(v)
            if r is None:
                readers[v] = [oid]
            elif r[-1] != oid:
                r.append(oid)
            if o > top:
                top = o
            if prev is None:
                if state is not None:
                    self.poll_from(key, o, op, oid, state)
            elif o != prev + 1:
                ex = {"process": op.process, "key": key, "prev-offset": prev, "offset": o, "op": _Ref(oid)}
                if o <= prev:
                    self.found.add("int-nonmonotonic-poll", ex)
                else:
                    self.jumps.append(("int-poll-skip", key, prev, o, ex))
            prev = o
        self.pairs += len(pairs)
        if top > self.max_read.get(key, -1):
            self.max_read[key] = top
        if prev is not None:
            polled_here[key] = prev

    def poll_from(self, key: Any, o: int, op: Operation, oid: int, state: dict) -> None:
        """The first offset a transaction polled on `key`, against where the consumer was."""
        entry = state.get(key)
        if entry is None or o == entry[0] + 1:
            return
        last, last_oid, reset = entry
        if o <= last and reset:
            return
        ex = {"process": op.process, "key": key, "prev-offset": last, "offset": o, "prev-op": _Ref(last_oid)}
        ex["op"] = _Ref(oid)
        if o <= last:
            self.found.add("nonmonotonic-poll", ex)
        else:
            if reset:
                ex["after-assign"] = True
            self.jumps.append(("poll-skip", key, last, o, ex))

    # -- after the pass ---------------------------------------------------------------------------

    def finish(
        self, allowed: frozenset[str], history_ops: int, excused: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """`excused`: G1c-class names allowed even when their cycle has no ww edge."""
        found = self.found
        at, sends, readers = self.at, self.sends, self.readers
        known = {k: sorted(by) for k, by in at.items()}
        op_type = self.op_type

        for (key, offset), vals in self.conflicts.items():
            found.add("inconsistent-offsets", {"key": key, "offset": offset, "values": sorted(map(repr, vals))})
        for v, places in self.dups.items():
            found.add("duplicate", {"value": v, "positions": sorted(([k, o] for k, o in places), key=repr)})

        def skipped(key: Any, lo: int, hi: int) -> list[int]:
            offs = known.get(key, ())
            return offs[bisect_right(offs, lo) : bisect_left(offs, hi)]

        for name, key, lo, hi, ex in self.jumps:
            s = skipped(key, lo, hi)
            if s:
                found.add(name, {**ex, "delta": hi - lo, "skipped": s[:20]})
        for key, lo, hi, oid, ex in self.send_gaps:
            s = skipped(key, lo, hi)
            if s:
                found.add("int-send-skip", {**ex, "skipped": s[:20], "op": _Ref(oid)})

        committed = [t == "ok" for t in op_type]
        for v, rs in readers.items():
            s = sends.get(v)
            if s is None:
                continue
            oid = s[0]
            t = op_type[oid]
            if oid in rs:
                key, o = self.pos[v]
                found.add("precommitted-read", {"key": key, "offset": o, "value": v, "op": _Ref(oid)})
            if t == "fail":
                found.add("G1a", {"value": v, "writer": _Ref(oid), "reader": _Ref(rs[0])})
            elif t == "info":
                committed[oid] = True

        unseen_by_key: dict[str, int] = {}
        for v, (oid, key, offset, _line) in sends.items():
            if not committed[oid] or v in readers:
                continue
            o = offset if offset is not None else self.pos.get(v, (None, None))[1]
            top = self.max_read.get(key, -1)
            if o is not None and top > o:
                found.add(
                    "lost-write",
                    {"key": key, "offset": o, "value": v, "max-read-offset": top, "op": _Ref(oid)},
                )
            else:
                found.add("unseen", {"key": key, "offset": o, "value": v})
                unseen_by_key[str(key)] = unseen_by_key.get(str(key), 0) + 1

        self.cycles(committed, known)

        names = sorted(n for n, c in found.counts.items() if c)
        bad = [n for n in names if n not in allowed or (n in self.no_ww and n not in excused)]
        anomalies = {n: {"count": found.counts[n], "examples": self.describe(found.examples.get(n, []))} for n in names}
        for n, c in self.no_ww.items():
            anomalies[n]["without-ww"] = c
        if "unseen" in anomalies:
            anomalies["unseen"]["by-key"] = dict(sorted(unseen_by_key.items()))
        valid: bool | str = False if bad else ("unknown" if self.ok_polls == 0 else True)
        return {
            "valid": valid,
            "anomaly-types": names,
            "bad-anomaly-types": bad,
            "anomalies": anomalies,
            "stats": {
                "ops": history_ops,
                "txns": {t: op_type.count(t) for t in ("ok", "fail", "info")},
                "committed": sum(committed),
                "other-ops": self.other,
                "keys": len(set(known) | {s[1] for s in sends.values()}),
                "values-sent": len(sends),
                "committed-sends": sum(1 for s in sends.values() if committed[s[0]]),
                "values-read": len(readers),
                "pairs-read": self.pairs,
            },
        }

    def describe(self, x: Any) -> Any:
        if type(x) is _Ref:
            return self.ops[x].describe()
        if isinstance(x, dict):
            return {k: self.describe(v) for k, v in x.items()}
        if isinstance(x, list):
            return [self.describe(v) for v in x]
        return x

    def cycles(self, committed: list[bool], known: dict[Any, list[int]]) -> None:
        """Find dependency cycles; skipped when every ww/wr edge follows the completion order.

        Process and realtime edges always run from an earlier to a later completion, so if the ww
        and wr edges do too, the completion order is a topological order and there is no cycle.
        """
        sends, at, conflicts = self.sends, self.at, self.conflicts
        never = self.history_len  # a committed info op never completed
        ret = [op.ret if t == "ok" else never for op, t in zip(self.ops, self.op_type, strict=True)]
        ww: list[tuple[int, int]] = []
        backward = False
        for key, offs in known.items():
            by = at[key]
            prev = -1
            for o in offs:
                if conflicts and (key, o) in conflicts:
                    prev = -1
                    continue
                s = sends.get(by[o])
                w = s[0] if s is not None and committed[s[0]] else -1
                if prev >= 0 and w >= 0 and prev != w:
                    ww.append((prev, w))
                    if ret[prev] >= ret[w]:
                        backward = True
                prev = w
        wr: list[tuple[int, int]] = []
        for v, rs in self.readers.items():
            s = sends.get(v)
            if s is not None:
                w = s[0]
                if committed[w]:
                    for r in rs:
                        if r != w:
                            wr.append((w, r))
                            if ret[w] >= ret[r]:
                                backward = True
        if self.fast and not backward and all(t == "ok" or not c for t, c in zip(self.op_type, committed, strict=True)):
            return  # (a committed info op has no completion to order it by)
        n = len(self.ops)
        adj: list[dict[int, int]] = [{} for _ in range(n)]

        def edge(a: int, b: int, t: int) -> None:
            if a != b and committed[a] and committed[b]:
                d = adj[a]
                d[b] = d.get(b, 0) | t

        for a, b in ww:
            edge(a, b, WW)
        for a, b in wr:
            edge(a, b, WR)
        last: dict[Any, int] = {}
        for oid, op in enumerate(self.ops):
            if not committed[oid]:
                continue
            p = op.process
            if p in last:
                edge(last[p], oid, PROCESS)
            last[p] = oid
        # realtime, transitively reduced: an invocation depends on the completed ops not yet
        # superseded by a later completion that itself follows them
        events = [(op.call, 0, oid) for oid, op in enumerate(self.ops) if committed[oid]]
        events += [(op.ret, 1, oid) for oid, op in enumerate(self.ops) if self.op_type[oid] == "ok"]
        events.sort()
        frontier: set[int] = set()
        preds: dict[int, tuple] = {}
        for _pos, kind, oid in events:
            if kind == 0:
                preds[oid] = tuple(frontier)
                for a in preds[oid]:
                    edge(a, oid, REALTIME)
            else:
                frontier.difference_update(preds.pop(oid, ()))
                frontier.add(oid)

        for comp in _sccs(adj):
            self.explain(comp, adj)

    def explain(self, comp: list[int], adj: list[dict[int, int]]) -> None:
        """Report the SCC's first cycle class, and a cycle without ww edges if one exists.

        Each G1c class is searched without ww edges first; if the first class found needed a ww
        edge (or is a G0 class), the later G1c classes are still searched without ww edges, since
        such a cycle is not excused by ``ww_deps``.
        """
        import networkx as nx

        members = set(comp)

        def search(mask: int, need: int) -> list[int] | None:
            g = nx.DiGraph()
            req: list[tuple[int, int]] = []
            for a in comp:
                for b, t in adj[a].items():
                    if b in members and t & mask:
                        g.add_edge(a, b)
                        if need and t & need:
                            req.append((a, b))
            starts = req[:MAX_SEARCH] if need else list(g.edges())[:MAX_SEARCH]
            best: list[int] | None = None
            for a, b in starts:
                try:
                    path = nx.shortest_path(g, b, a)
                except (nx.NetworkXNoPath, nx.NodeNotFound):
                    continue
                if best is None or len(path) < len(best):
                    best = [a, *path[:-1]]
            return best

        def report(name: str, mask: int, best: list[int]) -> None:
            steps = []
            for i, a in enumerate(best):
                b = best[(i + 1) % len(best)]
                t = adj[a][b] & mask
                kinds = [_EDGE_NAMES[x] for x in (WW, WR, PROCESS, REALTIME) if t & x]
                steps.append({"op": _Ref(a), "edge": kinds})
            entry: dict[str, Any] = {"scc-size": len(comp), "cycle": steps}
            if mask & WR:
                entry["ww"] = bool(mask & WW)
                if not mask & WW:
                    self.no_ww[name] = self.no_ww.get(name, 0) + 1
            self.found.add(name, entry)

        tried: set[str] = set()
        for name, mask, need in _SPECS:
            if mask & WR:
                tried.add(name)
                best = search(mask & ~WW, need)
                if best is not None:
                    report(name, mask & ~WW, best)
                    return
            best = search(mask, need)
            if best is not None:
                report(name, mask, best)
                break
        for name, mask, need in _SPECS:
            if mask & WR and name not in tried:
                best = search(mask & ~WW, need)
                if best is not None:
                    report(name, mask & ~WW, best)
                    return


def _sccs(adj: list[dict[int, int]]) -> list[list[int]]:
    """The strongly connected components with more than one node (iterative Tarjan)."""
    n = len(adj)
    index = [-1] * n
    low = [0] * n
    on = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0 or not adj[root]:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = True
        while work:
            v, it = work[-1]
            for w in it:
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, iter(adj[w])))
                    break
                if on[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def check_txn_queue(
    history: History,
    allow: Iterable[str] = (),
    subscribe: bool = False,
    ww_deps: bool = False,
    fast_path: bool = True,
) -> dict[str, Any]:
    """Check a transactional queue history; see the module docstring for anomalies and result.

    `fast_path=False` builds and searches the whole dependency graph even when the completion
    order already proves it acyclic (for benchmarks and tests of the graph search).

    Raises InputError on malformed ops or an unknown name in `allow`.
    """
    extra = frozenset([allow] if isinstance(allow, str) else allow)
    unknown = sorted(extra.difference(ANOMALY_TYPES))
    if unknown:
        raise InputError(
            f"unknown anomaly type(s) to allow: {', '.join(unknown)} (known: {', '.join(ANOMALY_TYPES)})",
            file=history.source,
        )
    allowed = set(ALWAYS_ALLOWED | extra)
    if subscribe:
        allowed |= {"poll-skip", "nonmonotonic-poll"}
    if ww_deps:
        allowed |= {"G1c", "G1c-process", "G1c-realtime"}
    checker = _Checker(history.source)
    checker.history_len = len(history)
    checker.fast = fast_path
    for op in history.operations():
        checker.feed(op)
    return checker.finish(frozenset(allowed), len(history), extra)


def synthetic_history(n_entries: int, seed: int = 0, processes: int = 10, fail_p: float = 0.05) -> History:
    """A valid transactional queue history of about `n_entries` entries (for benchmarks and tests).

    Each process consumes the keys ``k`` with ``k % processes == p`` (assigned at the start) and
    sends to any key; up to `processes` transactions of 1 to 4 micro-ops are in flight, and each
    takes effect atomically at its completion (read_committed polls see only earlier commits, a
    failed one has no effect), so no anomaly and no cycle can arise. Final polls read every key to
    its end.
    """
    import random

    from checkers.history import Op

    rnd = random.Random(seed)
    keys = [str(k) for k in range(processes)]
    logs: dict[str, list[int]] = {k: [] for k in keys}
    mine = {p: [k for k in keys if int(k) % processes == p] for p in range(processes)}
    pos = {p: dict.fromkeys(mine[p], 0) for p in range(processes)}
    ops: list[Op] = []
    inflight: dict[int, list] = {}
    nxt = 0

    def emit(typ: str, p: int, value: Any) -> None:
        ops.append(Op(len(ops), typ, p, "txn", value, line=len(ops) + 1))

    def complete(p: int, final: bool = False) -> None:
        mops = inflight.pop(p)
        if not final and rnd.random() < fail_p:
            emit("fail", p, mops)
            return
        out: list = []
        appended: list[tuple[str, int]] = []
        for m in mops:
            if m[0] == "send":
                appended.append((m[1], m[2]))
                out.append(None)
            else:
                got = {}
                for k in mine[p]:
                    o = pos[p][k]
                    end = len(logs[k]) if final else min(len(logs[k]), o + 3)
                    if end > o:
                        got[k] = [[i, logs[k][i]] for i in range(o, end)]
                        pos[p][k] = end
                out.append(["poll", got])
        it = iter(appended)
        for i, m in enumerate(mops):
            if m[0] == "send":
                k, v = next(it)
                logs[k].append(v)
                out[i] = ["send", k, [len(logs[k]) - 1, v]]
        emit("ok", p, out)

    for p in range(processes):
        ops.append(Op(len(ops), "invoke", p, "assign", mine[p], line=len(ops) + 1))
        ops.append(Op(len(ops), "ok", p, "assign", mine[p], line=len(ops) + 1))
    while len(ops) < n_entries - 2 * processes - 2 * len(inflight):
        idle = [p for p in range(processes) if p not in inflight]
        if idle and (not inflight or rnd.random() < 0.5):
            p = rnd.choice(idle)
            mops = []
            for _ in range(rnd.randint(1, 4)):
                if rnd.random() < 0.5:
                    mops.append(["send", rnd.choice(keys), nxt])
                    nxt += 1
                else:
                    mops.append(["poll"])
            inflight[p] = mops
            emit("invoke", p, mops)
        else:
            complete(rnd.choice(list(inflight)))
    for p in list(inflight):
        complete(p)
    for p in range(processes):
        inflight[p] = [["poll"]]
        emit("invoke", p, inflight[p])
        complete(p, final=True)
    return History(ops, f"synthetic-txn-{seed}")
