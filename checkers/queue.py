"""Queue checker: the anomalies of Jepsen's Kafka workload on a history of `send`, `poll` and `assign`.

The system under test is a Kafka-like log. One partition is one `key` (such as ``"t0-2"``); offsets
are non-negative integers, increasing along a partition. Values sent are unique in a test.

Accepted operations (see docs/formats.md "Queue ops"):

* ``send`` with a ``key``: invoke value ``v``; ``ok`` value ``[offset, v]`` where ``offset`` may be
  ``null`` when the client does not know it. ``fail`` = definitely not appended, ``info`` (or an
  invoke that never completed) = maybe appended. The ``v`` of the ``ok`` value must equal the
  invoke's.
* ``poll``, in either form:

  - with a ``key``: ``ok`` value ``[[offset, v], …]`` for that partition;
  - with or without a ``key``: ``ok`` value ``{key: [[offset, v], …], …}`` (a multi-partition poll,
    as Jepsen's ``[:poll {k [[o v] …]}]``); the map's keys name the partitions.

  Only ``ok`` polls carry data. A ``fail`` poll may still have moved the consumer's position
  (records fetched, then an error), so it makes the checker forget that process's position for the
  polled key (for every key when the poll had none); an ``info`` poll crashes the process.
* ``assign``: value = list of keys. Positions reset to the beginning of each partition, so the next
  poll of a key may restart anywhere at or before where the consumer was: it is not a
  ``nonmonotonic-poll``, but jumping *past* the old position over known offsets is still a
  ``poll-skip`` (flagged ``"after-assign": true``). Any assign resets, whatever its outcome (a
  failed assign may have half happened).
* ``subscribe``: like ``assign`` but the broker picks partitions and rebalances, so the checker
  forgets that process's positions entirely.
* ``commit``: ``ok`` value ``{key: offset}`` or ``{"generation": g, "offsets": {key: offset}}``, what the
  consumer group committed; an ``info`` commit may carry the same value (what it tried to commit;
  without one it may have committed anything), a ``fail`` one did not happen.
* A poll's completion may carry ``"assigned": {"generation": g, "start": {key: s}, "committed": {key: c}}``
  (optional; ``generation`` and ``committed`` too): the poll began an assignment (joined the group),
  key k's consumption starts at offset s, and OffsetFetch answered c (-1: nothing committed). Recorded on
  ``ok`` and ``fail`` polls alike (a poll may join, then fail to fetch).
* Any other ``f`` (``crash``, ``debug-topic-partitions``, …) is counted and ignored.

Integer keys are compared as their decimal strings (JSON object keys, and so map polls, are strings).

Anomalies (names as Jepsen's ``jepsen.tests.kafka`` checker; every one is bad unless allowed):

* ``lost-write`` -- an ``ok`` send at offset o of key k was never read by any poll, although some
  poll read an offset > o on k (the offset is the send's acknowledged one).
* ``unseen`` -- an ``ok`` send never read by any poll and not a lost write (nothing above it was
  read, or its offset is unknown). Counted per key.
* ``duplicate`` -- one value at more than one (key, offset), combining acknowledged offsets and polls.
* ``inconsistent-offsets`` -- one (key, offset) held more than one value, same sources.
* ``aborted-read`` -- a poll read a value whose send definitely failed.
* ``nonmonotonic-poll`` -- a process polls a key again, without an assign in between, and starts at
  or before the previous poll's last offset; or offsets do not increase inside one poll
  (``"within": true``).
* ``poll-skip`` -- between two successive polls of a key by one process (no assign/subscribe in
  between), or inside one poll (``"within": true``), the consumer jumped over offsets that some op
  observed (an acknowledged send or any poll, anywhere in the history).
* ``commit-regression`` -- a group's committed offset went back: an ``ok`` ``commit`` (value
  ``{key: offset}``, the offsets it committed for the consumer group) invoked after another ``ok``
  commit of the same key had completed, with a lower offset. Commits whose calls overlap are not
  ordered and never compared. Only a commit from a fenced generation (a consumer that lost the
  partition) can do this: the coordinator must refuse those.
* ``stale-generation-commit`` -- commits that name their consumer-group generation (value
  ``{"generation": g, "offsets": {key: offset}}``): an ``ok`` commit of generation g invoked after an
  ``ok`` commit of a later generation had completed. A coordinator fences every generation once a
  later one committed, so it must have refused it. A commit of no offsets is not judged: it moves
  nothing (and clients do not send it: the workload completes it without asking the coordinator).
* ``start-past-commit`` -- a poll that began an assignment starts key k at offset s, past every commit
  of k its OffsetFetch could have answered, and records exist between: offsets in [c, s) are known (an
  acknowledged send or any poll), where c is the highest of those commits. The commits it could have
  answered: those invoked before the poll completed, less the ``ok`` ones that another ``ok`` commit
  of k, invoked after they completed, definitely replaced before the poll was invoked; plus "nothing
  committed" (offset 0: consumers start at the beginning) until an ``ok`` commit of k completes
  before the poll. With no concurrent commits, c is the latest commit acknowledged before the poll.
  The group never delivers those records to anyone (at-least-once is lost), so subscribe does not
  allow it. Records the same process read do not count (a client that keeps its position
  for a partition it retains, as the cooperative protocol does, delivered them already). Starting
  *before* every such commit is re-delivery, allowed; the result counts it under
  ``start-before-commit`` (a coordinator that lost commits). Polls that an ``info`` commit with no
  offsets could have affected are not judged (``unjudged-starts``).
* ``nonmonotonic-send`` -- two successive ``ok`` sends (with known offsets) by one process to one key,
  the later at a lower or equal offset.

Jepsen's allowed-set policy for subscribe: when the history holds a ``subscribe``, ``poll-skip`` and
``nonmonotonic-poll`` between two polls are allowed (rebalances move partitions between consumers
without an op in the history saying so); the same anomalies inside one poll (``"within": true``)
stay bad. The result lists them under ``allowed-by-subscribe``.

Informational, never anomalies: ``recovered`` (``info`` sends that some poll read),
``unsent-reads`` (values polled that no send in the history carried) and, when polls record
``assigned``, ``start-before-commit`` (assignments that started before every commit in effect).

Process ids: after an ``info`` a process never reappears (a crashed client reopens under a new id),
so per-process consumer and producer state starts afresh with the new id.

Result::

    {"valid": True | False | "unknown", "anomaly-types": [...], "bad-anomaly-types": [...],
     "anomalies": {name: {"count": n, "examples": [...]}}, "recovered": {...},
     "unsent-reads": {...}, "stats": {...}}

``valid`` is False iff an anomaly not in ``allow`` is present; else "unknown" when no poll
succeeded (nothing was observed), else True. Examples carry ``index``: the index of the op that
holds the data (the completion for completed ops). At most ``MAX_EXAMPLES`` examples per anomaly.

Bad input (wrong value shapes, non-integer offsets, a value sent twice) raises ``InputError`` naming
the history's source and the line. Time and memory are linear in the history size (plus a sort of
the known offsets of each key).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from checkers.errors import InputError
from checkers.history import History, Operation, freeze
from checkers.verdict import AnomalyCounts

__all__ = ["ANOMALY_TYPES", "MAX_EXAMPLES", "check_queue"]

ANOMALY_TYPES = (
    "aborted-read",
    "commit-regression",
    "duplicate",
    "inconsistent-offsets",
    "lost-write",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "poll-skip",
    "stale-generation-commit",
    "start-past-commit",
    "unseen",
)
MAX_EXAMPLES = 20
_MAX_LISTED = 20  # offsets/values listed inside one example


def _key(k: Any) -> Any:
    """Partition names compare as strings when they are integers (JSON object keys are strings)."""
    if type(k) is int:
        return str(k)
    if isinstance(k, list | dict | set):
        return freeze(k)
    return k


def _value(v: Any) -> Any:
    t = type(v)
    if t is int or t is str:
        return v
    if isinstance(v, list | dict | set):
        return freeze(v)
    return v


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_offset(o: Any) -> bool:
    return type(o) is int and o >= 0


def _jkey(k: Any) -> str:
    """A key as a JSON object key."""
    return k if isinstance(k, str) else str(k)


class _QueueChecker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.found = AnomalyCounts(MAX_EXAMPLES)
        # value -> (key, offset | None, type, index, process, line)
        self.sends: dict[Any, tuple] = {}
        # key -> offset -> (value, index): the first value observed at each offset
        self.at: dict[Any, dict[int, tuple[Any, int]]] = {}
        # (key, offset) -> {value: first index}: offsets that held more than one value
        self.conflicts: dict[tuple, dict[Any, int]] = {}
        # value -> (key, offset, index): the first position a value was observed at
        self.pos: dict[Any, tuple[Any, int, int]] = {}
        # value -> {(key, offset): first index}: values at more than one position
        self.dups: dict[Any, dict[tuple, int]] = {}
        # value -> (index, key, offset) of the first poll that read it
        self.read: dict[Any, tuple[int, Any, int]] = {}
        # key -> (highest offset read, index of the poll)
        self.max_read: dict[Any, tuple[int, int]] = {}
        # process -> key -> [last offset read, poll index, reset by assign]
        self.consumers: dict[Any, dict[Any, list]] = {}
        # (process, key) -> (offset, value, index) of the last ok send with a known offset
        self.producers: dict[tuple, tuple[int, Any, int]] = {}
        # poll-skip candidates: (key, low, high, example) -- resolved once all offsets are known
        self.jumps: list[tuple[Any, int, int, dict]] = []
        self.keys: set[Any] = set()
        self.sends_by_type = {"ok": 0, "fail": 0, "info": 0, "ok-without-offset": 0}
        self.polls_by_type = {"ok": 0, "fail": 0, "info": 0, "empty": 0}
        self.assigns = 0
        self.subscribes = 0
        # key -> [(completion index, invoke index, offset, example)] of ok commits
        self.commits: dict[Any, list[tuple[int, int, int, dict]]] = {}
        # (completion index, invoke index, generation, example) of ok commits that name a generation
        self.generations: list[tuple[int, int, int, dict]] = []
        # commits that may have happened, for start-past-commit: (invoke index, completion index | None,
        # ok, {key: offset} | None when an info commit does not say what it committed)
        self.group_commits: list[tuple[int, int | None, bool, dict[Any, int] | None]] = []
        # polls that began an assignment: (invoke index, completion index, example, {key: (start, committed)})
        self.starts: list[tuple[int, int, dict, dict[Any, tuple[int, int | None]]]] = []
        self.subscribed: set[Any] = set()  # processes that subscribed
        self.member_read: dict[tuple[Any, Any], set[int]] = {}  # (subscribed process, key) -> offsets it read
        self.within: dict[str, int] = {}  # poll-skip / nonmonotonic-poll found inside one poll
        self.other = 0
        self.pairs_read = 0

    def error(self, message: str, line: int) -> InputError:
        return InputError(message, file=self.source, line=line)

    # -- pass 1 ---------------------------------------------------------------------------------

    def feed(self, op: Operation) -> None:
        f = op.invoke.f
        if f == "poll":
            self.poll(op)
        elif f == "send":
            self.send(op)
        elif f == "assign" or f == "subscribe":
            self.assign(op, f)
        elif f == "commit":
            self.commit(op)
        else:
            self.other += 1

    def observe(self, key: Any, offset: int, value: Any, index: int) -> None:
        by_offset = self.at.get(key)
        if by_offset is None:
            by_offset = self.at[key] = {}
        cur = by_offset.get(offset)
        if cur is None:
            by_offset[offset] = (value, index)
        elif cur[0] != value:
            self.conflicts.setdefault((key, offset), {cur[0]: cur[1]}).setdefault(value, index)
        p = self.pos.get(value)
        if p is None:
            self.pos[value] = (key, offset, index)
        elif p[1] != offset or p[0] != key:
            self.dups.setdefault(value, {(p[0], p[1]): p[2]}).setdefault((key, offset), index)

    def send(self, op: Operation) -> None:
        inv, c = op.invoke, op.complete
        key = inv.key if inv.key is not None else (c.key if c is not None else None)
        if key is None:
            raise self.error("send without a key (one partition per send)", inv.line)
        key = _key(key)
        self.keys.add(key)
        typ = op.type
        value = _value(inv.value)
        offset = None
        if typ == "ok":
            cv = c.value
            if not isinstance(cv, list | tuple) or len(cv) != 2:
                raise self.error(f"send ok value must be [offset, value], got {_short(cv)}", c.line)
            offset, got = cv[0], _value(cv[1])
            if offset is not None and not _is_offset(offset):
                raise self.error(f"send offset must be a non-negative integer or null, got {_short(offset)}", c.line)
            if value is None:
                value = got
            elif got != value:
                raise self.error(
                    f"send ok value carries {_short(got)} but the send invoked {_short(value)} (line {inv.line})",
                    c.line,
                )
        if value is None:
            raise self.error("send without a value", inv.line)
        first = self.sends.get(value)
        if first is not None:
            raise self.error(
                f"value {_short(value)} sent twice (first at line {first[5]}); values must be unique",
                inv.line,
            )
        index = c.index if c is not None else inv.index
        process = inv.process
        self.sends[value] = (key, offset, typ, index, process, inv.line)
        self.sends_by_type[typ] += 1
        if typ != "ok":
            return
        if offset is None:
            self.sends_by_type["ok-without-offset"] += 1
            return
        self.observe(key, offset, value, index)
        last = self.producers.get((process, key))
        if last is not None and offset <= last[0]:
            self.found.add(
                "nonmonotonic-send",
                {
                    "process": process,
                    "key": key,
                    "prev-offset": last[0],
                    "offset": offset,
                    "delta": offset - last[0],
                    "prev-value": last[1],
                    "value": value,
                    "prev-index": last[2],
                    "index": index,
                },
            )
        self.producers[(process, key)] = (offset, value, index)

    def assign(self, op: Operation, f: str) -> None:
        inv = op.invoke
        keys = inv.value
        if not isinstance(keys, list | tuple):
            raise self.error(f"{f} value must be a list of keys, got {_short(keys)}", inv.line)
        for k in keys:
            self.keys.add(_key(k))
        process = inv.process
        if f == "subscribe":
            self.subscribes += 1
            self.subscribed.add(process)
            self.consumers.pop(process, None)
            return
        self.assigns += 1
        state = self.consumers.get(process)
        if state:
            for entry in state.values():
                entry[2] = True

    def commit(self, op: Operation) -> None:
        """An ``ok`` commit: value ``{key: offset}`` (what the group committed). An ``info`` one may
        have committed what its value says (nothing known when it has no map)."""
        c = op.complete
        inv = op.invoke
        if op.type == "fail":
            self.other += 1
            return
        if op.type != "ok" or c is None:
            self.other += 1
            value = c.value if c is not None else inv.value
            line = c.line if c is not None else inv.line
            offsets = self.commit_offsets(value, line) if isinstance(value, dict) else None
            self.group_commits.append((inv.index, None if c is None else c.index, False, offsets))
            return
        value = c.value
        if not isinstance(value, dict):
            raise self.error(f"commit ok value must be a map {{key: offset}}, got {_short(value)}", c.line)
        if "offsets" in value and isinstance(value["offsets"], dict):
            generation = value.get("generation")
            if type(generation) is not int:
                raise self.error(f"commit generation must be an integer, got {_short(generation)}", c.line)
            if value["offsets"]:  # a commit of nothing moves no offset (clients do not even send it)
                example = {"process": inv.process, "generation": generation, "index": c.index}
                self.generations.append((c.index, inv.index, generation, example))
        offsets = self.commit_offsets(value, c.line)
        self.group_commits.append((inv.index, c.index, True, offsets))
        for key, offset in offsets.items():
            example = {"process": inv.process, "key": key, "offset": offset, "index": c.index}
            self.commits.setdefault(key, []).append((c.index, inv.index, offset, example))

    def commit_offsets(self, value: dict, line: int) -> dict[Any, int]:
        """The ``{key: offset}`` of a commit's value (``{key: offset}`` or ``{"generation", "offsets"}``)."""
        if "offsets" in value and isinstance(value["offsets"], dict):
            value = value["offsets"]
        out = {}
        for k, offset in value.items():
            if type(offset) is not int:
                raise self.error(f"commit of key {_short(k)}: offset must be an integer, got {_short(offset)}", line)
            out[_key(k)] = offset
        return out

    def assigned(self, op: Operation, assigned: Any) -> None:
        """A poll's ``assigned`` field: the assignment it began (``{"start": {key: s}, "committed": {key: c},
        "generation": g}``; ``committed`` and ``generation`` are optional)."""
        c = op.complete
        if not isinstance(assigned, dict) or not isinstance(assigned.get("start"), dict):
            raise self.error(
                f'assigned must be a map {{"start": {{key: offset}}, ...}}, got {_short(assigned)}', c.line
            )
        committed = assigned.get("committed", {})
        if not isinstance(committed, dict):
            raise self.error(f"assigned committed must be a map {{key: offset}}, got {_short(committed)}", c.line)
        generation = assigned.get("generation")
        if generation is not None and type(generation) is not int:
            raise self.error(f"assigned generation must be an integer, got {_short(generation)}", c.line)
        by_key = {_key(k): v for k, v in committed.items()}
        starts = {}
        for k, start in assigned["start"].items():
            key = _key(k)
            fetched = by_key.get(key)
            if not _is_offset(start) or (fetched is not None and type(fetched) is not int):
                raise self.error(f"assigned start of key {_short(k)} must be a non-negative integer", c.line)
            starts[key] = (start, fetched)
            self.keys.add(key)
        example = {"process": op.invoke.process, "generation": generation, "index": c.index}
        self.starts.append((op.invoke.index, c.index, example, starts))

    def poll(self, op: Operation) -> None:
        inv, c = op.invoke, op.complete
        process = inv.process
        key = inv.key if inv.key is not None else (c.key if c is not None else None)
        typ = op.type
        self.polls_by_type[typ] += 1
        if c is not None and c.extra and "assigned" in c.extra:
            self.assigned(op, c.extra["assigned"])
        if typ != "ok":
            state = self.consumers.get(process)
            if state is not None:
                if key is None or typ == "info":
                    del self.consumers[process]
                else:
                    state.pop(_key(key), None)
            return
        value = c.value
        if isinstance(value, dict):
            parts: Iterable = value.items()
        elif isinstance(value, list | tuple):
            if key is None:
                raise self.error(
                    f"a poll without a key must return a map {{key: [[offset, value], ...]}}, got {_short(value)}",
                    c.line,
                )
            parts = ((key, value),)
        else:
            raise self.error(
                f"poll ok value must be a list of [offset, value] pairs or a map key -> such a list, "
                f"got {_short(value)}",
                c.line,
            )
        state = self.consumers.get(process)
        if state is None:
            state = self.consumers[process] = {}
        index = c.index
        empty = True
        for k, pairs in parts:
            k = _key(k)
            if not isinstance(pairs, list | tuple):
                raise self.error(
                    f"poll of key {_short(k)} must be a list of [offset, value] pairs, got {_short(pairs)}",
                    c.line,
                )
            if not pairs:
                continue
            empty = False
            self.keys.add(k)
            self.poll_key(k, pairs, process, index, state, c.line)
        if empty:
            self.polls_by_type["empty"] += 1

    def poll_key(self, key: Any, pairs: Any, process: Any, index: int, state: dict, line: int) -> None:
        read = self.read
        observe = self.observe
        found = self.found
        prev = None
        top = -1
        for pr in pairs:
            if not isinstance(pr, list | tuple) or len(pr) != 2:
                raise self.error(f"poll of key {_short(key)}: expected an [offset, value] pair, got {_short(pr)}", line)
            o, v = pr
            if type(o) is not int or o < 0:
                raise self.error(
                    f"poll of key {_short(key)}: offset must be a non-negative integer, got {_short(o)}",
                    line,
                )
            v = _value(v)
            observe(key, o, v, index)
            if v not in read:
                read[v] = (index, key, o)
            if o > top:
                top = o
            if prev is None:
                entry = state.get(key)
                if entry is not None:
                    last, last_index, reset = entry
                    if o <= last:
                        if not reset:
                            found.add(
                                "nonmonotonic-poll",
                                {
                                    "process": process,
                                    "key": key,
                                    "within": False,
                                    "prev-offset": last,
                                    "offset": o,
                                    "delta": o - last,
                                    "prev-index": last_index,
                                    "index": index,
                                },
                            )
                    elif o > last + 1:
                        self.jumps.append(
                            (
                                key,
                                last,
                                o,
                                {
                                    "process": process,
                                    "key": key,
                                    "within": False,
                                    "after-assign": reset,
                                    "prev-offset": last,
                                    "offset": o,
                                    "delta": o - last,
                                    "prev-index": last_index,
                                    "index": index,
                                },
                            )
                        )
            elif o <= prev:
                self.within["nonmonotonic-poll"] = self.within.get("nonmonotonic-poll", 0) + 1
                found.add(
                    "nonmonotonic-poll",
                    {
                        "process": process,
                        "key": key,
                        "within": True,
                        "prev-offset": prev,
                        "offset": o,
                        "delta": o - prev,
                        "index": index,
                    },
                )
            elif o > prev + 1:
                self.jumps.append(
                    (
                        key,
                        prev,
                        o,
                        {
                            "process": process,
                            "key": key,
                            "within": True,
                            "prev-offset": prev,
                            "offset": o,
                            "delta": o - prev,
                            "index": index,
                        },
                    )
                )
            prev = o
        self.pairs_read += len(pairs)
        if process in self.subscribed:
            read_here = self.member_read.get((process, key))
            if read_here is None:
                read_here = self.member_read[(process, key)] = set()
            read_here.update(pr[0] for pr in pairs)
        state[key] = [prev, index, False]
        m = self.max_read.get(key)
        if m is None or top > m[0]:
            self.max_read[key] = (top, index)

    # -- pass 2 ---------------------------------------------------------------------------------

    def finish(self, allow: frozenset[str], history_ops: int) -> dict[str, Any]:
        found = self.found
        if self.generations:
            done = sorted(self.generations)
            ends = [d[0] for d in done]
            top: list[tuple[int, dict]] = []
            for _, _, generation, example in done:
                top.append(max(top[-1], (generation, example), key=lambda b: b[0]) if top else (generation, example))
            for _, invoked, generation, example in self.generations:
                j = bisect_left(ends, invoked)
                if j and top[j - 1][0] > generation:
                    prior = top[j - 1][1]
                    found.add(
                        "stale-generation-commit",
                        {**example, "later-generation": prior["generation"], "later-index": prior["index"]},
                    )
        for commits in self.commits.values():
            done = sorted(commits)  # by completion index
            ends = [d[0] for d in done]
            best: list[tuple[int, dict]] = []  # prefix maxima of the committed offsets, in completion order
            for _, _, offset, example in done:
                best.append(max(best[-1], (offset, example), key=lambda b: b[0]) if best else (offset, example))
            for _, invoked, offset, example in commits:
                j = bisect_left(ends, invoked)  # commits completed before this one was invoked
                if j and best[j - 1][0] > offset:
                    prior = best[j - 1][1]
                    found.add(
                        "commit-regression",
                        {
                            **example,
                            "prev-offset": prior["offset"],
                            "prev-index": prior["index"],
                            "prev-process": prior["process"],
                        },
                    )
        at = self.at
        known = {k: sorted(by_offset) for k, by_offset in at.items()}
        below = self.check_starts(known) if self.starts else None

        for key, low, high, example in self.jumps:
            offsets = known.get(key, ())
            i = bisect_right(offsets, low)
            j = bisect_left(offsets, high)
            if i < j:
                by_offset = at[key]
                example["skipped-count"] = j - i
                example["skipped"] = [[o, by_offset[o][0]] for o in offsets[i : min(j, i + _MAX_LISTED)]]
                if example["within"]:
                    self.within["poll-skip"] = self.within.get("poll-skip", 0) + 1
                found.add("poll-skip", example)

        for (key, offset), values in self.conflicts.items():
            found.add(
                "inconsistent-offsets",
                {
                    "key": key,
                    "offset": offset,
                    "values": [{"value": v, "index": i} for v, i in values.items()],
                },
            )

        for value, positions in self.dups.items():
            found.add(
                "duplicate",
                {
                    "value": value,
                    "positions": [{"key": k, "offset": o, "index": i} for (k, o), i in positions.items()],
                },
            )

        read = self.read
        max_read = self.max_read
        recovered = AnomalyCounts(MAX_EXAMPLES)
        unseen_by_key: dict[str, int] = {}
        for value, (key, offset, typ, index, process, _line) in self.sends.items():
            r = read.get(value)
            if typ == "ok":
                if r is not None:
                    continue
                m = max_read.get(key)
                if offset is not None and m is not None and m[0] > offset:
                    found.add(
                        "lost-write",
                        {
                            "key": key,
                            "offset": offset,
                            "value": value,
                            "index": index,
                            "process": process,
                            "max-read-offset": m[0],
                            "max-read-index": m[1],
                        },
                    )
                else:
                    jk = _jkey(key)
                    unseen_by_key[jk] = unseen_by_key.get(jk, 0) + 1
                    found.add(
                        "unseen",
                        {
                            "key": key,
                            "offset": offset,
                            "value": value,
                            "index": index,
                            "process": process,
                        },
                    )
            elif r is not None:
                example = {
                    "key": key,
                    "value": value,
                    "index": index,
                    "process": process,
                    "read-key": r[1],
                    "read-offset": r[2],
                    "read-index": r[0],
                }
                if typ == "fail":
                    found.add("aborted-read", example)
                else:
                    recovered.add("recovered", example)

        sends = self.sends
        unsent = AnomalyCounts(MAX_EXAMPLES)
        for value, (index, key, offset) in read.items():
            if value not in sends:
                unsent.add("unsent", {"key": key, "offset": offset, "value": value, "index": index})

        names = sorted(n for n, c in found.counts.items() if c)
        by_subscribe = []
        if self.subscribes:
            by_subscribe = [n for n in ("nonmonotonic-poll", "poll-skip") if n in names and not self.within.get(n)]
        bad = [n for n in names if n not in allow and n not in by_subscribe]
        anomalies: dict[str, dict[str, Any]] = {}
        for n in names:
            anomalies[n] = {"count": found.counts[n], "examples": found.examples.get(n, [])}
        if "unseen" in anomalies:
            anomalies["unseen"]["by-key"] = dict(sorted(unseen_by_key.items()))

        if bad:
            valid: bool | str = False
        elif self.polls_by_type["ok"] == 0:
            valid = "unknown"
        else:
            valid = True

        stats = {
            "ops": history_ops,
            "sends": dict(self.sends_by_type),
            "polls": dict(self.polls_by_type),
            "assigns": self.assigns,
            "subscribes": self.subscribes,
            **({"assignment-starts": sum(len(st[3]) for st in self.starts)} if self.starts else {}),
            "other-ops": self.other,
            "keys": len(self.keys),
            "values-sent": len(sends),
            "values-read": len(read),
            "pairs-read": self.pairs_read,
            "max-offset": {_jkey(k): offsets[-1] for k, offsets in sorted(known.items(), key=_sort_key) if offsets},
            "max-read-offset": {_jkey(k): m[0] for k, m in sorted(max_read.items(), key=_sort_key)},
        }
        return {
            "valid": valid,
            "anomaly-types": names,
            "bad-anomaly-types": bad,
            "anomalies": anomalies,
            "recovered": {
                "count": recovered.counts.get("recovered", 0),
                "examples": recovered.examples.get("recovered", []),
            },
            "unsent-reads": {"count": unsent.counts.get("unsent", 0), "examples": unsent.examples.get("unsent", [])},
            **({"allowed-by-subscribe": by_subscribe} if by_subscribe else {}),
            **({"start-before-commit": below} if below is not None else {}),
            "stats": stats,
        }

    def check_starts(self, known: dict[Any, list[int]]) -> dict[str, Any]:
        """start-past-commit: each assignment's start against the commits that could have been in effect.

        The committed offset of a key is a register and a commit a write of it. The OffsetFetch of a
        poll that began an assignment happened inside that poll, so it could have answered any commit
        invoked before the poll completed, except one that a later ``ok`` commit definitely replaced
        before the poll began (that one completed, then the later one was invoked and completed before
        the poll's invocation), or the initial "nothing committed" (offset 0) once an ``ok`` commit
        completed before the poll. An ``info`` commit may take effect at any time after its invocation,
        so it is never replaced. A start past every such commit, over offsets that hold records, is
        ``start-past-commit`` (offsets the same process read do not count); one before every such
        commit (re-delivery, allowed) is returned for the result's ``start-before-commit``. Polls that
        an ``info`` commit of unknown offsets could have affected are not judged. One sweep in index
        order: linear, plus the operations open at once.
        """
        events: list[tuple[int, int, int]] = []  # (index, kind, item): kinds below, ordered by index only
        for i, (call, ret, ok, _) in enumerate(self.group_commits):
            events.append((call, 0, i))
            if ok and ret is not None:
                events.append((ret, 1, i))
        for i, (call, ret, _, _) in enumerate(self.starts):
            events.append((call, 2, i))
            events.append((ret, 3, i))
        events.sort()
        commits = self.group_commits
        # per key: the latest invocation of an ok commit completed so far, and the ok commits completed
        # after it (not replaced yet): [(offset, commit)]; ok commits still open; the lowest and the
        # highest info commit so far (never replaced, so only those two can bound a start)
        settled: dict[Any, int] = {}
        live: dict[Any, list[tuple[int, int]]] = {}
        open_ok: dict[Any, dict[int, int]] = {}
        infos: dict[Any, list[tuple[int, int]]] = {}
        unknown = False  # an info commit with unknown offsets was invoked
        # open polls: poll -> [judgeable, {key: [(offset, commit | None)]}]: the commits its OffsetFetch could answer
        pending: dict[int, tuple[list[bool], dict[Any, list[tuple[int, int | None]]]]] = {}
        below = AnomalyCounts(MAX_EXAMPLES)
        unjudged = 0
        for _, kind, i in events:
            if kind == 0:  # a commit invoked: a candidate of every poll open now, for its keys
                offsets = commits[i][3]
                if offsets is None:
                    unknown = True
                    for judged, _ in pending.values():
                        judged[0] = False
                    continue
                for key, offset in offsets.items():
                    if commits[i][2]:
                        open_ok.setdefault(key, {})[i] = offset
                    else:
                        low, high = infos.get(key, ((offset, i), (offset, i)))
                        infos[key] = [min(low, (offset, i)), max(high, (offset, i))]
                    for _, cands in pending.values():
                        if key in cands:
                            cands[key].append((offset, i))
            elif kind == 1:  # an ok commit completed: it replaces those completed before it was invoked
                call, _, _, offsets = commits[i]
                for key, offset in (offsets or {}).items():
                    open_ok.get(key, {}).pop(i, None)
                    last = settled[key] = max(call, settled.get(key, -1))
                    live[key] = [(o, c) for o, c in live.get(key, ()) if self._completed(c) > last] + [(offset, i)]
            elif kind == 2:  # a poll invoked: what its OffsetFetch could answer, so far
                cands: dict[Any, list[tuple[int, int | None]]] = {}
                for key in self.starts[i][3]:
                    now: list[tuple[int, int | None]] = [*live.get(key, ()), *infos.get(key, ())]
                    now += [(o, c) for c, o in open_ok.get(key, {}).items()]
                    if key not in settled:
                        now.append((0, None))  # nothing committed yet: the beginning
                    cands[key] = now
                pending[i] = ([not unknown], cands)
            else:
                judged, cands = pending.pop(i)
                _, _, example, starts = self.starts[i]
                if not judged[0]:
                    unjudged += len(starts)
                    continue
                for key, (start, fetched) in starts.items():
                    hi = max(cands[key], key=lambda c: c[0])
                    lo = min(cands[key], key=lambda c: c[0])
                    detail = {**example, "key": key, "start": start, "committed": fetched}
                    if start > hi[0]:
                        offsets = known.get(key, ())
                        had = self.member_read.get((example["process"], key), ())
                        a, b = bisect_left(offsets, hi[0]), bisect_left(offsets, start)
                        skipped = [o for o in offsets[a:b] if o not in had]
                        if skipped:
                            by_offset = self.at[key]
                            self.found.add(
                                "start-past-commit",
                                {
                                    **detail,
                                    "max-commit": hi[0],
                                    "commit-index": None if hi[1] is None else self._completed(hi[1]),
                                    "skipped-count": len(skipped),
                                    "skipped": [[o, by_offset[o][0]] for o in skipped[:_MAX_LISTED]],
                                },
                            )
                    elif start < lo[0]:
                        below.add(
                            "below",
                            {
                                **detail,
                                "min-commit": lo[0],
                                "commit-index": None if lo[1] is None else self._completed(lo[1]),
                            },
                        )
        out: dict[str, Any] = {"count": below.counts.get("below", 0), "examples": below.examples.get("below", [])}
        if unjudged:
            out["unjudged-starts"] = unjudged
        return out

    def _completed(self, i: int) -> int:
        """The index of commit `i`'s completion (of its invocation when it has none)."""
        call, ret, _, _ = self.group_commits[i]
        return ret if ret is not None else call


def _sort_key(item: tuple[Any, Any]) -> str:
    return _jkey(item[0])


def check_queue(history: History, allow: Iterable[str] = ()) -> dict[str, Any]:
    """Check a queue history for Jepsen's Kafka anomalies; see the module docstring for the result.

    `allow` names anomaly types that do not make the history invalid (they are still reported).
    Raises InputError on malformed queue ops or an unknown name in `allow`.
    """
    allowed = frozenset([allow] if isinstance(allow, str) else allow)
    unknown = sorted(allowed.difference(ANOMALY_TYPES))
    if unknown:
        raise InputError(
            f"unknown anomaly type(s) to allow: {', '.join(unknown)} (known: {', '.join(ANOMALY_TYPES)})",
            file=history.source,
        )
    checker = _QueueChecker(history.source)
    feed = checker.feed
    for op in history.operations():
        feed(op)
    return checker.finish(allowed, len(history))
