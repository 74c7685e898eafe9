"""Small HTML helpers shared by the report pages: escaping, links, verdict words, the stylesheet."""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1180px;padding:18px 24px;
color:#1d1d1f;background:#fff}
h1{font-size:22px;margin:4px 0 10px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:15px;margin:18px 0 6px}
a{color:#1a4fa0}small,.muted{color:#666}
table{border-collapse:collapse;margin:6px 0}
th,td{border:1px solid #d6d6d6;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.verdict{font-size:30px;font-weight:700;padding:14px 20px;border-radius:8px;margin:10px 0 6px}
.verdict small{font-size:15px;font-weight:400;color:inherit;margin-left:12px}
.v-true{background:#d9f2d0;color:#1b5e20}.v-false{background:#fbd3d3;color:#8b0000}
.v-unknown{background:#fdecb5;color:#6b4a00}
.badge{display:inline-block;border-radius:4px;padding:0 6px;font-weight:600;font-size:12px}
.chip{display:inline-block;background:#8b0000;color:#fff;border-radius:12px;padding:2px 10px;margin:2px 4px 2px 0;
font-weight:600}
.chip.allowed{background:#888}
.part{border:1px solid #ddd;border-radius:6px;padding:4px 14px 10px;margin:10px 0}
.part h3 .badge{margin-left:8px}
figure{margin:10px 0}figcaption{color:#555}
img.plot{max-width:100%;border:1px solid #e2e2e2;margin:6px 0}
tr.hit td{background:#ffe3e3}tr.hit td.anom{color:#8b0000;font-weight:600}
.ok{color:#1f5fa8}.info{color:#b36b00}.fail{color:#c2185b}
ul.files{columns:3;padding-left:18px}
"""


def esc(value: Any) -> str:
    """HTML-escape any value ('' for None)."""
    return html.escape("" if value is None else str(value))


def short_json(value: Any, width: int = 200) -> str:
    """Compact JSON, cut at `width` characters."""
    text = json.dumps(value, default=str, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def href(rel: str) -> str:
    """A relative link to a file of the run directory (each path segment URL-quoted, then escaped)."""
    return html.escape(quote(rel, safe="/"), quote=True)


def verdict_word(valid: Any) -> str:
    return {True: "valid", False: "invalid"}.get(valid, "unknown") if isinstance(valid, bool) else "unknown"


def verdict_class(valid: Any) -> str:
    return f"v-{str(valid).lower()}" if isinstance(valid, bool) else "v-unknown"


def badge(valid: Any) -> str:
    """A small coloured verdict label."""
    return f'<span class="badge {verdict_class(valid)}">{verdict_word(valid)}</span>'


def page(title: str, body: str) -> str:
    """A complete offline HTML page (inline CSS, no scripts, no external URLs)."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )
