"""`kraftwerk analyze STORE --out DIR`: the PySpark pipeline over many runs, then the nightly report.

The pipeline (`checkers.pipeline.job`) writes Parquet tables and roll-ups into DIR; this module turns
the roll-ups into `DIR/report.html` with PNG trend plots in `DIR/plots/` (matplotlib, Agg): each seeded
bug's detection rate and its trend over nights, pass rate per configuration over nights, anomaly trends, availability and latency inside and outside fault
windows, the slowest checks, and every failing run with links to its files and its reproduce command.
Links are relative, so the report works from disk and through `kraftwerk serve` alike.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPORT = "report.html"
MARKER = "kraftwerk-nightly"  # in the report's <meta name="generator">; `kraftwerk serve` looks for it
MAX_FAILING_SHOWN = 300


# -- plots -------------------------------------------------------------------------------------------


def _short(label: str, width: int = 70) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _plots(rollups: dict[str, list[dict[str, Any]]], out: Path, ids: dict[str, str]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    made: dict[str, str] = {}

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(plots_dir / name, dpi=90)
        plt.close(fig)
        made[name.removesuffix(".png")] = f"plots/{name}"

    def rates_by_night(lines: dict[str, dict[str, float]], ylabel: str, title: str, name: str, size: int) -> None:
        """One line per label: its rate (0…1) on each night it has one."""
        dates = sorted({d for series in lines.values() for d in series})
        fig, ax = plt.subplots(figsize=(10, 4.5 if len(lines) > 6 else 4))
        for label, series in lines.items():
            xs = [d for d in dates if d in series]
            ax.plot(xs, [series[d] for d in xs], marker="o", label=label)
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=size, loc="lower left")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        save(fig, name)

    daily = rollups.get("config_daily", [])
    if daily:
        by_config: dict[str, dict[str, float]] = {}
        for r in daily:
            by_config.setdefault(r["config"], {})[r["date"]] = r["pass_rate"]
        runs = {c: sum(r["runs"] for r in daily if r["config"] == c) for c in by_config}
        busiest = sorted(by_config, key=lambda c: -runs[c])[:12]
        rates_by_night(
            {f"{ids[c]}: {_short(c, 60)}": by_config[c] for c in busiest},
            "pass rate (valid / runs)",
            "Pass rate per configuration, by night",
            "pass_rate.png",
            6,
        )

    detection = rollups.get("bug_detection", [])
    if detection:
        by_bug: dict[str, dict[str, float]] = {}
        for r in detection:
            by_bug.setdefault(r["bug"], {})[r["date"]] = r["rate"]
        rates_by_night(
            dict(sorted(by_bug.items())),
            "detection rate (invalid / runs)",
            "Seeded bugs: detection rate by night",
            "bug_detection.png",
            7,
        )

    anomalies = rollups.get("anomaly_daily", [])
    if anomalies:
        dates = sorted({r["date"] for r in anomalies})
        kinds = sorted({r["anomaly"] for r in anomalies})
        fig, ax = plt.subplots(figsize=(10, 4))
        bottom = [0] * len(dates)
        for kind in kinds:
            counts = {r["date"]: r["runs"] for r in anomalies if r["anomaly"] == kind}
            heights = [counts.get(d, 0) for d in dates]
            ax.bar(dates, heights, bottom=bottom, label=kind)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_ylabel("runs with the anomaly")
        ax.set_title("Anomaly trends")
        ax.legend(fontsize=7)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        save(fig, "anomalies.png")

    slow = rollups.get("slowest_checks", [])[:15]
    if slow:
        fig, ax = plt.subplots(figsize=(10, 0.35 * len(slow) + 1.2))
        labels = [f"{_short(r['run_id'], 45)} key {r['key']}" for r in slow][::-1]
        ax.barh(labels, [r["seconds"] for r in slow][::-1], color="#c06000")
        ax.set_xlabel("seconds")
        ax.set_title("Slowest checks (run, key)")
        ax.tick_params(axis="y", labelsize=7)
        save(fig, "slowest_checks.png")

    avail = rollups.get("availability", [])
    if avail:
        configs = sorted({r["config"] for r in avail}, key=lambda c: ids[c])[:20]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.4
        for offset, inside, color, name in (
            (-width / 2, False, "#4a7fd0", "no fault"),
            (width / 2, True, "#d05050", "in fault window"),
        ):
            rows = {r["config"]: r for r in avail if r["in_fault"] is inside}
            xs = [i + offset for i in range(len(configs))]
            ax1.bar(xs, [(rows.get(c) or {}).get("ok_fraction") or 0 for c in configs], width, color=color, label=name)
            ax2.bar(xs, [(rows.get(c) or {}).get("p99_ms") or 0 for c in configs], width, color=color, label=name)
        for ax, title in ((ax1, "availability (ok / ops)"), (ax2, "p99 latency of ok ops (ms)")):
            ax.set_xticks(range(len(configs)), [ids[c] for c in configs], fontsize=7)
            ax.set_title(title)
            ax.legend(fontsize=7)
        save(fig, "availability.png")
    return made


# -- HTML ----------------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
.valid, .true { background: #d8f5d0; } .invalid, .false { background: #f9d0d0; }
.unknown { background: #fcefc0; } .error { background: #f0d0f0; }
code { font-size: 12px; } img { max-width: 100%; border: 1px solid #ddd; margin: .3em 0 1em; }
.totals span { margin-right: 1.2em; font-weight: bold; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _link(out: Path, target: str | None, text: str) -> str:
    if not target:
        return ""
    rel = os.path.relpath(target, out)
    return f'<a href="{html.escape(urllib.parse.quote(rel))}">{_e(text)}</a>'


def _valid_cell(valid: Any, note: str = "") -> str:
    word = {"true": "valid", "false": "invalid"}.get(str(valid), str(valid))
    return f'<td class="{_e(valid)}">{_e(word)}{_e(note)}</td>'


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str = "none") -> str:
    if not rows:
        return f"<p><em>{_e(empty)}</em></p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bug_rows(rollups: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    """Per seeded bug: its runs and catches over every night, its last two nights' rates and the trend."""
    by_bug: dict[str, list[dict[str, Any]]] = {}
    for r in rollups.get("bug_detection", []):
        by_bug.setdefault(r["bug"], []).append(r)
    rows = []
    for bug, nights in sorted(by_bug.items()):
        nights.sort(key=lambda r: r["date"])
        runs, caught = sum(r["runs"] for r in nights), sum(r["caught"] for r in nights)
        last = nights[-1]
        before = nights[-2] if len(nights) > 1 else None
        trend = "" if before is None else "↑" if last["rate"] > before["rate"] else "↓" if last["rate"] < before["rate"] else "="
        rows.append(
            [
                f"<code>{_e(bug)}</code>",
                _e(runs),
                _e(caught),
                _e(f"{caught / runs:.0%}"),
                _e(f"{last['rate']:.0%} ({last['caught']}/{last['runs']}, {last['date']})"),
                _e(f"{before['rate']:.0%} ({before['caught']}/{before['runs']}, {before['date']})") if before else "",
                f"<b>{trend}</b>" if trend == "↓" else _e(trend),
            ]
        )
    return rows


def write_report(
    rollups: dict[str, list[dict[str, Any]]],
    out: str | os.PathLike[str],
    *,
    store: str = "",
    batch: str = "",
    new_runs: int = 0,
) -> str:
    """Write OUT/report.html (and OUT/plots/*.png) from the roll-ups; return the report's path."""
    out_path = Path(out).resolve()
    out_path.mkdir(parents=True, exist_ok=True)
    configs = sorted(
        {r["config"] for r in rollups.get("flaky", [])} | {r["config"] for r in rollups.get("availability", [])}
    )
    ids = {c: f"C{i + 1}" for i, c in enumerate(configs)}
    plots = _plots(rollups, out_path, ids)
    totals = (rollups.get("totals") or [{}])[0]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<meta name='generator' content='{MARKER}'>",
        "<title>kraftwerk nightly report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>kraftwerk nightly report</h1>",
        f"<p>Generated {_e(dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S'))} from <code>{_e(store)}</code>; "
        f"batch <code>{_e(batch)}</code> analysed {new_runs} new run(s).</p>",
        "<p class='totals'>"
        + "".join(
            f"<span class='{cls}'>{_e(label)}: {_e(totals.get(key, 0))}</span>"
            for key, label, cls in (
                ("runs", "runs", ""),
                ("valid", "valid", "valid"),
                ("invalid", "invalid", "invalid"),
                ("unknown", "unknown", "unknown"),
                ("errors", "malformed", "error"),
            )
        )
        + "</p>",
    ]
    parts.append("<h2>Configurations</h2>")
    flaky = {r["config"]: r for r in rollups.get("flaky", [])}
    first = {r["config"]: r for r in rollups.get("first_anomaly", [])}
    rows = []
    for config in configs:
        f = flaky.get(config, {})
        a = first.get(config, {})
        rows.append(
            [
                _e(ids[config]),
                f"<code>{_e(config)}</code>",
                _e(f.get("runs", 0)),
                _e(f.get("valid", 0)),
                _e(f.get("invalid", 0)),
                _e(f.get("unknown", 0)),
                "<b>flaky</b>" if f.get("flaky") else "",
                _e(f"{a['median_s']:.2f}") if a.get("median_s") is not None else "",
            ]
        )
    parts.append(
        _table(
            [
                "id",
                "configuration",
                "runs",
                "valid",
                "invalid",
                "unknown",
                "mixed verdicts",
                "first anomaly (median s)",
            ],
            rows,
        )
    )
    parts.append("<h2>Seeded bugs: detection rate</h2>")
    parts.append(_table(["bug", "runs", "caught", "rate", "last night", "night before", "trend"], _bug_rows(rollups)))
    for key, title in (
        ("bug_detection", "Seeded bugs: detection rate by night"),
        ("pass_rate", "Pass rate per configuration over nights"),
        ("anomalies", "Anomaly trends"),
        ("availability", "Availability and latency, inside vs outside fault windows"),
        ("slowest_checks", "Slowest checks"),
    ):
        if key in plots:
            parts.append(f"<h2>{_e(title)}</h2><img alt='{_e(title)}' src='{_e(plots[key])}'>")
    avail_rows = [
        [
            _e(ids.get(r["config"], "")),
            "fault window" if r["in_fault"] else "no fault",
            _e(r["ops"]),
            _e(f"{(r['ok_fraction'] or 0):.3f}"),
            *[_e(f"{r[k]:.1f}") if r.get(k) is not None else "" for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")],
        ]
        for r in rollups.get("availability", [])
    ]
    parts.append(_table(["config", "window", "ops", "ok fraction", "p50 ms", "p95 ms", "p99 ms", "max ms"], avail_rows))
    slow_rows = [
        [
            _link(out_path, r.get("run_dir"), r["run_id"]) or _e(r["run_id"]),
            _e(r["key"]),
            _e(r["ops"]),
            _e(f"{r['seconds']:.3f}"),
            _valid_cell(r["valid"]),
        ]
        for r in rollups.get("slowest_checks", [])[:15]
    ]
    parts.append(_table(["run", "key", "ops", "seconds", "verdict"], slow_rows))

    failing = rollups.get("failing_runs", [])
    parts.append(f"<h2>Failing runs ({len(failing)})</h2>")
    rows = []
    for r in failing[:MAX_FAILING_SHOWN]:
        run_dir = r.get("run_dir")
        links = " ".join(
            x
            for x in (
                _link(out_path, run_dir, "run"),
                _link(out_path, str(Path(run_dir) / "results.json") if run_dir else None, "results"),
                _link(
                    out_path,
                    str(Path(run_dir) / "timeline.html") if run_dir and r.get("has_timeline") else None,
                    "timeline",
                ),
                _link(out_path, str(Path(run_dir) / "history.jsonl") if run_dir else None, "history"),
            )
            if x
        )
        mismatch = "" if r.get("recorded_valid") in (None, r.get("valid")) else f" (recorded {r.get('recorded_valid')})"
        rows.append(
            [
                _e(r.get("date")),
                f"<code>{_e(r.get('config'))}</code>",
                _e(r.get("seed")),
                _valid_cell(r.get("valid"), mismatch),
                _e(", ".join(r.get("anomaly_types") or [])),
                _e(f"{r['first_anomaly_s']:.2f}") if r.get("first_anomaly_s") is not None else "",
                links,
                f"<code>{_e(r.get('reproduce'))}</code>",
            ]
        )
    parts.append(
        _table(["date", "configuration", "seed", "verdict", "anomalies", "first anomaly s", "files", "reproduce"], rows)
    )
    mism = rollups.get("mismatches", [])
    if mism:
        parts.append("<h2>Re-check disagrees with the recorded verdict</h2>")
        parts.append(
            _table(
                ["run", "recheck", "recorded", "history", "epochs", "stats, partition logs, invariants"],
                [
                    [
                        _e(r["run_id"]),
                        _e(r["valid"]),
                        _e(r["recorded_valid"]),
                        _e(r["history_valid"]),
                        _e(r["epochs_valid"]),
                        _e(r["run_valid"]),
                    ]
                    for r in mism
                ],
            )
        )
    errors = rollups.get("errors", [])
    parts.append(f"<h2>Malformed runs ({len({e['run_id'] for e in errors})})</h2>")
    parts.append(
        _table(
            ["run", "stage", "problem"],
            [
                [_link(out_path, e.get("run_dir"), e["run_id"]) or _e(e["run_id"]), _e(e["stage"]), _e(e["message"])]
                for e in errors
            ],
        )
    )
    parts.append(
        "<p>Tables: <code>tables/</code> (Parquet, by date and workload); roll-ups: <code>rollups/*.parquet</code>; "
        "<a href='manifest.json'>manifest.json</a>.</p></body></html>"
    )
    path = out_path / REPORT
    tmp = path.with_name(f".{REPORT}.tmp")
    tmp.write_text("\n".join(parts), encoding="utf-8")
    os.replace(tmp, path)
    (out_path / "rollups.json").write_text(json.dumps(rollups, indent=1, default=str), encoding="utf-8")
    return str(path)
