"""Latency and throughput plots of a run (PNG, matplotlib's Agg backend), with fault bands.

As Jepsen's perf checker: ok blue, info orange, fail pink; one marker per `f`; every fault
interval shaded over the plot and drawn as a bar in its own lane under it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from checkers.history import Operation
from harness.store.report.faults import COLOURS, KINDS, Interval

OUTCOME_COLOURS = {"ok": "#81BFFC", "info": "#FFA400", "fail": "#FF1E90"}
OUTCOMES = ("ok", "fail", "info")  # drawing order: the rarer outcomes on top
MARKERS = ("o", "^", "s", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", ":", "-.")
FLOOR_MS = 1e-3  # latencies below 1 µs (instant simulated ops) cannot sit on a log scale: left out
WIDTH, HEIGHT, DPI = 11.0, 5.5, 100  # inches; 1100 × 550 px


def _figure(intervals: Sequence[Interval]) -> tuple[Any, Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    kinds = [k for k in KINDS if any(i.kind == k and not i.empty for i in intervals)]
    fig = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    # A fixed title position spares matplotlib measuring every tick label at each draw.
    with matplotlib.rc_context({"axes.titley": 1.0}):
        if kinds:
            grid = fig.add_gridspec(2, 1, height_ratios=[8, 0.5 + 0.45 * len(kinds)], hspace=0.05)
            ax = fig.add_subplot(grid[0])
            lanes = fig.add_subplot(grid[1], sharex=ax)
        else:
            ax, lanes = fig.add_subplot(), None
    return fig, ax, lanes


def _shade(ax: Any, lanes: Any, intervals: Sequence[Interval]) -> list[Any]:
    """Shade fault intervals on `ax`, draw them as bars on `lanes`; legend handles per kind."""
    from matplotlib.patches import Patch

    shown = [i for i in intervals if not i.empty]
    kinds = [k for k in KINDS if any(i.kind == k for i in shown)]
    for i in shown:
        ax.axvspan(i.start, i.stop, color=COLOURS[i.kind], alpha=0.13, lw=0, zorder=0)
    if lanes is not None:
        for row, kind in enumerate(kinds):
            spans = [(i.start, i.stop - i.start) for i in shown if i.kind == kind]
            lanes.broken_barh(spans, (row - 0.4, 0.8), color=COLOURS[kind], alpha=0.85)
        lanes.set_yticks(range(len(kinds)), kinds, fontsize=8)
        lanes.set_ylim(len(kinds) - 0.5, -0.5)
        lanes.set_xlabel("time since the test started (s)")
        lanes.grid(axis="x", alpha=0.3)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel("time since the test started (s)")
    return [Patch(facecolor=COLOURS[k], alpha=0.5, label=f"{k} fault") for k in kinds]


def _markers(fs: Sequence[str]) -> dict[str, str]:
    return {f: MARKERS[n % len(MARKERS)] for n, f in enumerate(sorted(fs))}


def _save(fig: Any, handles: list[Any], path: str | os.PathLike[str], end: float) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    ax = fig.axes[0]
    ax.set_xlim(0, max(end, 1e-3) * 1.01)
    ax.grid(alpha=0.3)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.07, right=0.82, top=0.93, bottom=0.1)
    FigureCanvasAgg(fig).print_png(os.fspath(path))


def latency_plot(
    operations: Sequence[Operation], intervals: Sequence[Interval], path: str | os.PathLike[str], end: float
) -> int:
    """Write the latency scatter (x invocation time s, y latency ms, log); return the points drawn.

    Operations that never completed have no latency; instant ones (under FLOOR_MS) are counted in
    the title instead of drawn.
    """
    from matplotlib.lines import Line2D

    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    instant = 0
    for op in operations:
        c = op.complete
        t0 = op.invoke.time
        if c is None or t0 is None or c.time is None:
            continue
        latency = (c.time - t0) / 1e6
        if latency < FLOOR_MS:
            instant += 1
            continue
        xs, ys = groups.setdefault((op.f, c.type), ([], []))
        xs.append(t0 / 1e9)
        ys.append(latency)
    fig, ax, lanes = _figure(intervals)
    markers = _markers({op.f for op in operations})  # the same marker per f as in the rate plot
    for outcome in OUTCOMES:
        for (f, typ), (xs, ys) in sorted(groups.items()):
            if typ == outcome:
                ax.plot(xs, ys, ls="none", marker=markers[f], ms=3.5, mew=0, alpha=0.75, color=OUTCOME_COLOURS[typ])
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    points = sum(len(xs) for xs, _ in groups.values())
    title = f"Latency of {points} completed operations"
    if instant:
        title += f" ({instant} instant ones, under 1 µs, left out)"
    ax.set_title(title, fontsize=11)
    drawn = {f for f, _ in groups}
    handles = _outcome_handles(Line2D, {t for _, t in groups})
    handles += _f_handles(Line2D, {f: m for f, m in markers.items() if f in drawn})
    handles += _shade(ax, lanes, intervals)
    _save(fig, handles, path, end)
    return points


def _outcome_handles(line: Any, outcomes: set[str]) -> list[Any]:
    return [line([], [], ls="none", marker="o", color=OUTCOME_COLOURS[t], label=t) for t in OUTCOMES if t in outcomes]


def _f_handles(line: Any, markers: dict[str, str]) -> list[Any]:
    return [line([], [], ls="none", marker=m, color="#555555", label=f) for f, m in markers.items()]


def bucket_seconds(duration: float, most: int = 80) -> float:
    """A round bucket width giving at most `most` buckets over `duration` seconds."""
    for width in (0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600):
        if duration / width <= most:
            return float(width)
    return 600.0 * (duration // (600 * most) + 1)


def rate_plot(
    operations: Sequence[Operation], intervals: Sequence[Interval], path: str | os.PathLike[str], end: float
) -> float:
    """Write the throughput plot (completions per second per f and outcome); return the bucket width."""
    import numpy as np
    from matplotlib.lines import Line2D

    times: dict[tuple[str, str], list[float]] = {}
    for op in operations:
        c = op.complete
        if c is not None and c.time is not None:
            times.setdefault((op.f, c.type), []).append(c.time / 1e9)
    width = bucket_seconds(end)
    edges = np.arange(0.0, end + width, width)
    if len(edges) < 2:
        edges = np.array([0.0, width])
    fig, ax, lanes = _figure(intervals)
    fs = sorted({f for f, _ in times})
    markers = _markers({op.f for op in operations})
    styles = {f: LINESTYLES[n % len(LINESTYLES)] for n, f in enumerate(fs)}
    centres = (edges[:-1] + edges[1:]) / 2
    for outcome in OUTCOMES:
        for (f, typ), ts in sorted(times.items()):
            if typ == outcome:
                counts, _ = np.histogram(ts, bins=edges)
                ax.plot(
                    centres,
                    counts / width,
                    ls=styles[f],
                    marker=markers[f],
                    ms=3,
                    lw=1.3,
                    color=OUTCOME_COLOURS[typ],
                    markevery=max(1, len(centres) // 25),
                )
    ax.set_ylabel("operations per second")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Throughput ({width:g} s buckets, by completion time)", fontsize=11)
    handles = _outcome_handles(Line2D, {t for _, t in times})
    handles += [Line2D([], [], ls=styles[f], marker=markers[f], color="#555555", label=f) for f in fs]
    handles += _shade(ax, lanes, intervals)
    _save(fig, handles, path, end)
    return width
