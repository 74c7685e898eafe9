"""`report.html` of one run: the verdict, each checker's findings, the test, faults, plots, links."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from typing import Any

from harness.store.report.data import Run
from harness.store.report.faults import COLOURS
from harness.store.report.markup import badge, esc, href, page, short_json, verdict_class
from harness.store.report.timelines import Page, indices

EXAMPLES = 3  # examples shown per anomaly
PREFIX_SHOWN = 12  # last ops of the longest linearizable prefix shown
MAX_FILES = 400
_SKIP = {"report.html", "latency.png", "rate.png"}
_FIRST = ("test.json", "results.json", "history.jsonl", "events.jsonl", "schedule.json", "timeline.html")


def _banner(run: Run) -> str:
    results = run.results
    if results is None:
        return '<div class="verdict v-unknown">NOT CHECKED <small>results.json is missing</small></div>'
    valid = results.get("valid")
    word = {True: "VALID", False: "INVALID"}.get(valid, "UNKNOWN") if isinstance(valid, bool) else "UNKNOWN"
    types = results.get("anomaly-types") or []
    allowed = _allowed(results)
    if valid is True:
        note = "everything looks good"
    elif valid is False:
        note = f"{len(types)} anomaly type(s)"
    else:
        note = "errors occurred during analysis, but no anomalies were found"
    chips = "".join(f'<span class="chip">{esc(t)}</span>' for t in types)
    chips += "".join(f'<span class="chip allowed" title="allowed by --allow">{esc(t)}</span>' for t in allowed)
    return f'<div class="verdict {verdict_class(valid)}">{word} <small>{esc(note)}</small></div><p>{chips}</p>'


def _headline(run: Run) -> str:
    """One line under the verdict: what ran, and how to run it again."""
    t = run.test
    bits = [f"{t[k]} {label}" for k, label in (("workload", "workload"), ("backend", "backend")) if t.get(k)]
    if "seed" in t:
        bits.append(f"seed {t['seed']}")
    if t.get("bugs"):
        bits.append(f"bugs {', '.join(map(str, t['bugs']))}")
    line = esc(" · ".join(bits))
    reproduce = ((run.results or {}).get("run") or {}).get("reproduce")
    if reproduce:
        line += f"<br>reproduce: <code>{esc(reproduce)}</code>"
    return f"<p>{line}</p>" if line else ""


def _allowed(results: dict[str, Any]) -> list[str]:
    queue = results.get("queue")
    if not isinstance(queue, dict):
        return []
    bad = set(queue.get("bad-anomaly-types") or [])
    return [t for t in queue.get("anomaly-types") or [] if t not in bad]


def _rows(pairs: Iterable[tuple[str, Any]]) -> str:
    return "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in pairs)


def _test_section(run: Run) -> str:
    t = run.test
    stats = (run.results or {}).get("run") or {}
    pairs: list[tuple[str, Any]] = []
    for label, key in (
        ("workload", "workload"),
        ("backend", "backend"),
        ("nodes", "nodes"),
        ("concurrency", "concurrency"),
        ("time limit (s)", "time-limit"),
        ("mean fault interval (s)", "interval"),
        ("seed", "seed"),
        ("acks", "acks"),
        ("min.insync.replicas", "min-isr"),
        ("replication factor", "replication-factor"),
        ("partitions", "partitions"),
        ("unclean leader election", "unclean"),
        ("started", "start-time"),
    ):
        if key in t:
            pairs.append((label, esc(t[key])))
    if "nemesis" in t:
        nemesis = t["nemesis"]
        pairs.insert(1, ("nemesis", esc(", ".join(nemesis) if isinstance(nemesis, list) else nemesis) or "none"))
    if "bugs" in t:
        pairs.append(("seeded bugs", esc(", ".join(t["bugs"]) or "none")))
    if t.get("allow"):
        pairs.append(("allowed anomalies", esc(", ".join(t["allow"]))))
    for label, key in (
        ("operations", "operations"),
        ("run length (s)", "virtual-seconds"),
        ("wall-clock (s)", "wall-seconds"),
        ("node restarts", "restarts"),
    ):
        if key in stats:
            pairs.append((label, esc(stats[key])))
    if stats.get("reproduce"):
        pairs.append(("reproduce", f"<code>{esc(stats['reproduce'])}</code>"))
    elif isinstance(t.get("argv"), list):
        pairs.append(("command line", f"<code>{esc(shlex.join(map(str, t['argv'])))}</code>"))
    return f"<h2>Test</h2><table>{_rows(pairs)}</table>" if pairs else ""


def _op_text(op: Any) -> str:
    if not isinstance(op, dict):
        return short_json(op)
    key = f" {short_json(op['key'], 40)}" if op.get("key") is not None else ""
    return (
        f"p{op.get('process')} {op.get('f')}{key} {short_json(op.get('value'), 80)} → {op.get('type')} "
        f"(index {op.get('index')})"
    )


def _linearizable(part: dict[str, Any], pages: dict[Any, str]) -> str:
    out = []
    keys = part.get("keys") or {}
    if keys:
        counts = ", ".join(f"{v} {k}" for k, v in keys.items() if k != "total" and v)
        out.append(
            f"<p>Model <code>{esc(part.get('model'))}</code>; {esc(keys.get('total'))} keys ({esc(counts)}).</p>"
        )
    failure = part.get("failure")
    if isinstance(failure, dict):
        out.append(f"<p><b>Key {esc(short_json(failure.get('key')))}:</b> {esc(failure.get('summary'))}</p>")
        out.append(
            "<table>"
            + _rows(
                [
                    ("failing op", f"<code>{esc(_op_text(failure.get('op')))}</code>"),
                    ("state after the prefix", f"<code>{esc(failure.get('state'))}</code>"),
                    ("longest linearizable prefix", f"{esc(failure.get('prefix-length'))} operation(s)"),
                ]
            )
            + "</table>"
        )
        prefix = failure.get("prefix") or []
        shift = int(failure.get("prefix-length") or len(prefix)) - len(prefix)
        if prefix:
            first = max(0, len(prefix) - PREFIX_SHOWN)
            rows = "".join(
                f"<tr><td class='num'>{shift + n + 1}</td><td><code>{esc(_op_text(op))}</code></td></tr>"
                for n, op in enumerate(prefix[first:], first)
            )
            more = f" (the last {len(prefix) - first})" if first else ""
            out.append(f"<h3>The longest linearizable prefix, in order{more}</h3><table>{rows}</table>")
        pending = failure.get("pending") or []
        if pending:
            rows = "".join(
                f"<tr><td><code>{esc(_op_text(c.get('op')))}</code></td><td>{esc(c.get('why'))}</td></tr>"
                for c in pending
                if isinstance(c, dict)
            )
            out.append(
                f"<h3>Candidates that could not come next</h3><table><tr><th>op</th><th>why not</th></tr>{rows}</table>"
            )
        from checkers.history import freeze

        link = pages.get(freeze(failure.get("key")))
        if link:
            out.append(f"<p><a href='{href(link)}'>Timeline of key {esc(short_json(failure.get('key')))}</a></p>")
    if part.get("cause"):
        out.append(f"<p>Cause: {esc(short_json(part['cause']))}</p>")
    return "".join(out)


def _anomaly_table(part: dict[str, Any], pages: dict[Any, str]) -> str:
    """Each anomaly of a part (queue, epochs, partition-logs or invariants shapes) with its first examples."""
    anomalies = part.get("anomalies")
    counts = part.get("anomaly-counts") or part.get("counts") or {}
    bad = part.get("bad-anomaly-types")
    rows: list[tuple[str, Any, list[Any]]] = []
    if isinstance(anomalies, dict):
        for name, body in anomalies.items():
            if isinstance(body, dict):
                rows.append((name, body.get("count"), list(body.get("examples") or [])))
            else:
                examples = list(body) if isinstance(body, list) else []
                rows.append((name, counts.get(name, len(examples)), examples))
    violations = part.get("violations")
    if isinstance(violations, list):
        for name in counts:
            examples = [v for v in violations if isinstance(v, dict) and v.get("invariant") == name]
            rows.append((name, counts[name], examples))
    seen = {r[0] for r in rows}
    rows += [(n, counts.get(n, "?"), []) for n in part.get("anomaly-types") or [] if n not in seen]
    if not rows:
        return ""
    html_rows = []
    for name, count, examples in rows:
        allowed = bad is not None and name not in bad
        shown = []
        for ex in examples[:EXAMPLES]:
            link = ""
            if isinstance(ex, dict) and "key" in ex:
                from checkers.history import freeze

                target = pages.get(freeze(ex["key"]))
                first = next(iter(indices(ex)), None)
                if target and first is not None:
                    link = f" <a href='{href(target)}#i{first}'>in its partition</a>"
            shown.append(f"<pre>{esc(short_json(ex, 400))}</pre>{link}")
        n = len(examples)
        if isinstance(count, int) and count > min(n, EXAMPLES):
            shown.append(f"<span class='muted'>… {count - min(n, EXAMPLES)} more (results.json has {n})</span>")
        note = " <span class='muted'>(allowed)</span>" if allowed else ""
        html_rows.append(
            f"<tr><td><b>{esc(name)}</b>{note}</td><td class='num'>{esc(count)}</td><td>{''.join(shown)}</td></tr>"
        )
    return f"<table><tr><th>anomaly</th><th>count</th><th>first examples</th></tr>{''.join(html_rows)}</table>"


def _facts(part: dict[str, Any], name: str) -> str:
    stats = part.get("stats") if isinstance(part.get("stats"), dict) else {}
    pairs: list[tuple[str, Any]] = []
    if name == "queue":
        for label, key in (
            ("sends", "sends"),
            ("polls", "polls"),
            ("values sent", "values-sent"),
            ("values read", "values-read"),
        ):
            if key in stats:
                pairs.append((label, esc(short_json(stats[key]))))
        for label, key in (
            ("recovered (info sends read)", "recovered"),
            ("unsent reads", "unsent-reads"),
            ("assignments started before the commit (re-delivery)", "start-before-commit"),
        ):
            if isinstance(part.get(key), dict):
                pairs.append((label, esc(part[key].get("count"))))
        if "assignment-starts" in stats:
            pairs.append(("assignment starts", esc(stats["assignment-starts"])))
    elif name == "epochs":
        for label, key in (
            ("events", "events"),
            ("epochs", "epochs"),
            ("max epoch", "max-epoch"),
            ("votes", "votes"),
            ("max high watermark", "max-hw"),
            ("offsets compared", "offsets-compared"),
        ):
            if key in stats:
                pairs.append((label, esc(stats[key])))
    elif name == "invariants" and part.get("checked"):
        pairs.append(("checked", esc(", ".join(part["checked"]))))
    elif name == "partition-logs" and "partitions" in part:
        pairs.append(("partitions compared", esc(part["partitions"])))
    for key in ("error", "node-fatal") if name == "linearizable" else ("error", "cause", "node-fatal"):
        if part.get(key) is not None:
            pairs.append((key, esc(short_json(part[key], 300))))
    return f"<table>{_rows(pairs)}</table>" if pairs else ""


def _checkers_section(run: Run, pages: dict[Any, str]) -> str:
    results = run.results or {}
    parts = [(n, p) for n, p in results.items() if isinstance(p, dict) and "valid" in p and n not in ("stats", "run")]
    if not parts:
        return ""
    out = ["<h2>Checkers</h2>"]
    for name, part in parts:
        if name == "linearizable":
            body = _linearizable(part, pages) + _facts(part, name)
        else:
            body = _anomaly_table(part, pages) + _facts(part, name)
        body = body or "<p>nothing to report</p>"
        out.append(f"<div class='part'><h3>{esc(name)}{badge(part.get('valid'))}</h3>{body}</div>")
    return "".join(out)


def _ops_section(run: Run) -> str:
    counts = run.op_counts()
    if not counts:
        return ""
    rows = "".join(
        f"<tr><td>{esc(f)}</td>"
        + "".join(f"<td class='num {t}'>{esc(c.get(t, 0))}</td>" for t in ("count", "ok", "fail", "info"))
        + "</tr>"
        for f, c in sorted(counts.items())
    )
    total = {t: sum(int(c.get(t, 0)) for c in counts.values()) for t in ("count", "ok", "fail", "info")}
    rows += "<tr><th>all</th>" + "".join(f"<th class='num'>{v}</th>" for v in total.values()) + "</tr>"
    return (
        "<h2>Operations</h2><table><tr><th>f</th><th>total</th><th>ok</th><th>fail</th><th>info</th></tr>"
        f"{rows}</table>"
    )


def _faults_section(run: Run) -> str:
    if run.history is None:
        return ""
    if not run.intervals:
        return "<h2>Faults</h2><p>No faults were injected.</p>"
    rows = "".join(
        f"<tr><td><span class='badge' style='background:{COLOURS[i.kind]};color:#fff'>{esc(i.kind)}</span></td>"
        f"<td class='num'>{i.start:.2f}</td>"
        f"<td class='num'>{i.stop:.2f}{' (open at the end)' if i.open else ''}</td>"
        f"<td class='num'>{i.stop - i.start:.2f}</td><td><code>{esc(i.start_f)}</code> / "
        f"<code>{esc(i.stop_f or '—')}</code></td><td title='{esc(short_json(i.value, 600))}'>{esc(i.targets())}</td>"
        "</tr>"
        for i in run.intervals
    )
    stray = (
        f"<p class='muted'>{run.stray_stops} heal op(s) found nothing open (e.g. the final heal).</p>"
        if run.stray_stops
        else ""
    )
    return (
        f"<h2>Faults</h2><p>{len(run.intervals)} fault interval(s); faults that hit no node are listed but not "
        "shaded in the plots.</p><table><tr><th>kind</th><th>from (s)</th><th>to (s)</th><th>for (s)</th>"
        f"<th>ops</th><th>targets</th></tr>{rows}</table>{stray}"
    )


def _plots_section(plots: dict[str, str]) -> str:
    if not plots:
        return ""
    out = ["<h2>Plots</h2>"]
    for name, caption in plots.items():
        out.append(
            f"<figure><img class='plot' src='{href(name)}' alt='{esc(caption)}'>"
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )
    return "".join(out)


def _pages_section(run: Run, pages: list[Page], omitted: int) -> str:
    if not pages:
        return ""
    queue = run.part == "queue"
    title = "Partitions" if queue else "Timelines per key"
    head = "partition" if queue else "key"
    rows = "".join(
        f"<tr class='{'hit' if p.hits or p.note.startswith('NOT') else ''}'><td><a href='{href(p.rel)}'>"
        f"{esc(short_json(p.key, 60) if not isinstance(p.key, str) else p.key)}</a></td>"
        f"<td class='num'>{p.ops}</td><td>{esc(p.note)}</td></tr>"
        for p in pages
    )
    more = f"<p class='muted'>{omitted} more key(s) without a page.</p>" if omitted else ""
    return f"<h2>{title}</h2><table><tr><th>{head}</th><th>operations</th><th>verdict</th></tr>{rows}</table>{more}"


def _files_section(run: Run) -> str:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(run.dir):
        dirnames[:] = sorted(d for d in dirnames if d != "timelines")
        for f in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, f), run.dir).replace(os.sep, "/")
            if rel not in _SKIP:
                found.append(rel)
    first = [f for f in _FIRST if f in found]
    rest = [f for f in found if f not in first]
    shown = (first + rest)[:MAX_FILES]
    items = "".join(f"<li><a href='{href(f)}'>{esc(f)}</a></li>" for f in shown)
    more = f"<p class='muted'>… and {len(found) - len(shown)} more files.</p>" if len(found) > len(shown) else ""
    return f"<h2>Files</h2><ul class='files'>{items}</ul>{more}"


def render_report(
    run: Run, plots: dict[str, str], pages: list[Page], omitted: int, notes: list[str], built_in: float | None = None
) -> str:
    """The whole report page. `plots`: {png file: caption}; `notes`: problems met while building it."""
    from checkers.history import freeze

    name = run.test.get("name") or run.dir.parent.name
    links = {freeze(p.key): p.rel for p in pages}
    problems = run.problems + notes
    body = [
        f"<h1>{esc(name)} <small>{esc(run.dir.name)}</small></h1>",
        _banner(run),
        _headline(run),
        "".join(f"<p class='v-unknown' style='padding:4px 8px'>⚠ {esc(p)}</p>" for p in problems),
        _checkers_section(run, links),
        _plots_section(plots),
        _faults_section(run),
        _ops_section(run),
        _pages_section(run, pages, omitted),
        _test_section(run),
        _files_section(run),
        f"<p class='muted'>Built by kraftwerk in {built_in:.2f} s.</p>" if built_in is not None else "",
    ]
    return page(f"kraftwerk run {name} {run.dir.name}", "".join(body))
