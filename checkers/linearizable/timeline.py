"""An HTML timeline of one key's operations, marking why a history is not linearizable.

One column per process, one box per operation from its invocation to its
completion (crashed operations run to the bottom). Colours follow Jepsen's
timeline: ok blue, info orange, fail pink. For an invalid result the longest
linearizable prefix is numbered in order, the operation that could not be
placed is outlined in red, and the candidates at that point are listed with the
reason each one fails.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from checkers.history import History, Operation

ROW = 18  # pixels per history position
COL = 150
MAX_OPS = 3000

_CSS = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px}h2{font-size:15px;margin-top:20px}
.verdict-false{color:#b00020}.verdict-true{color:#1b7f3b}.verdict-unknown{color:#a66b00}
.lane{position:absolute;top:0;border-left:1px dashed #ddd}
.lane-h{position:absolute;top:-20px;font-weight:600}
.op{position:absolute;border-radius:3px;padding:1px 4px;overflow:hidden;white-space:nowrap;
font:11px ui-monospace,monospace;box-sizing:border-box;border:1px solid rgba(0,0,0,.25)}
.ok{background:#b3d4f5}.info{background:#ffd8a8}.fail{background:#f7c6d3}
.prefix{border:2px solid #1b7f3b}.blocked{border:3px solid #d00;z-index:2}
.n{display:inline-block;background:#1b7f3b;color:#fff;border-radius:8px;padding:0 4px;margin-right:3px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
code{font:12px ui-monospace,monospace}
"""


def _label(op: Operation) -> str:
    return f"{op.f} {json.dumps(op.value, default=str)}"


def render(history: History, result: dict[str, Any], key: Any = None) -> str:
    """The timeline page for `key` (default: the failing key, or the first key)."""
    ops = history.operations()
    failure = result.get("failure") or {}
    if key is None:
        key = failure.get("key", ops[0].key if ops else None)
    mine = [op for op in ops if op.key == key][:MAX_OPS]
    prefix_pos = {p["index"]: n for n, p in enumerate(failure.get("prefix", []), 1)}
    shift = failure.get("prefix-length", 0) - len(prefix_pos)
    blocked = (failure.get("op") or {}).get("index")
    processes = sorted({op.process for op in mine}, key=lambda p: (isinstance(p, str), p))
    lane = {p: i for i, p in enumerate(processes)}
    positions = sorted({op.call for op in mine} | {op.ret for op in mine if op.ret is not None})
    row = {pos: i for i, pos in enumerate(positions)}
    bottom = len(positions) + 1
    boxes = []
    for op in mine:
        top = row[op.call] * ROW
        end = row[op.ret] if op.ret is not None else bottom
        height = max(ROW - 2, (end - row[op.call]) * ROW + ROW - 4)
        classes = ["op", op.type]
        badge = ""
        idx = op.invoke.index
        if idx in prefix_pos:
            classes.append("prefix")
            badge = f'<span class="n">{prefix_pos[idx] + shift}</span>'
        if idx == blocked:
            classes.append("blocked")
        title = f"index {idx}, process {op.process}, {op.type}: {_label(op)}"
        if op.complete is not None:
            title += f" (completed at index {op.complete.index})"
        boxes.append(
            f'<div class="{" ".join(classes)}" style="left:{lane[op.process] * COL + 4}px;top:{top}px;'
            f'width:{COL - 10}px;height:{height}px" title="{html.escape(title)}">{badge}{html.escape(_label(op))}</div>'
        )
    lanes = "".join(
        f'<div class="lane" style="left:{i * COL}px;height:{bottom * ROW}px"></div>'
        f'<div class="lane-h" style="left:{i * COL + 4}px">process {html.escape(str(p))}</div>'
        for i, p in enumerate(processes)
    )
    valid = result.get("valid")
    verdict = {True: "linearizable", False: "NOT linearizable"}.get(valid, "unknown")  # type: ignore[call-overload]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>kraftwerk timeline — {html.escape(history.source)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(history.source)} — key {html.escape(json.dumps(key, default=str))}</h1>",
        f'<p class="verdict-{str(valid).lower()}"><b>{verdict}</b> (model {html.escape(str(result.get("model")))})</p>',
    ]
    if failure:
        parts.append(f"<p>{html.escape(str(failure.get('summary', '')))}</p>")
        parts.append(
            "<p>Model state after the longest linearizable prefix: "
            f"<code>{html.escape(str(failure.get('state')))}</code></p>"
        )
        pending = failure.get("pending") or []
        if pending:
            parts.append(
                "<h2>Candidates at that point</h2><table>"
                "<tr><th>index</th><th>process</th><th>op</th><th>why not</th></tr>"
            )
            for c in pending:
                o = c["op"]
                parts.append(
                    f"<tr><td>{o['index']}</td><td>{html.escape(str(o['process']))}</td>"
                    f"<td><code>{html.escape(o['f'] + ' ' + json.dumps(o['value'], default=str))}</code>"
                    f" ({o['type']})</td>"
                    f"<td>{html.escape(c['why'])}</td></tr>"
                )
            parts.append("</table>")
    if len(mine) == MAX_OPS:
        parts.append(f"<p>Showing the first {MAX_OPS} operations of this key.</p>")
    parts.append(
        "<h2>Timeline</h2><p>Boxes run from invocation to completion; numbered boxes are the longest "
        "linearizable prefix in order; the red box could not be placed.</p>"
    )
    parts.append(
        f'<div style="position:relative;margin-top:28px;height:{(bottom + 1) * ROW}px;'
        f'width:{len(processes) * COL}px">{lanes}{"".join(boxes)}</div>'
    )
    parts.append("</body></html>\n")
    return "".join(parts)


def write_timeline(history: History, result: dict[str, Any], path: str, key: Any = None) -> str:
    """Write the timeline page and return its path."""
    Path(path).write_text(render(history, result, key), encoding="utf-8")
    return path
