"""Epoch and leader safety checker: reads the nodes' events (``events.jsonl``) and their end-of-run
committed log dumps (``logs/<node>.jsonl``) and reports what Raft/KRaft promises never happens.

Anomalies (see docs/design.md "Epochs and leaders"; the events: docs/formats.md "Node events"):

* ``multiple-leaders`` -- two different leaders for one epoch. A node in role ``leader`` claims the
  epoch for itself (``"source": "self"``); a node that records ``leader: B`` claims it for B
  (``"source": "observed"``). The example's ``source`` is ``self`` when at least two of the leaders
  said so themselves, else ``observed``.
* ``epoch-regression`` -- a node's epoch (from its ``state`` events) goes down, restarts included.
* ``double-vote`` -- a node votes for two candidates in one epoch. ``voted_for`` is a vote, and so is
  being ``candidate`` or ``leader`` (a vote for oneself).
* ``hw-regression`` -- a node's high watermark goes down, restarts included.
* ``multiple-partition-leaders`` -- two leaders for one (partition, leader_epoch).
* ``committed-divergence`` -- two log dumps hold different (epoch, digest) at one offset; only
  offsets present in at least two dumps are compared.

Events of one node are ordered by their order in the input; ``time`` (a node's own, possibly skewed
clock) is never used. The scan is a single pass, linear in the number of events plus log entries.

The same bookkeeping checks runs as they happen: :class:`EpochChecker` takes one event at a time
(the raft and broker tests feed it their nodes' events), and its parts -- :class:`Claims` (one
leader per key), :class:`Monotonic` (a per-node value never goes down) and :class:`CommittedLog`
(one entry per committed offset) -- are what the simulator's invariants (``harness/sim/invariants.py``)
are built on.
"""

from __future__ import annotations

import gc
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from checkers.errors import InputError

__all__ = [
    "ANOMALY_TYPES",
    "MAX_EXAMPLES",
    "ROLES",
    "Claims",
    "CommittedLog",
    "EpochChecker",
    "Monotonic",
    "check_epochs",
    "check_events",
    "load_events",
    "load_logs",
]

ROLES = frozenset({"unattached", "voted", "candidate", "leader", "follower", "resigned"})
ANOMALY_TYPES = (
    "committed-divergence",
    "double-vote",
    "epoch-regression",
    "hw-regression",
    "multiple-leaders",
    "multiple-partition-leaders",
)
MAX_EXAMPLES = 20

# Event types after which a node counts as having restarted (used only to annotate examples).
_RESTART_TYPES = frozenset({"restart", "start"})
_SELF_VOTING_ROLES = frozenset({"candidate", "leader"})

# A reference to one input record: (0-based index, 1-based line or None, the object).
_Ref = tuple[int, int | None, dict]


def _describe(x: Any) -> str:
    text = json.dumps(x) if isinstance(x, str | int | float | bool | type(None)) else type(x).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _nat_field(ev: dict, key: str, required: bool = True) -> int | None:
    value = ev.get(key)
    if type(value) is int and value >= 0:
        return value
    if value is None and not required:
        return None
    what = "missing" if key not in ev else f"got {_describe(value)}"
    raise InputError(f'"{key}" must be a non-negative integer ({what})')


def _name_field(ev: dict, key: str, required: bool) -> str | None:
    value = ev.get(key)
    if value is None:
        if required:
            raise InputError(f'"{key}" must be a non-empty string (missing)')
        return None
    if type(value) is not str or not value:
        raise InputError(f'"{key}" must be a non-empty string or null (got {_describe(value)})')
    return value


class Claims:
    """Who leads each key (an epoch, or a (partition, leader epoch)), from claims made by a leader
    itself (``own``) or by another node: per leader, its first own claim and its first observed one."""

    __slots__ = ("by_key",)

    def __init__(self) -> None:
        self.by_key: dict[Any, dict[Any, list[Any]]] = {}

    def add(self, key: Any, leader: Any, own: bool, ref: Any) -> bool:
        """Record a claim; True when it names a further leader for a key that already had one."""
        by_leader = self.by_key.get(key)
        if by_leader is None:
            self.by_key[key] = {leader: [ref, None] if own else [None, ref]}
            return False
        slot = by_leader.get(leader)
        if slot is None:
            by_leader[leader] = [ref, None] if own else [None, ref]
            return True
        if own:
            if slot[0] is None:
                slot[0] = ref
        elif slot[1] is None:
            slot[1] = ref
        return False

    def conflicts(self) -> list[Any]:
        """The keys with two leaders or more, sorted."""
        return sorted(k for k, v in self.by_key.items() if len(v) > 1)


class Monotonic:
    """A per-node value that must never go down, restarts included (an epoch, a high watermark)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: dict[Any, tuple[int, Any, int]] = {}  # node -> (value, ref, generation)

    def observe(self, node: Any, value: int, ref: Any, generation: int = 0) -> tuple[int, Any, int] | None:
        """Record `value`; the previous (value, ref, generation) if `value` is below it, else None."""
        last = self.last
        prev = last.get(node)
        last[node] = (value, ref, generation)
        if prev is not None and value < prev[0]:
            return prev
        return None


class CommittedLog:
    """The first entry committed at each offset (who, and its content: e.g. (epoch, digest)); any
    other content at that offset later is a divergence."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first: dict[int, tuple[Any, Any]] = {}

    def add(self, offset: int, node: Any, content: Any) -> tuple[Any, Any] | None:
        """Record an entry; the first (node, content) at `offset` if this one differs, else None."""
        first = self.first.get(offset)
        if first is None:
            self.first[offset] = (node, content)
            return None
        return first if first[1] != content else None


class EpochChecker:
    """Single-pass state for one event stream: ``feed`` each event (and ``check_logs`` the dumps),
    then ``result``; ``anomaly_counts`` tells what was found so far."""

    def __init__(self, max_examples: int) -> None:
        self.max_examples = max_examples
        self.events = 0
        self.nodes: set[str] = set()
        self.by_type: dict[str, int] = {}
        self.generation: dict[str, int] = {}  # node -> restarts seen so far
        self.node_epoch = Monotonic()  # from state events
        self.node_hw = Monotonic()
        self.claims = Claims()  # epoch -> leader
        self.epochs: set[int] = set()
        # (node, epoch) -> (candidate, ref) for the first vote; a dict once a second candidate appears
        self.votes: dict[tuple[str, int], Any] = {}
        self.partition_claims = Claims()  # (partition, leader_epoch) -> leader
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[dict]] = {}
        self.log_stats: dict[str, int] = {}

    # -- bookkeeping ---------------------------------------------------------------------------

    def _keep(self, name: str) -> bool:
        """Count one anomaly; True if its example should still be recorded."""
        n = self.counts.get(name, 0) + 1
        self.counts[name] = n
        return n <= self.max_examples

    def _add(self, name: str, example: dict) -> None:
        self.examples.setdefault(name, []).append(example)

    # -- events --------------------------------------------------------------------------------

    def feed(self, ev: Any, index: int, line: int | None) -> None:
        if type(ev) is not dict:
            raise InputError(f"event must be a JSON object (got {_describe(ev)})")
        node = ev.get("node")
        if type(node) is not str or not node:
            what = "missing" if "node" not in ev else f"got {_describe(node)}"
            raise InputError(f'"node" must be a non-empty string ({what})')
        typ = ev.get("type")
        if type(typ) is not str or not typ:
            what = "missing" if "type" not in ev else f"got {_describe(typ)}"
            raise InputError(f'"type" must be a non-empty string ({what})')
        t = ev.get("time")
        if t is not None and (type(t) is not int and type(t) is not float):
            raise InputError(f'"time" must be a number (got {_describe(t)})')

        self.events += 1
        self.nodes.add(node)
        self.by_type[typ] = self.by_type.get(typ, 0) + 1
        if typ == "state":
            self._state(ev, node, (index, line, ev))
        elif typ == "hw":
            self._hw(ev, node, (index, line, ev))
        elif typ == "partition-leader":
            self._partition_leader(ev, node, (index, line, ev))
        elif typ in _RESTART_TYPES:
            self.generation[node] = self.generation.get(node, 0) + 1

    def _state(self, ev: dict, node: str, ref: _Ref) -> None:
        epoch = _nat_field(ev, "epoch")
        role = ev.get("role")
        if type(role) is not str or role not in ROLES:
            what = "missing" if "role" not in ev else f"got {_describe(role)}"
            raise InputError(f'"role" must be one of {", ".join(sorted(ROLES))} ({what})')
        leader = _name_field(ev, "leader", False)
        voted_for = _name_field(ev, "voted_for", False)
        gen = self.generation.get(node, 0)
        self.epochs.add(epoch)

        prev = self.node_epoch.observe(node, epoch, ref, gen)
        if prev is not None and self._keep("epoch-regression"):
            self._add(
                "epoch-regression",
                {
                    "node": node,
                    "from": prev[0],
                    "to": epoch,
                    "across-restart": gen != prev[2],
                    "events": [prev[1], ref],
                },
            )

        if role == "leader":
            self.claims.add(epoch, node, True, ref)
        if leader is not None and not (role == "leader" and leader == node):
            self.claims.add(epoch, leader, leader == node, ref)

        if role in _SELF_VOTING_ROLES:
            self._vote(node, epoch, node, ref)
        if voted_for is not None and not (voted_for == node and role in _SELF_VOTING_ROLES):
            self._vote(node, epoch, voted_for, ref)

    def _vote(self, node: str, epoch: int, candidate: str, ref: _Ref) -> None:
        key = (node, epoch)
        seen = self.votes.get(key)
        if seen is None:
            self.votes[key] = (candidate, ref)
            return
        if type(seen) is tuple:
            if seen[0] == candidate:
                return
            seen = self.votes[key] = {seen[0]: seen[1]}
        elif candidate in seen:
            return
        if self._keep("double-vote"):
            first_candidate, first_ref = next(iter(seen.items()))
            events = [first_ref] if first_ref is ref else [first_ref, ref]
            self._add(
                "double-vote",
                {
                    "node": node,
                    "epoch": epoch,
                    "candidates": [first_candidate, candidate],
                    "events": events,
                },
            )
        seen[candidate] = ref

    def _hw(self, ev: dict, node: str, ref: _Ref) -> None:
        hw = _nat_field(ev, "hw")
        _nat_field(ev, "epoch", required=False)
        gen = self.generation.get(node, 0)
        prev = self.node_hw.observe(node, hw, ref, gen)
        if prev is not None and self._keep("hw-regression"):
            self._add(
                "hw-regression",
                {
                    "node": node,
                    "from": prev[0],
                    "to": hw,
                    "across-restart": gen != prev[2],
                    "events": [prev[1], ref],
                },
            )

    def _partition_leader(self, ev: dict, node: str, ref: _Ref) -> None:
        partition = _name_field(ev, "partition", True)
        leader_epoch = _nat_field(ev, "leader_epoch")
        leader = _name_field(ev, "leader", False)
        if leader is not None:
            self.partition_claims.add((partition, leader_epoch), leader, leader == node, ref)

    # -- end of stream -------------------------------------------------------------------------

    @staticmethod
    def _conflict(by_leader: dict[str, list[_Ref | None]]) -> tuple[str, list[dict]]:
        own = sum(1 for slot in by_leader.values() if slot[0] is not None)
        claims = []
        for leader in sorted(by_leader):
            self_ref, observed_ref = by_leader[leader]
            claims.append(
                {
                    "leader": leader,
                    "source": "self" if self_ref is not None else "observed",
                    "ref": self_ref if self_ref is not None else observed_ref,
                }
            )
        return ("self" if own >= 2 else "observed"), claims

    def _leader_conflicts(self, counts: dict[str, int], examples: dict[str, list[dict]]) -> None:
        """Add the leader conflicts (known only once every claim is in) to copies of the findings."""

        def keep(name: str, example: dict) -> None:
            counts[name] = counts.get(name, 0) + 1
            if counts[name] <= self.max_examples:
                examples.setdefault(name, []).append(example)

        for epoch in self.claims.conflicts():
            source, claims = self._conflict(self.claims.by_key[epoch])
            keep(
                "multiple-leaders",
                {"epoch": epoch, "nodes": [c["leader"] for c in claims], "source": source, "events": claims},
            )
        for partition, leader_epoch in self.partition_claims.conflicts():
            source, claims = self._conflict(self.partition_claims.by_key[(partition, leader_epoch)])
            keep(
                "multiple-partition-leaders",
                {
                    "partition": partition,
                    "leader_epoch": leader_epoch,
                    "leaders": [c["leader"] for c in claims],
                    "source": source,
                    "events": claims,
                },
            )

    def check_logs(self, logs: Mapping[str, list[tuple[int | None, dict]]]) -> None:
        """Compare validated log dumps: offset -> the entries each node holds there."""
        committed = CommittedLog()
        add = committed.add
        divergent: set[int] = set()
        offsets: list[int] = []
        for node in sorted(logs):
            for _, entry in logs[node]:
                offset = entry["offset"]
                offsets.append(offset)
                if add(offset, node, (entry["epoch"], entry["digest"])) is not None:
                    divergent.add(offset)
        at: dict[int, list[tuple[str, int | None, dict]]] = {}  # who holds what at a divergent offset
        if divergent:
            for node in sorted(logs):
                for line, entry in logs[node]:
                    if entry["offset"] in divergent:
                        at.setdefault(entry["offset"], []).append((node, line, entry))
        for offset in sorted(divergent):
            if not self._keep("committed-divergence"):
                continue
            held = at[offset]
            self._add(
                "committed-divergence",
                {
                    "offset": offset,
                    "nodes": [n for n, _, _ in held],
                    "entries": [
                        {"node": n, **({"line": ln} if ln is not None else {}), "entry": dict(e)} for n, ln, e in held
                    ],
                },
            )
        compared = sum(1 for n in Counter(offsets).values() if n > 1)
        self.log_stats = {"log-dumps": len(logs), "log-entries": len(offsets), "offsets-compared": compared}

    def anomaly_counts(self) -> dict[str, int]:
        """What was found so far: anomaly name -> count (the leader conflicts included)."""
        counts = {n: c for n, c in self.counts.items() if c}
        for name, claims in (("multiple-leaders", self.claims), ("multiple-partition-leaders", self.partition_claims)):
            if conflicts := len(claims.conflicts()):
                counts[name] = conflicts
        return dict(sorted(counts.items()))

    def result(self) -> dict:
        """The verdict on everything fed so far (it may be asked again after more events)."""
        counts = dict(self.counts)
        examples = {name: list(found) for name, found in self.examples.items()}
        self._leader_conflicts(counts, examples)
        leaders = {e: sorted(by_leader) for e, by_leader in sorted(self.claims.by_key.items())}
        per_epoch: dict[str, int] = {}
        for names in leaders.values():
            per_epoch[str(len(names))] = per_epoch.get(str(len(names)), 0) + 1
        stats = {
            "events": self.events,
            "events-by-type": dict(sorted(self.by_type.items())),
            "nodes": len(self.nodes),
            "epochs": len(self.epochs),
            "max-epoch": max(self.epochs) if self.epochs else None,
            "epochs-without-leader": len(self.epochs - leaders.keys()),
            "leaders-per-epoch": dict(sorted(per_epoch.items())),
            "leaders-by-epoch": {str(e): names for e, names in leaders.items()},
            "max-hw": max((hw for hw, _, _ in self.node_hw.last.values()), default=None),
            "votes": len(self.votes),
            "partitions": len({p for p, _ in self.partition_claims.by_key}),
            "restarts": sum(self.generation.values()),
            **self.log_stats,
        }
        names = sorted(n for n, c in counts.items() if c)
        return {
            "valid": not names,
            "anomaly-types": names,
            "anomalies": {n: [_materialize(x) for x in examples.get(n, [])] for n in names},
            "anomaly-counts": {n: counts[n] for n in names},
            "stats": stats,
        }


def _ref_json(ref: _Ref) -> dict:
    index, line, ev = ref
    out: dict[str, Any] = {"index": index}
    if line is not None:
        out["line"] = line
    out["event"] = dict(ev)
    return out


def _materialize(example: dict) -> dict:
    """Turn internal refs into {"index", "line"?, "event"} objects."""
    out = dict(example)
    events = out.get("events")
    if events is not None:
        materialized = []
        for item in events:
            if isinstance(item, tuple):
                materialized.append(_ref_json(item))
            else:
                extra = {k: v for k, v in item.items() if k != "ref"}
                materialized.append({**_ref_json(item["ref"]), **extra})
        out["events"] = materialized
    return out


# -- log dumps --------------------------------------------------------------------------------


def _check_log_entry(entry: Any, seen: dict[int, int | None], where: int | None) -> None:
    if type(entry) is not dict:
        raise InputError(f"log entry must be a JSON object (got {_describe(entry)})")
    offset = entry.get("offset")
    if type(offset) is not int or offset < 0:
        _nat_field(entry, "offset")  # raises, naming what is wrong
    epoch = entry.get("epoch")
    if type(epoch) is not int or epoch < 0:
        _nat_field(entry, "epoch")
    if type(entry.get("digest")) is not str:
        what = "missing" if "digest" not in entry else f"got {_describe(entry.get('digest'))}"
        raise InputError(f'"digest" must be a string ({what})')
    if offset in seen:
        first = seen[offset]
        at = f" (first at line {first})" if first is not None else ""
        raise InputError(f"duplicate offset {offset} in one log dump{at}")
    seen[offset] = where


def _validated_logs(logs: Mapping[str, Any]) -> dict[str, list[tuple[int | None, dict]]]:
    if not isinstance(logs, Mapping):
        raise InputError(f"logs must map node names to entry lists (got {type(logs).__name__})")
    out: dict[str, list[tuple[int | None, dict]]] = {}
    for node, entries in logs.items():
        if type(node) is not str or not node:
            raise InputError(f"log dump node name must be a non-empty string (got {_describe(node)})")
        if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Iterable):
            raise InputError(f"logs[{node!r}] must be a list of entries")
        seen: dict[int, int | None] = {}
        checked = []
        for i, entry in enumerate(entries):
            try:
                _check_log_entry(entry, seen, None)
            except InputError as e:
                raise InputError(f"logs[{node!r}] entry at index {i}: {e.message}") from None
            checked.append((None, entry))
        out[node] = checked
    return out


# -- files ------------------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (1-based line, parsed JSON) for each non-blank line of a JSON Lines file."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    with f:
        for lineno, raw in enumerate(f, 1):
            try:
                obj = json.loads(raw)
            except UnicodeDecodeError:
                raise InputError("not valid UTF-8", file=str(path), line=lineno) from None
            except ValueError as e:
                if not raw.strip():
                    continue
                msg = getattr(e, "msg", str(e))
                col = getattr(e, "colno", None)
                detail = f"{msg} (column {col})" if col is not None else msg
                raise InputError(f"not valid JSON: {detail}", file=str(path), line=lineno) from None
            except RecursionError:
                raise InputError("JSON nested too deeply", file=str(path), line=lineno) from None
            yield lineno, obj


def _events_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_dir():
        ev = p / "events.jsonl"
        if not ev.is_file():
            raise InputError("run directory has no events.jsonl", file=str(p))
        return ev
    if not p.exists():
        raise InputError("no such file or directory", file=str(p))
    return p


def load_events(path: str | os.PathLike) -> list[dict]:
    """Read and validate an events file (or a run directory's ``events.jsonl``).

    Raises InputError naming the file and line for anything malformed.
    """
    p = _events_path(path)
    checker = EpochChecker(0)
    events: list[dict] = []
    line = None
    # Building a million small dicts triggers many useless cyclic-GC passes; pause it meanwhile.
    paused = gc.isenabled()
    gc.disable()
    try:
        for line, ev in _jsonl(p):
            checker.feed(ev, len(events), line)
            events.append(ev)
    except InputError as e:
        raise e.located(str(p), line) from None
    finally:
        if paused:
            gc.enable()
    return events


def load_logs(run_dir: str | os.PathLike) -> dict[str, list[dict]]:
    """Read and validate ``<run_dir>/logs/<node>.jsonl`` dumps; {} when there are none."""
    return {node: [e for _, e in entries] for node, entries in _load_logs(Path(run_dir)).items()}


def _load_logs(run_dir: Path) -> dict[str, list[tuple[int | None, dict]]]:
    logs_dir = run_dir / "logs"
    if not logs_dir.is_dir():
        return {}
    return _load_logs_dir(logs_dir)


# -- public entry points ----------------------------------------------------------------------


def _result(checker: EpochChecker) -> dict:
    result = checker.result()
    if checker.events == 0 and result["valid"]:
        return {"valid": "unknown", "error": "no events"}
    return result


def check_events(
    events: Iterable[dict],
    logs: Mapping[str, list[dict]] | None = None,
    *,
    max_examples: int = MAX_EXAMPLES,
) -> dict:
    """Check an in-memory event stream (and optional log dumps: node -> committed entries).

    Events of one node must appear in that node's order. Returns the result dict described in the
    module docstring; ``{"valid": "unknown", "error": "no events"}`` when there are no events and
    the dumps (if any) agree. Raises InputError for malformed events or entries.
    """
    checker = EpochChecker(max_examples)
    checked_logs = _validated_logs(logs) if logs is not None else {}
    index = -1
    try:
        for index, ev in enumerate(events):
            checker.feed(ev, index, None)
    except InputError as e:
        raise InputError(f"event at index {index}: {e.message}") from None
    checker.check_logs(checked_logs)
    return _result(checker)


def check_epochs(path: str | os.PathLike, *, max_examples: int = MAX_EXAMPLES) -> dict:
    """Check a run directory (``events.jsonl`` plus optional ``logs/``) or a single events file.

    Example events carry their 1-based ``line`` in the events file.
    """
    p = Path(path)
    ev_path = _events_path(p)
    checked_logs = _load_logs(p) if p.is_dir() else {}
    checker = EpochChecker(max_examples)
    index = 0
    line = None
    try:
        for line, ev in _jsonl(ev_path):
            checker.feed(ev, index, line)
            index += 1
    except InputError as e:
        raise e.located(str(ev_path), line) from None
    checker.check_logs(checked_logs)
    return _result(checker)


def check_partition_logs(dumps: Mapping[str, Mapping[str, list[dict]]]) -> dict:
    """committed-divergence for a broker's partitions: {partition: {node: [{offset, epoch, digest}]}}.

    Each partition's replicas are compared with each other only (offsets of different partitions
    are unrelated). Valid when no two replicas of a partition hold different entries at one
    committed offset.
    """
    divergent: list[dict] = []
    total = 0
    for partition, logs in sorted(dumps.items()):
        checker = EpochChecker(MAX_EXAMPLES)
        checker.check_logs(_validated_logs(logs))
        result = _result(checker)
        for example in result.get("anomalies", {}).get("committed-divergence", []):
            divergent.append({"partition": partition, **example})
        total += result.get("anomaly-counts", {}).get("committed-divergence", 0)
    out: dict[str, Any] = {"valid": not divergent, "partitions": len(dumps)}
    if divergent:
        out["anomaly-types"] = ["committed-divergence"]
        out["anomalies"] = {"committed-divergence": divergent[:MAX_EXAMPLES]}
        out["anomaly-counts"] = {"committed-divergence": total}
    return out


def load_partition_logs(run_dir: str | os.PathLike) -> dict[str, dict[str, list[dict]]]:
    """Read `<run_dir>/logs/partitions/<partition>/<node>.jsonl` dumps; {} when there are none."""
    root = Path(run_dir) / "logs" / "partitions"
    if not root.is_dir():
        return {}
    out: dict[str, dict[str, list[dict]]] = {}
    for part_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        out[part_dir.name] = {node: [e for _, e in entries] for node, entries in _load_logs_dir(part_dir).items()}
    return out


def _load_logs_dir(logs_dir: Path) -> dict[str, list[tuple[int | None, dict]]]:
    out: dict[str, list[tuple[int | None, dict]]] = {}
    for f in sorted(logs_dir.glob("*.jsonl")):
        seen: dict[int, int | None] = {}
        entries: list[tuple[int | None, dict]] = []
        line = None
        try:
            for line, entry in _jsonl(f):
                _check_log_entry(entry, seen, line)
                entries.append((line, entry))
        except InputError as e:
            raise e.located(str(f), line) from None
        out[f.stem] = entries
    return out
