"""`kraftwerk check` as a user runs it: JSON lines on stdout, summary on stderr, Jepsen exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HISTORIES

ETCD = HISTORIES / "porcupine/test_data/jepsen"


def kraftwerk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300)


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_valid_invalid_and_worst_exit() -> None:
    good, bad = str(ETCD / "etcd_002.log"), str(ETCD / "etcd_000.log")
    r = kraftwerk("check", good, "--model", "cas-register")
    assert r.returncode == 0, r.stderr
    [out] = jsonl(r.stdout)
    assert out["file"] == good and out["valid"] is True
    r = kraftwerk("check", good, bad)
    assert r.returncode == 1
    assert [o["valid"] for o in jsonl(r.stdout)] == [True, False]
    assert "INVALID" in r.stderr and "etcd_000.log" in r.stderr


def test_quiet_has_no_summary() -> None:
    r = kraftwerk("check", str(ETCD / "etcd_000.log"), "-q")
    assert r.returncode == 1 and r.stderr == ""


def test_unknown_exit_2() -> None:
    path = HISTORIES / "porcupine/test_data/kv/c50-bad.txt"
    r = kraftwerk("check", str(path), "--check-time-limit", "0.000001", "--jobs", "1")
    [out] = jsonl(r.stdout)
    if out["valid"] == "unknown":  # the refutation may still win inside the first quantum
        assert r.returncode == 2
    else:
        assert out["valid"] is False and r.returncode == 1


def test_malformed_history_exit_254_names_line(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    p.write_text(
        '{"index": 0, "process": 0, "type": "invoke", "f": "read", "value": null}\n'
        '{"index": 1, "process": 0, "type": "invoke", "f": "read", "value": null}\n'
    )
    r = kraftwerk("check", str(p))
    assert r.returncode == 254
    assert f"{p}:2:" in r.stderr and "still open" in r.stderr
    assert "Traceback" not in r.stderr
    [out] = jsonl(r.stdout)
    assert out["file"] == str(p) and "error" in out


def test_bad_input_does_not_hide_other_files(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text("{oops\n")
    r = kraftwerk("check", str(ETCD / "etcd_000.log"), str(p))
    assert r.returncode == 254
    outs = jsonl(r.stdout)
    assert outs[0]["valid"] is False and "error" in outs[1]


@pytest.mark.parametrize(
    "args",
    [["check"], ["check", "x", "--model", "nope"], ["check", "x", "--check-time-limit", "-1"], ["frobnicate"], []],
)
def test_bad_arguments_exit_254(args: list[str]) -> None:
    r = kraftwerk(*args)
    assert r.returncode == 254, r
    assert r.stderr.strip()


def test_help_explains_itself() -> None:
    r = kraftwerk("check", "--help")
    assert r.returncode == 0
    for word in ("--model", "--format", "--check-time-limit", "--html", "Exit code"):
        assert word in r.stdout


def test_the_old_time_limit_spelling_still_works_with_a_warning() -> None:
    path = HISTORIES / "porcupine/test_data/kv/c50-bad.txt"
    r = kraftwerk("check", str(path), "--time-limit", "0.000001", "--jobs", "1", "-q")
    assert r.returncode in (1, 2)
    assert "--time-limit is deprecated, use --check-time-limit" in r.stderr
    assert "deprecated" not in kraftwerk("check", str(path), "--check-time-limit", "0.000001", "-q").stderr


def test_empty_file_is_a_clear_error() -> None:
    r = kraftwerk("check", str(ETCD / "etcd_095.log"))
    assert r.returncode == 254
    assert "empty history" in r.stderr


def test_html_and_explicit_format(tmp_path: Path) -> None:
    out = tmp_path / "t.html"
    r = kraftwerk("check", str(ETCD / "etcd_000.log"), "--format", "jepsen-log", "--html", str(out))
    assert r.returncode == 1
    assert out.exists() and "NOT linearizable" in out.read_text()
    assert jsonl(r.stdout)[0]["html"] == str(out)


def test_many_files_in_parallel_keep_argument_order() -> None:
    files = sorted(str(p) for p in ETCD.glob("etcd_0[0-3]*.log"))
    r = kraftwerk("check", *files, "--jobs", "2", "-q")
    outs = jsonl(r.stdout)
    assert [o["file"] for o in outs] == files
    assert r.returncode == 1


def test_inferred_models(tmp_path: Path) -> None:
    kv = HISTORIES / "porcupine/test_data/kv/c01-ok.txt"
    assert jsonl(kraftwerk("check", str(kv)).stdout)[0]["model"] == "kv-append"
    mutex = HISTORIES / "knossos/data/mutex/bad/etcd.edn"
    r = kraftwerk("check", str(mutex))
    assert jsonl(r.stdout)[0]["model"] == "mutex" and r.returncode == 1


def test_epochs_file(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"node": "n1", "time": 1, "type": "state", "epoch": 1, "role": "leader", "leader": "n1", "voted_for": "n1"}\n'
        '{"node": "n2", "time": 1, "type": "state", "epoch": 1, "role": "leader", "leader": "n2", "voted_for": "n2"}\n'
    )
    r = kraftwerk("check", str(events), "--model", "epochs")
    assert r.returncode == 1
    assert "multiple-leaders" in jsonl(r.stdout)[0]["anomaly-types"]
    r = kraftwerk("check", str(tmp_path))  # a run directory
    assert r.returncode == 1
