"""`kraftwerk export`: a run's history (and every Knossos history of the corpus) as Jepsen EDN or JSONL, read
back to the same operations; bad input exits 254 naming the file and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkers import formats
from harness.cli import main
from tests.conftest import HISTORIES, ROOT

KNOSSOS = sorted((HISTORIES / "knossos").rglob("*.edn"))


def ops(path: Path, fmt: str = "auto") -> list[dict]:
    return [op.to_dict() for op in formats.load(path, fmt).ops]


def test_the_corpus_has_knossos_histories() -> None:
    assert len(KNOSSOS) >= 100


@pytest.mark.parametrize("fmt", ["edn", "jsonl"])
def test_every_knossos_history_round_trips(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    for source in KNOSSOS:
        out = tmp_path / f"{source.stem}.{fmt}"
        assert main(["export", str(source), "--format", fmt, "--output", str(out)]) == 0, source
        assert capsys.readouterr().out.strip() == str(out)
        assert ops(out, fmt) == ops(source), source


def test_a_run_dir_gets_history_edn(tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--time-limit", "5", "--seed", "3", "--store", str(store), "-q"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    run_dir = (store / "latest").resolve()
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "export", str(run_dir)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(run_dir / "history.edn")
    text = (run_dir / "history.edn").read_text()
    assert text.startswith("[{:index 0, :time ") and ":type :invoke" in text and ":process :nemesis" in text
    assert ops(run_dir / "history.edn") == ops(run_dir / "history.jsonl")
    # JSONL goes to standard output and is the stored history, byte for byte
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "export", str(run_dir), "--format", "jsonl"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0 and r.stdout == (run_dir / "history.jsonl").read_text()


def test_bad_input_exits_254_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"index": 0, "process": 0, "type": "invoke", "f": "read", "value": null}\n{oops\n')
    assert main(["export", str(bad)]) == 254
    err = capsys.readouterr().err
    assert str(bad) in err and ":2" in err
    assert main(["export", str(tmp_path)]) == 254
    assert "has no history.jsonl" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.edn")]) == 254
    assert "no such file" in capsys.readouterr().err
    assert main(["export", str(KNOSSOS[0]), "--format", "xml"]) == 254
    assert "--format" in capsys.readouterr().err
    good = tmp_path / "g.jsonl"
    good.write_text('{"index": 0, "process": 0, "type": "invoke", "f": "read", "value": null}\n')
    assert main(["export", str(good), "--format", "jsonl", "--output", str(good)]) == 254
    assert "is the history being read" in capsys.readouterr().err
    assert good.read_text().count("\n") == 1  # nothing lost
