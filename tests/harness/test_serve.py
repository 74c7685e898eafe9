"""`kraftwerk serve`: run list, run pages, files, the nightly report; nothing outside the store; Chromium."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.store.report.analysis import write_report
from harness.store.serve import make_server

SECRET = "TOPSECRET-do-not-serve"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def kraftwerk_test(store: Path, *args: str) -> Path:
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stderr
    return Path(next(x for x in r.stderr.splitlines() if x.startswith("run directory "))[len("run directory ") :])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("serve")
    store = tmp / "store"
    clean = kraftwerk_test(store, "--time-limit", "5", "--seed", "2", "--nemesis", "partition")
    bug = kraftwerk_test(store, "--time-limit", "20", "--seed", "1", "--bug", "stale-read")
    write_report({"totals": [{"runs": 2, "valid": 1, "invalid": 1, "unknown": 0, "errors": 0}]}, store / "analysis")
    (tmp / "secret.txt").write_text(SECRET)
    (store / "outside").symlink_to(tmp)  # a directory link out of the store
    (bug / "leak.txt").symlink_to(tmp / "secret.txt")  # a file link out of the store
    server = make_server(store, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield {"store": store, "clean": clean, "bug": bug, "host": host, "port": port, "url": f"http://{host}:{port}"}
    server.shutdown()
    server.server_close()


def get(site: dict[str, Any], path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    """A raw request: the path goes on the wire exactly as given (no client-side normalisation)."""
    conn = http.client.HTTPConnection(site["host"], site["port"], timeout=30)
    try:
        conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", errors="replace")
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


def rid(site: dict[str, Any], run: Path) -> str:
    return run.relative_to(site["store"]).as_posix()


def test_binds_loopback_by_default(site: dict[str, Any]) -> None:
    assert site["host"] == "127.0.0.1"
    from harness.cli import build_parser

    args = build_parser().parse_args(["serve", "x"])
    assert args.host == "127.0.0.1"


def test_run_list_shows_verdicts_and_reports(site: dict[str, Any]) -> None:
    status, headers, body = get(site, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    rows = re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[1])
    assert len(rows) == 2
    by_run = {re.search(r"href='/run/([^']+)'", r)[1]: r for r in rows}
    assert "class='verdict invalid'>invalid<" in by_run[rid(site, site["bug"])]
    assert "nonlinearizable" in by_run[rid(site, site["bug"])]
    assert "class='verdict valid'>valid<" in by_run[rid(site, site["clean"])]
    assert "register/sim/partition/" in by_run[rid(site, site["clean"])]
    assert "/files/analysis/report.html" in body
    status, _, api = get(site, "/api/runs.json")
    assert status == 200 and {r["verdict"] for r in json.loads(api)["runs"]} == {"valid", "invalid"}


def test_run_page_lists_its_files(site: dict[str, Any]) -> None:
    status, _, body = get(site, f"/run/{rid(site, site['bug'])}")
    assert status == 200
    for name in ("results.json", "history.jsonl", "events.jsonl", "timeline.html", "logs/n1.jsonl", "test.json"):
        assert f">{name}<" in body, name
    assert "leak.txt" not in body  # a symlink is not listed
    assert "kraftwerk test --workload register" in body and "--bug stale-read" in body
    assert "<td>linearizable</td><td class='invalid'>invalid</td>" in body


def test_files_are_served_with_their_type(site: dict[str, Any]) -> None:
    base = f"/files/{rid(site, site['bug'])}"
    status, headers, body = get(site, f"{base}/results.json")
    assert status == 200 and headers["content-type"] == "text/plain; charset=utf-8"
    assert json.loads(body)["valid"] is False
    status, headers, _ = get(site, f"{base}/timeline.html")
    assert status == 200 and headers["content-type"].startswith("text/html")
    status, headers, body = get(site, f"{base}/history.jsonl", method="HEAD")
    assert status == 200 and body == "" and int(headers["content-length"]) > 1000
    status, _, body = get(site, f"{base}/logs/")
    assert status == 200 and "n1.jsonl" in body
    assert get(site, "/files/analysis/report.html")[0] == 200
    assert get(site, "/files/latest/results.json")[0] == 200  # a link inside the store is fine


@pytest.mark.parametrize(
    "path",
    [
        "/files/../secret.txt",
        "/files/%2e%2e/secret.txt",
        "/files/%2E%2E%2Fsecret.txt",
        "/files/..%2fsecret.txt",
        "/files/register-sim/../../secret.txt",
        "/files/register-sim/%2e%2e/%2e%2e/secret.txt",
        "/files/%252e%252e/secret.txt",
        "/files//etc/passwd",
        "/files/%2Fetc%2Fpasswd",
        "/files/outside/secret.txt",
        "/files/outside/",
        "/files/./../secret.txt",
        "/files/register-sim%00/../../secret.txt",
        "/files/..\\secret.txt",
        "/run/..%2F..%2Fetc",
        "/run/../../",
        "/%2e%2e/secret.txt",
        "/../secret.txt",
        "http://evil/../secret.txt",
    ],
)
def test_nothing_outside_the_store(site: dict[str, Any], path: str) -> None:
    status, _, body = get(site, path)
    assert status == 404, (path, status)
    assert SECRET not in body and "root:" not in body


def test_symlinked_file_out_of_the_store(site: dict[str, Any]) -> None:
    status, _, body = get(site, f"/files/{rid(site, site['bug'])}/leak.txt")
    assert status == 404 and SECRET not in body


@pytest.mark.needs("chromium")
def test_a_person_sees_the_verdicts_in_chromium(site: dict[str, Any], tmp_path: Path) -> None:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", site["url"] + "/"], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    cells = re.findall(r'<td class="verdict (\w+)">(\w+)</td>', dom.stdout)
    assert sorted(cells) == [("invalid", "invalid"), ("valid", "valid")]
    assert "Nightly reports" in dom.stdout
    shot = tmp_path / "runs.png"
    r = subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1400,700", site["url"] + "/"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))[:, :, :3]
    rgb = (pixels * 255).round().astype(int).reshape(-1, 3)
    colours = {tuple(c) for c in rgb[:: max(1, len(rgb) // 200_000)]}
    near = lambda target: any(sum(abs(a - b) for a, b in zip(c, target)) < 12 for c in colours)  # noqa: E731
    assert near((0xBF, 0xEA, 0xB3)), "no green 'valid' cell on screen"
    assert near((0xF4, 0xA9, 0xA9)), "no red 'invalid' cell on screen"
