"""`kraftwerk serve STORE`: browse the run store over HTTP (Jepsen's `serve`, read only).

Pages: `/` lists every run (date, test, configuration, seed, verdict, anomalies) and the nightly
reports found in the store; `/run/<run-id>` shows one run (verdict per checker, reproduce command,
its files); `/files/<path>` serves any file (or lists any directory) inside the store;
`/api/runs.json` is the run list as JSON.

Only paths inside the store are reachable: `..` segments (plain or percent-encoded), absolute paths,
NUL bytes and symlinks that resolve outside the store are refused with 404. Binds 127.0.0.1 unless
told otherwise.
"""

from __future__ import annotations

import html
import json
import mimetypes
import os
import re
import shutil
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_STAMP = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})")
_TEXT = {".json", ".jsonl", ".txt", ".log", ".edn", ".csv", ".md", ".toml", ".properties"}
REPORT_MARKER = "kraftwerk-nightly"
CACHE_SECONDS = 2.0


# -- the store, read only ------------------------------------------------------------------------------


class Store:
    """The runs of a store directory, re-scanned at most every CACHE_SECONDS."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._lock = threading.Lock()
        self._runs: list[dict[str, Any]] = []
        self._reports: list[str] = []
        self._scanned = 0.0
        self._files: dict[str, tuple[float, dict[str, Any]]] = {}

    def resolve(self, rel: str) -> Path | None:
        """The path for a store-relative URL path (already percent-decoded), or None if it is not inside."""
        if "\x00" in rel or "\\" in rel or rel.startswith("/"):
            return None
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if any(p == ".." for p in parts):
            return None
        candidate = self.root.joinpath(*parts)
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        if real != self.root and self.root not in real.parents:
            return None  # a symlink out of the store
        return real

    def _json(self, path: Path) -> dict[str, Any] | None:
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        key = str(path)
        cached = self._files.get(key)
        if cached and cached[0] == mtime:
            return cached[1]
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            data = {"_malformed": True}
        self._files[key] = (mtime, data)
        return data

    def _scan(self) -> None:
        from harness.core.spec import config_label

        runs: list[dict[str, Any]] = []
        reports: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (here / d).is_symlink())
            if "report.html" in filenames and _is_nightly(here / "report.html"):
                reports.append(here.relative_to(self.root).as_posix())
            if "test.json" in filenames or "history.jsonl" in filenames:
                dirnames[:] = []
                runs.append(self._run(here, config_label))
            elif "manifest.json" in filenames and "tables" in dirnames:
                dirnames.remove("tables")  # an analyze output: thousands of Parquet files, no runs
        runs.sort(key=lambda r: (r["sort"], r["id"]), reverse=True)
        self._runs, self._reports = runs, sorted(reports)

    def _run(self, run_dir: Path, label: Any) -> dict[str, Any]:
        rid = run_dir.relative_to(self.root).as_posix()
        test = self._json(run_dir / "test.json") or {}
        results = self._json(run_dir / "results.json")
        if results is None:
            verdict = "incomplete"
        elif results.get("_malformed"):
            verdict = "malformed"
        else:
            v = results.get("valid")
            verdict = "valid" if v is True else "invalid" if v is False else "unknown"
        m = _STAMP.match(run_dir.name)
        when = f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}:{m[6]}" if m else str(test.get("start-time", ""))
        malformed_test = bool(test.get("_malformed")) or not test
        return {
            "id": rid,
            "test": test.get("name") or run_dir.parent.name,
            "config": "" if malformed_test else label(test),
            "seed": test.get("seed"),
            "date": when,
            "verdict": verdict,
            "anomalies": list((results or {}).get("anomaly-types", []) or []),
            "reproduce": ((results or {}).get("run") or {}).get("reproduce", ""),
            "sort": when,
        }

    def runs(self) -> tuple[list[dict[str, Any]], list[str]]:
        with self._lock:
            if time.monotonic() - self._scanned > CACHE_SECONDS:
                self._scan()
                self._scanned = time.monotonic()
            return self._runs, self._reports


def _is_nightly(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return REPORT_MARKER in fh.read(2048)
    except OSError:
        return False


# -- pages ---------------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.2em; color: #222; }
table { border-collapse: collapse; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eee; }
td.verdict { font-weight: bold; }
.valid { background: #bfeab3; } .invalid { background: #f4a9a9; } .unknown { background: #fae39a; }
.incomplete, .malformed { background: #ddd; }
code { font-size: 12px; } a { color: #1a4fa0; }
#filter { margin: .5em 0; padding: 4px; width: 30em; }
"""
_FILTER_JS = """
document.getElementById('filter').addEventListener('input', function (e) {
  var q = e.target.value.toLowerCase();
  document.querySelectorAll('#runs tbody tr').forEach(function (tr) {
    tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
  });
});
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _href(prefix: str, rel: str) -> str:
    return html.escape(prefix + urllib.parse.quote(rel))


def _page(title: str, body: str, script: str = "") -> bytes:
    js = f"<script>{script}</script>" if script else ""
    text = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body>{body}{js}</body></html>"
    )
    return text.encode("utf-8")


def index_page(store: Store) -> bytes:
    runs, reports = store.runs()
    counts: dict[str, int] = {}
    for r in runs:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no runs yet"
    parts = [f"<h1>kraftwerk store</h1><p><code>{_e(store.root)}</code>: {len(runs)} runs ({_e(summary)})</p>"]
    if reports:
        links = "".join(
            f"<li><a href='{_href('/files/', f'{r}/report.html')}'>{_e(r or '.')}</a></li>" for r in reports
        )
        parts.append(f"<h2>Nightly reports</h2><ul id='reports'>{links}</ul>")
    parts.append("<h2>Runs</h2><input id='filter' placeholder='filter: verdict, configuration, seed…'>")
    rows = []
    for r in runs:
        rows.append(
            "<tr>"
            f"<td>{_e(r['date'])}</td>"
            f"<td><a href='{_href('/run/', r['id'])}'>{_e(r['test'])}</a></td>"
            f"<td><code>{_e(r['config'])}</code></td>"
            f"<td>{_e(r['seed'])}</td>"
            f"<td class='verdict {_e(r['verdict'])}'>{_e(r['verdict'])}</td>"
            f"<td>{_e(', '.join(r['anomalies']))}</td>"
            "</tr>"
        )
    parts.append(
        "<table id='runs'><thead><tr><th>date</th><th>test</th><th>configuration</th><th>seed</th>"
        f"<th>verdict</th><th>anomalies</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return _page("kraftwerk store", "".join(parts), _FILTER_JS)


def run_page(store: Store, rid: str, run_dir: Path) -> bytes:
    runs, _ = store.runs()
    info = next((r for r in runs if r["id"] == rid), None) or store._run(run_dir, _label())
    results = store._json(run_dir / "results.json") or {}
    parts = [
        "<p><a href='/'>all runs</a></p>",
        f"<h1>{_e(info['test'])} <small>{_e(rid)}</small></h1>",
        f"<table><tr><th>verdict</th><td class='verdict {_e(info['verdict'])}'>{_e(info['verdict'])}</td></tr>",
        f"<tr><th>configuration</th><td><code>{_e(info['config'])}</code></td></tr>",
        f"<tr><th>seed</th><td>{_e(info['seed'])}</td></tr><tr><th>date</th><td>{_e(info['date'])}</td></tr>",
        f"<tr><th>anomalies</th><td>{_e(', '.join(info['anomalies']) or '-')}</td></tr>",
        f"<tr><th>reproduce</th><td><code>{_e(info['reproduce'])}</code></td></tr></table>",
    ]
    checkers = [
        (name, part.get("valid"))
        for name, part in results.items()
        if isinstance(part, dict) and "valid" in part and name not in ("stats",)
    ]
    if checkers:
        cells = "".join(
            f"<tr><td>{_e(n)}</td><td class='{_verdict_word(v)}'>{_verdict_word(v)}</td></tr>" for n, v in checkers
        )
        parts.append(f"<h2>Checkers</h2><table><tr><th>checker</th><th>verdict</th></tr>{cells}</table>")
    parts.append("<h2>Files</h2><ul id='files'>")
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(run_dir, followlinks=False):
        dirnames.sort()
        files += [Path(dirpath, f) for f in filenames if not Path(dirpath, f).is_symlink()]
    for path in sorted(files):
        rel = path.relative_to(store.root).as_posix()
        size = path.stat().st_size
        parts.append(
            f"<li><a href='{_href('/files/', rel)}'>{_e(path.relative_to(run_dir).as_posix())}</a> ({size} bytes)</li>"
        )
    parts.append("</ul>")
    return _page(f"run {rid}", "".join(parts))


def _verdict_word(v: Any) -> str:
    return "valid" if v is True else "invalid" if v is False else "unknown"


def _label() -> Any:
    from harness.core.spec import config_label

    return config_label


def listing_page(store: Store, rel: str, directory: Path) -> bytes:
    items = []
    if directory != store.root:
        parent = directory.parent.relative_to(store.root).as_posix()
        items.append(f"<li><a href='{_href('/files/', '' if parent == '.' else parent + '/')}'>..</a></li>")
    for child in sorted(directory.iterdir()):
        name = child.name + ("/" if child.is_dir() else "")
        child_rel = child.relative_to(store.root).as_posix() + ("/" if child.is_dir() else "")
        items.append(f"<li><a href='{_href('/files/', child_rel)}'>{_e(name)}</a></li>")
    return _page(f"/{rel}", f"<p><a href='/'>all runs</a></p><h1>/{_e(rel)}</h1><ul>{''.join(items)}</ul>")


# -- HTTP ------------------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD only; every path is checked against the store."""

    store: Store
    server_version = "kraftwerk-serve"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8", head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _not_found(self, head: bool) -> None:
        self._send(
            HTTPStatus.NOT_FOUND, _page("not found", "<h1>Not found</h1><p><a href='/'>all runs</a></p>"), head=head
        )

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch(head=True)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch(head=False)

    def _dispatch(self, head: bool) -> None:
        raw = self.path.split("?", 1)[0].split("#", 1)[0]
        if not raw.startswith("/"):
            return self._not_found(head)
        path = urllib.parse.unquote(raw)
        store = self.store
        try:
            if path == "/":
                return self._send(HTTPStatus.OK, index_page(store), head=head)
            if path == "/api/runs.json":
                runs, reports = store.runs()
                body = json.dumps({"runs": runs, "reports": reports}, default=str).encode("utf-8")
                return self._send(HTTPStatus.OK, body, "application/json", head=head)
            if path.startswith("/run/"):
                rid = path[len("/run/") :].rstrip("/")
                run_dir = store.resolve(rid)
                if run_dir is None or not run_dir.is_dir() or not (run_dir / "test.json").is_file():
                    return self._not_found(head)
                return self._send(
                    HTTPStatus.OK, run_page(store, run_dir.relative_to(store.root).as_posix(), run_dir), head=head
                )
            if path == "/files" or path.startswith("/files/"):
                rel = path[len("/files/") :]
                target = store.resolve(rel)
                if target is None:
                    return self._not_found(head)
                if target.is_dir():
                    shown = target.relative_to(store.root).as_posix() if target != store.root else ""
                    return self._send(HTTPStatus.OK, listing_page(store, shown, target), head=head)
                return self._file(target, head)
            return self._not_found(head)
        except (BrokenPipeError, ConnectionResetError):
            return None

    def _file(self, path: Path, head: bool) -> None:
        if path.suffix in _TEXT:
            ctype = "text/plain; charset=utf-8"
        else:
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            if ctype.startswith("text/"):
                ctype += "; charset=utf-8"
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError:
            return self._not_found(head)
        with fh:
            size = os.fstat(fh.fileno()).st_size
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(size))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if not head:
                shutil.copyfileobj(fh, self.wfile)
        return None


def make_server(store: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 8080) -> ThreadingHTTPServer:
    """An HTTP server for `store` (not started: call serve_forever). Port 0 picks a free port."""
    root = Path(store)
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    handler = type("StoreHandler", (Handler,), {"store": Store(root)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
