"""Per-key pages of a run: linearizability timelines for registers, op tables for queue partitions.

Register keys reuse `checkers.linearizable.timeline` (one column per process, the failing key
annotated with the longest linearizable prefix). Queue partitions get a table of their sends
and polls, with the ops named by the queue checker's anomaly examples highlighted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.history import History, Op, Operation, freeze
from checkers.linearizable.timeline import write_timeline
from harness.store.report.data import Run
from harness.store.report.markup import esc, page, short_json

DIR = "timelines"
MAX_KEYS = 200  # pages per run (the failing key always gets one)
MAX_ROWS = 4000  # rows of a queue partition table (anomalous rows are always kept)


@dataclass(frozen=True, slots=True)
class Page:
    """One written per-key page: its key, path relative to the run directory, op count, verdict note."""

    key: Any
    rel: str
    ops: int
    note: str
    hits: int = 0


def _file_name(key: Any, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", str(key)).strip("._") or "key"
    name, n = base[:80], 1
    while name in taken:
        n += 1
        name = f"{base[:80]}-{n}"
    taken.add(name)
    return name + ".html"


def _by_key(ops: Iterable[Op]) -> dict[Any, list[Op]]:
    out: dict[Any, list[Op]] = {}
    for op in ops:
        if op.is_client:
            out.setdefault(op.key, []).append(op)
    return out


def _natural(key: Any) -> tuple[Any, ...]:
    """r2 before r10: digit runs compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(key)))


def _key_order(keys: Iterable[Any], first: Any) -> list[Any]:
    rest = sorted((k for k in keys if k != first), key=lambda k: (str(type(k)), _natural(k)))
    return ([first] if first in keys else []) + rest  # type: ignore[operator]


def register_timelines(run: Run, out: Path) -> tuple[list[Page], int]:
    """One timeline page per register key: (pages written, keys left out by MAX_KEYS)."""
    assert run.history is not None
    lin = (run.results or {}).get("linearizable")
    lin = lin if isinstance(lin, dict) else {}
    failure = lin.get("failure") or {}
    failing = freeze(failure["key"]) if "key" in failure else object()
    unknown = {freeze(u.get("key")) for u in lin.get("unknown-keys") or [] if isinstance(u, dict)}
    groups = _by_key(run.history.ops)
    order = _key_order(groups, failing)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    pages = []
    for key in order[:MAX_KEYS]:
        sub = History(groups[key], run.history.source)
        if key == failing:
            result, note = lin, "NOT linearizable"
        elif not lin:
            result, note = {"valid": "unknown", "model": None}, "not checked"
        elif lin.get("valid") is True:
            result, note = {"valid": True, "model": lin.get("model")}, "linearizable"
        elif key in unknown:
            result, note = {"valid": "unknown", "model": lin.get("model")}, "unknown (the search gave up)"
        else:
            result = {"valid": "unknown", "model": lin.get("model")}
            note = "not decided (the search stopped at the first invalid key)"
        name = _file_name(key, taken)
        write_timeline(sub, result, str(out / name), key=key)
        pages.append(Page(key, f"{DIR}/{name}", len(sub.operations()), note))
    return pages, max(0, len(order) - MAX_KEYS)


def indices(example: Any) -> Iterable[int]:
    """Every history index an anomaly example names (index, read-index, values[].index, …)."""
    if isinstance(example, dict):
        for k, v in example.items():
            if k.endswith("index") and isinstance(v, int) and not isinstance(v, bool):
                yield v
            elif isinstance(v, (dict, list)):
                yield from indices(v)
    elif isinstance(example, list):
        for v in example:
            yield from indices(v)


def anomaly_index(results: dict[str, Any] | None) -> dict[int, list[str]]:
    """{history index: [queue anomaly names whose examples name it]}."""
    out: dict[int, list[str]] = {}
    queue = (results or {}).get("queue")
    anomalies = queue.get("anomalies") if isinstance(queue, dict) else None
    for name, body in (anomalies or {}).items():
        examples = body.get("examples", []) if isinstance(body, dict) else body
        for i in indices(examples):
            names = out.setdefault(i, [])
            if name not in names:
                names.append(name)
    return out


def _pairs_for(value: Any, key: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        pairs = value.get(str(key), value.get(key))
        return pairs if isinstance(pairs, list) else []
    return None


def _describe(op: Operation, key: Any) -> str:
    c = op.complete
    if op.f == "send":
        if c is not None and c.type == "ok" and isinstance(c.value, list) and len(c.value) == 2:
            return f"value {short_json(c.value[1], 40)} at offset {c.value[0]}"
        return f"value {short_json(op.invoke.value, 40)}"
    if op.f == "poll" and c is not None and c.type == "ok":
        pairs = _pairs_for(c.value, key) or []
        offsets = [p[0] for p in pairs if isinstance(p, list) and p]
        if not offsets:
            return "no records"
        return f"{len(pairs)} record(s), offsets {offsets[0]}–{offsets[-1]}"
    return short_json(op.value, 60)


def _queue_keys(op: Operation) -> list[Any]:
    if op.key is not None:
        return [op.key]
    c = op.complete
    if op.f == "poll" and c is not None and isinstance(c.value, dict):
        return list(c.value)
    return []


def _queue_page(run: Run, key: Any, ops: list[Operation], hits: dict[int, list[str]]) -> tuple[str, int]:
    rows, jumps, hit_count, shown = [], [], 0, 0
    names: dict[str, int] = {}
    for n, op in enumerate(ops):
        idx = [op.invoke.index] + ([op.complete.index] if op.complete is not None else [])
        anomalies = sorted({a for i in idx for a in hits.get(i, [])})
        if n >= MAX_ROWS and not anomalies:
            continue
        shown += 1
        for a in anomalies:
            names[a] = names.get(a, 0) + 1
        if anomalies:
            hit_count += 1
            jumps.append(f"<a href='#i{op.invoke.index}'>{op.invoke.index}</a> ({esc(', '.join(anomalies))})")
        c = op.complete
        t0, t1 = op.invoke.time, c.time if c is not None else None
        latency = f"{(t1 - t0) / 1e6:.1f}" if t0 is not None and t1 is not None else ""
        full = short_json(c.value if c is not None else op.invoke.value, 600)
        anchors = "".join(f'<a id="i{i}"></a>' for i in idx)
        rows.append(
            f'<tr class="{"hit" if anomalies else ""}"><td class="num">{anchors}{op.invoke.index}</td>'
            f'<td class="num">{(t0 or 0) / 1e9:.3f}</td><td class="num">{latency}</td>'
            f"<td>{esc(op.process)}</td><td>{esc(op.f)}</td><td class='{op.type}'>{op.type}</td>"
            f'<td title="{esc(full)}">{esc(_describe(op, key))}</td>'
            f'<td class="anom">{esc(", ".join(anomalies))}</td></tr>'
        )
    title = f"{run.test.get('name', run.dir.parent.name)} — partition {key}"
    summary = ", ".join(f"{a} ({n} op{'s' if n > 1 else ''})" for a, n in sorted(names.items())) or "none"
    body = [
        f"<p><a href='../report.html'>← report</a></p><h1>{esc(title)}</h1>",
        f"<p>{len(ops)} operations on this partition. Ops named by the queue checker's anomaly examples "
        f"(highlighted): {esc(summary)}.</p>",
    ]
    if jumps:
        body.append(f"<p>Highlighted ops (by invocation index): {', '.join(jumps)}</p>")
    if shown < len(ops):
        body.append(f"<p class='muted'>Showing the first {MAX_ROWS} operations and every highlighted one.</p>")
    body.append(
        "<table><tr><th>index</th><th>invoked (s)</th><th>latency (ms)</th><th>process</th><th>f</th>"
        f"<th>outcome</th><th>what</th><th>anomaly</th></tr>{''.join(rows)}</table>"
    )
    return page(title, "".join(body)), hit_count


def queue_pages(run: Run, out: Path) -> tuple[list[Page], int]:
    """One table page per queue partition: (pages written, partitions left out by MAX_KEYS)."""
    assert run.history is not None
    groups: dict[Any, list[Operation]] = {}
    for op in run.history.operations():
        for key in _queue_keys(op):
            groups.setdefault(key, []).append(op)
    hits = anomaly_index(run.results)
    order = _key_order(groups, object())
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    pages = []
    for key in order[:MAX_KEYS]:
        text, hit_count = _queue_page(run, key, groups[key], hits)
        name = _file_name(key, taken)
        (out / name).write_text(text, encoding="utf-8")
        note = f"{hit_count} op(s) in anomaly examples" if hit_count else "no anomalous ops"
        pages.append(Page(key, f"{DIR}/{name}", len(groups[key]), note, hit_count))
    return pages, max(0, len(order) - MAX_KEYS)


def write_pages(run: Run) -> tuple[list[Page], int]:
    """Write the per-key pages of the run's workload under RUN_DIR/timelines/."""
    if run.history is None:
        return [], 0
    out = run.dir / DIR
    if run.part == "queue":
        return queue_pages(run, out)
    return register_timelines(run, out)
