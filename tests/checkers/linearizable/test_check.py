"""Linearizability checker behaviour: semantics, pruning, limits, fail-fast, explanations, HTML."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from checkers import formats
from checkers.errors import InputError
from checkers.history import from_dicts
from checkers.linearizable import check
from checkers.linearizable.timeline import write_timeline
from tests.checkers.helpers import h
from tests.conftest import HISTORIES


def test_null_read_is_strict() -> None:
    # reading null after a completed write of 1 is not linearizable (null means "no value")
    hist = h((0, "invoke", "write", 1), (0, "ok", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", None))
    assert check(hist, "register")["valid"] is False
    assert check(hist, "register", initial=None)["failure"]["state"] == "1"


def test_initial_value() -> None:
    hist = h((0, "invoke", "read", None), (0, "ok", "read", 0))
    assert check(hist, "register")["valid"] is False
    assert check(hist, "register", initial=0)["valid"] is True


def test_crashed_write_may_take_effect_late() -> None:
    hist = h(
        (0, "invoke", "write", 1),
        (0, "info", "write", 1),
        (1, "invoke", "read", None),
        (1, "ok", "read", None),
        (2, "invoke", "read", None),
        (2, "ok", "read", 1),
    )
    assert check(hist, "register")["valid"] is True


def test_crashed_write_may_never_happen() -> None:
    hist = h((0, "invoke", "write", 1), (0, "info", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", None))
    assert check(hist, "register")["valid"] is True


def test_failed_write_did_not_happen() -> None:
    hist = h((0, "invoke", "write", 1), (0, "fail", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1))
    assert check(hist, "register")["valid"] is False


def test_never_completed_invoke_is_info() -> None:
    hist = h((0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1))
    assert check(hist, "register")["valid"] is True


def test_cas_semantics() -> None:
    ok = h((0, "invoke", "write", 1), (0, "ok", "write", 1), (0, "invoke", "cas", [1, 2]), (0, "ok", "cas", [1, 2]))
    assert check(ok, "cas-register")["valid"] is True
    bad = h((0, "invoke", "write", 1), (0, "ok", "write", 1), (0, "invoke", "cas", [3, 2]), (0, "ok", "cas", [3, 2]))
    assert check(bad, "cas-register")["valid"] is False
    assert "cas 3->2" in str(check(bad, "cas-register")["failure"]["pending"])


def test_unobserved_crashed_writes_are_pruned() -> None:
    rows = [(p, t, "write", 100 + p) for p in range(30) for t in ("invoke", "info")]
    rows += [(99, "invoke", "read", None), (99, "ok", "read", None)]
    result = check(h(*rows), "register")
    assert result["valid"] is True
    assert result["stats"]["pruned"] == 30


def test_append_reads_refute_early_only_without_a_put_before() -> None:
    """A read of a string the state cannot grow into ends a branch, unless a put may still come first."""
    # a read concurrent with 16 appends that shows none of them: refuted at once, not after 16! orders
    rows = [(99, "invoke", "get", None)]
    rows += [(p, "invoke", "append", f"<{p}>") for p in range(16)]
    rows += [(p, "ok", "append", f"<{p}>") for p in range(16)]
    rows += [(99, "ok", "get", "zzz")]
    result = check(h(*rows), "kv-append", time_limit=10)
    assert result["valid"] is False
    assert result["stats"]["steps"] < 10_000
    # a put invoked before the read returns may reset the string: "x" + "b" is then fine
    ok = h(
        (0, "invoke", "append", "a"),
        (0, "ok", "append", "a"),
        (1, "invoke", "put", "x"),
        (2, "invoke", "append", "b"),
        (2, "ok", "append", "b"),
        (3, "invoke", "get", None),
        (3, "ok", "get", "xb"),
        (1, "ok", "put", "x"),
    )
    assert check(ok, "kv-append")["valid"] is True


def test_identical_crashed_ops_are_cheap() -> None:
    # 40 crashed writes of the same two values: without the twin reduction this is 2^40 subsets
    rows = [(p, t, "write", p % 2) for p in range(40) for t in ("invoke", "info")]
    rows += [(99, "invoke", "read", None), (99, "ok", "read", 1), (99, "invoke", "read", None), (99, "ok", "read", 2)]
    result = check(h(*rows), "register", time_limit=30)
    assert result["valid"] is False
    assert result["stats"]["configurations"] < 10_000


def test_wrong_value_shapes_name_the_line() -> None:
    hist = h((0, "invoke", "cas", 5), (0, "ok", "cas", 5))
    with pytest.raises(InputError, match="pair") as e:
        check(hist, "cas-register")
    assert e.value.line == 1
    with pytest.raises(InputError, match="not part of the register model"):
        check(h((0, "invoke", "cas", [1, 2]), (0, "ok", "cas", [1, 2])), "register")
    with pytest.raises(InputError, match="string"):
        check(h((0, "invoke", "append", 3), (0, "ok", "append", 3)), "kv-append")


def test_unknown_model() -> None:
    with pytest.raises(InputError, match="unknown model"):
        check(h((0, "invoke", "read", None), (0, "ok", "read", None)), "queue-ish")


def _expensive_and_bad() -> list[tuple]:
    """Key "hard": 14 concurrent crashed appends + reads that defeat the memo; key "bad": refuted at once.

    The crashed put keeps "hard" from being refuted by the reads alone (a put may reset the string).
    """
    rows: list[tuple] = [(99, "invoke", "put", "p", "hard")]
    for p in range(14):
        rows.append((p, "invoke", "append", f"<{p}>", "hard"))
    for p in range(14):
        rows.append((100 + p, "invoke", "get", None, "hard"))
        rows.append((100 + p, "ok", "get", "zzz", "hard"))
    rows += [(200, "invoke", "put", "a", "bad"), (200, "ok", "put", "a", "bad")]
    rows += [(201, "invoke", "get", None, "bad"), (201, "ok", "get", "b", "bad")]
    return rows


@pytest.mark.parametrize("jobs", [1, 2])
def test_fail_fast_across_keys(jobs: int) -> None:
    """One refuted key settles the verdict even while another key is very expensive."""
    started = time.monotonic()
    result = check(h(*_expensive_and_bad()), "kv-append", time_limit=120, jobs=jobs)
    assert result["valid"] is False
    assert result["failure"]["key"] == "bad"
    assert result["keys"]["not-finished"] + result["keys"]["valid"] >= 1
    assert time.monotonic() - started < 60  # a hang guard only; speed is measured in benchmarks/


def test_memory_limit_gives_unknown() -> None:
    rows = [r for r in _expensive_and_bad() if r[4] == "hard"]
    result = check(h(*rows), "kv-append", memory_limit_mb=1)
    assert result["valid"] == "unknown"
    assert result["cause"] == "out-of-memory"


def test_time_limit_gives_unknown() -> None:
    rows = [r for r in _expensive_and_bad() if r[4] == "hard"]
    result = check(h(*rows), "kv-append", time_limit=0.05)
    assert result["valid"] == "unknown"
    assert result["cause"] == "timeout"
    assert result["unknown-keys"] == [{"key": "hard", "cause": "timeout"}]


def test_forked_jobs_agree_with_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    check_module = importlib.import_module("checkers.linearizable.check")
    monkeypatch.setattr(check_module, "PARALLEL_MIN_OPS", 1)  # fork even for small histories
    history = formats.load(HISTORIES / "porcupine/test_data/kv/c10-bad.txt")
    one = check(history, "kv-append")
    two = check(history, "kv-append", jobs=2)
    assert one["valid"] is two["valid"] is False
    good = formats.load(HISTORIES / "porcupine/test_data/kv/c10-ok.txt")
    assert check(good, "kv-append", jobs=2)["valid"] is True


def test_explanation_is_actionable() -> None:
    hist = h(
        (0, "invoke", "write", 1),
        (0, "ok", "write", 1),
        (1, "invoke", "write", 2),
        (1, "ok", "write", 2),
        (2, "invoke", "read", None),
        (2, "ok", "read", 1),
    )
    failure = check(hist, "register")["failure"]
    assert failure["op"]["f"] == "read" and failure["op"]["value"] == 1
    assert failure["state"] == "2"
    assert [p["value"] for p in failure["prefix"]] == [1, 2]
    assert any("holds 2" in c["why"] for c in failure["pending"])


def test_html_timeline(tmp_path: Path) -> None:
    history = formats.load(HISTORIES / "knossos/data/cas-register/bad/cas-failure.edn")
    result = check(history, "cas-register")
    out = write_timeline(history, result, str(tmp_path / "t.html"))
    page = Path(out).read_text()
    assert "NOT linearizable" in page
    assert 'class="op ok prefix' in page and "blocked" in page
    assert "read 0 but the register holds 2" in page


def test_multi_register() -> None:
    history = formats.load(HISTORIES / "knossos/data/multi-register/good/multi-register.edn")
    assert check(history, "multi-register", {"x": 0, "y": 0})["valid"] is True
    assert check(history, "multi-register", {"x": 5, "y": 5})["valid"] is False


def test_cas_mismatch_catches_a_stale_compare() -> None:
    """write 1 completes, then a cas [1, 2] fails with cas-mismatch: only the opt-in sees the stale compare."""
    rows = [
        {"process": 0, "type": "invoke", "f": "write", "value": 1},
        {"process": 0, "type": "ok", "f": "write", "value": 1},
        {"process": 1, "type": "invoke", "f": "cas", "value": [1, 2]},
        {"process": 1, "type": "fail", "f": "cas", "value": [1, 2], "error": "cas-mismatch"},
        {"process": 0, "type": "invoke", "f": "read", "value": None},
        {"process": 0, "type": "ok", "f": "read", "value": 1},
    ]
    assert check(from_dicts(rows), "cas-register")["valid"] is True
    result = check(from_dicts(rows), "cas-register", cas_mismatch=True)
    assert result["valid"] is False
    assert "cas-mismatch" in result["failure"]["summary"] or any(
        "cas-mismatch" in p["why"] for p in result["failure"]["pending"]
    )
    unmarked = [{k: v for k, v in r.items() if k != "error"} for r in rows]
    assert check(from_dicts(unmarked), "cas-register", cas_mismatch=True)["valid"] is True


def test_cas_mismatch_keeps_unobserved_crashed_writes() -> None:
    """A crashed write nobody read can explain a compare failure, so it is not pruned."""
    rows = [
        {"process": 0, "type": "invoke", "f": "write", "value": 1},
        {"process": 0, "type": "ok", "f": "write", "value": 1},
        {"process": 2, "type": "invoke", "f": "write", "value": 5},
        {"process": 1, "type": "invoke", "f": "cas", "value": [1, 2]},
        {"process": 1, "type": "fail", "f": "cas", "value": [1, 2], "error": "cas-mismatch"},
        {"process": 2, "type": "info", "f": "write", "value": 5},
    ]
    assert check(from_dicts(rows), "cas-register", cas_mismatch=True)["valid"] is True
    without = [r for r in rows if r["process"] != 2]
    assert check(from_dicts(without), "cas-register", cas_mismatch=True)["valid"] is False
