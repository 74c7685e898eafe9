"""Every history in the reference corpus (tests/data/histories/MANIFEST.tsv) gets exactly its published verdict."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from checkers import formats
from checkers.errors import InputError
from checkers.linearizable import check
from tests.conftest import HISTORIES

MANIFEST = HISTORIES / "MANIFEST.tsv"


def _rows() -> list[dict[str, str]]:
    if not MANIFEST.exists():
        return []
    with open(MANIFEST, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


ROWS = _rows()
MODEL = {"cas-register": "cas-register", "kv-append": "kv-append", "mutex": "mutex", "multi-register": "multi-register"}
INITIAL = {"multi-register": {"x": 0, "y": 0}}


def test_manifest_is_there() -> None:
    assert len(ROWS) >= 230, f"expected the reference corpus at {MANIFEST}"


@pytest.mark.parametrize("row", [r for r in ROWS if Path(r["path"]).name != "etcd_095.log"], ids=lambda r: r["path"])
def test_verdict(row: dict[str, str]) -> None:
    model = MODEL[row["model"].split()[0]]
    expected = {"valid": True, "invalid": False}[row["expected"].split()[0]]
    history = formats.load(HISTORIES / row["path"])
    result = check(history, model, INITIAL.get(model), time_limit=60)
    assert result["valid"] is expected, result
    if expected is False:
        failure = result["failure"]
        assert failure["summary"] and "op" in failure and failure["pending"]


def test_empty_etcd_095_is_a_clear_error() -> None:
    path = HISTORIES / "porcupine/test_data/jepsen/etcd_095.log"
    with pytest.raises(InputError, match="empty history") as e:
        formats.load(path)
    assert str(path) in str(e.value)


def test_cas_failure_names_the_knossos_op() -> None:
    """Knossos' tests name op 491 (the completion of the impossible read) for cas-failure.edn."""
    result = check(formats.load(HISTORIES / "knossos/data/cas-register/bad/cas-failure.edn"), "cas-register")
    assert result["failure"]["op"]["completed-index"] == 491
    assert result["failure"]["op"]["f"] == "read"


@pytest.mark.parametrize("name", ["memstress3-12.edn", "memstress3-14.edn", "memstress3-55.edn"])
def test_tiny_time_limit_gives_unknown(name: str) -> None:
    """Knossos' timeout fixtures: a limit too small to finish ends `unknown`, not a crash."""
    history = formats.load(HISTORIES / "knossos/data/cas-register/good" / name)
    result = check(history, "cas-register", time_limit=1e-9, quantum=1)
    assert result["valid"] == "unknown"
    assert result["cause"] == "timeout"
