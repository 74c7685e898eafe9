"""Fault intervals from a history's nemesis operations, for shading plots and listing faults.

Each fault kind has start and stop operations (the f names of the simulator and of the real
nemeses): partition (start-partition / stop-partition), kill (kill / start), pause
(pause / resume), clock (bump-clock or strobe-clock / reset-clock), packet
(start-packet / stop-packet) and disk (start-disk / stop-disk). A stop heals its whole kind,
so it closes every interval of that kind still open; a stop with nothing open is counted as
stray; an interval still open at the end of the history runs to the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from checkers.history import Op

KINDS = ("partition", "kill", "pause", "clock", "packet", "disk")
STARTS = {
    "start-partition": "partition",
    "kill": "kill",
    "pause": "pause",
    "bump-clock": "clock",
    "strobe-clock": "clock",
    "start-packet": "packet",
    "start-disk": "disk",
}
STOPS = {
    "stop-partition": "partition",
    "start": "kill",
    "resume": "pause",
    "reset-clock": "clock",
    "stop-packet": "packet",
    "stop-disk": "disk",
}
COLOURS = {
    "partition": "#7f7f7f",
    "kill": "#9467bd",
    "pause": "#17becf",
    "clock": "#bcbd22",
    "packet": "#8c564b",
    "disk": "#e377c2",
}


@dataclass(frozen=True, slots=True)
class Interval:
    """One fault, from its start op to the stop that healed it (or to the end: `open`)."""

    kind: str
    start: float  # seconds since the test started
    stop: float
    start_f: str
    stop_f: str | None
    value: Any
    index: int  # history index of the start op
    open: bool = False

    @property
    def empty(self) -> bool:
        """True when the fault hit nothing (e.g. `kill []`: no node to kill)."""
        return self.value in ([], {}, "")

    def targets(self, width: int = 80) -> str:
        """The fault's targets in a few words."""
        return describe_value(self.value, width)


def describe_value(value: Any, width: int = 80) -> str:
    """Nodes of a kill/pause, `a ✕ b c` per node of a partition grudge, compact JSON otherwise."""
    if value is None:
        text = ""
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        text = " ".join(value) if value else "no nodes"
    elif isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        text = "; ".join(f"{k} ✕ {' '.join(map(str, v))}" for k, v in value.items())
    elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        text = "; ".join(
            f"{k} {v['delta-ms']:+} ms" if "delta-ms" in v else f"{k} {json.dumps(v)}" for k, v in value.items()
        )
    else:
        text = json.dumps(value, default=str, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


def _events(ops: Iterable[Op]) -> list[Op]:
    """The nemesis ops that record what happened: completions (info/ok), or the invokes when
    the history has no nemesis completions at all. Failed fault ops did not happen."""
    nemesis = [op for op in ops if not op.is_client and op.time is not None]
    done = [op for op in nemesis if op.type in ("info", "ok")]
    return done if done else [op for op in nemesis if op.type == "invoke"]


def fault_intervals(ops: Iterable[Op], end: float | None = None) -> tuple[list[Interval], int]:
    """Pair nemesis starts with stops per kind: (intervals sorted by start, number of stray stops).

    `end` (seconds) closes intervals still open; by default the time of the last op given.
    """
    ops = list(ops)
    if end is None:
        end = max((op.time for op in ops if op.time is not None), default=0) / 1e9
    open_by_kind: dict[str, list[Op]] = {k: [] for k in KINDS}
    out: list[Interval] = []
    stray = 0
    for op in _events(ops):
        t = op.time / 1e9  # type: ignore[operator]
        if op.f in STARTS:
            open_by_kind[STARTS[op.f]].append(op)
        elif op.f in STOPS:
            kind = STOPS[op.f]
            if not open_by_kind[kind]:
                stray += 1
            for s in open_by_kind[kind]:
                out.append(Interval(kind, s.time / 1e9, t, s.f, op.f, s.value, s.index))  # type: ignore[operator]
            open_by_kind[kind] = []
    for kind, starts in open_by_kind.items():
        for s in starts:
            start = s.time / 1e9  # type: ignore[operator]
            out.append(Interval(kind, start, max(end, start), s.f, None, s.value, s.index, open=True))
    out.sort(key=lambda i: (i.start, KINDS.index(i.kind), i.index))
    return out, stray
