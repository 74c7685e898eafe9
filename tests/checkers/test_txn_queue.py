"""Tests for the transactional queue checker (checkers/txn_queue.py): one hand-built history per
anomaly and per cycle class, valid histories staying valid, and a Hypothesis property against a
brute-force dependency graph."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.errors import InputError
from checkers.history import from_dicts
from checkers.txn_queue import ANOMALY_TYPES, check_txn_queue, is_transactional, synthetic_history


class T:
    """A history builder: `inv` opens a transaction, `ok`/`fail`/`info` completes it."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.open: dict[int, list] = {}

    def inv(self, p: int, *mops: list) -> T:
        self.open[p] = [list(m) for m in mops]
        self.ops.append({"process": p, "type": "invoke", "f": "txn", "value": self.open[p]})
        return self

    def ok(self, p: int, *done: list) -> T:
        """Complete p's transaction; `done` are the completed micro-ops in order."""
        self.open.pop(p)
        self.ops.append({"process": p, "type": "ok", "f": "txn", "value": [list(m) for m in done]})
        return self

    def end(self, p: int, typ: str) -> T:
        self.ops.append({"process": p, "type": typ, "f": "txn", "value": self.open.pop(p)})
        return self

    def txn(self, p: int, *done: list) -> T:
        """A whole committed transaction: sends as [send, k, [o, v]], polls as [poll, {...}]."""
        invoked = [["send", m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in done]
        return self.inv(p, *invoked).ok(p, *done)

    def check(self, **kw: Any) -> dict[str, Any]:
        return check_txn_queue(from_dicts(self.ops, "test"), **kw)


def S(k: str, o: int, v: int) -> list:  # noqa: N802
    return ["send", k, [o, v]]


def P(reads: dict[str, list]) -> list:  # noqa: N802
    return ["poll", reads]


def types(r: dict[str, Any]) -> list[str]:
    return r["anomaly-types"]


def test_valid_history() -> None:
    r = T().txn(0, S("x", 0, 1), S("y", 0, 2)).txn(1, P({"x": [[0, 1]], "y": [[0, 2]]})).check()
    assert r["valid"] is True and types(r) == []


def test_no_polls_is_unknown() -> None:
    r = T().inv(0, ["send", "x", 1]).end(0, "fail").check()
    assert r["valid"] == "unknown"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_synthetic_histories_are_valid(seed: int) -> None:
    h = synthetic_history(3000, seed)
    assert is_transactional(h)
    r = check_txn_queue(h)
    assert r["valid"] is True, r["anomalies"]
    assert r["stats"]["txns"]["fail"] > 0 and r["stats"]["values-read"] == r["stats"]["committed-sends"]


def test_duplicate_and_inconsistent_offsets() -> None:
    r = T().txn(0, S("x", 0, 1)).txn(1, P({"x": [[0, 1], [1, 1]]})).check()
    assert "duplicate" in types(r) and r["valid"] is False
    r = T().txn(0, S("x", 0, 1)).txn(1, P({"x": [[0, 2]]})).check()
    assert "inconsistent-offsets" in types(r)
    assert r["anomalies"]["inconsistent-offsets"]["examples"][0]["offset"] == 0


def test_g1a_aborted_read() -> None:
    r = T().inv(0, ["send", "x", 1]).end(0, "fail").txn(1, P({"x": [[0, 1]]})).check()
    assert types(r) == ["G1a"] and r["bad-anomaly-types"] == ["G1a"]


def test_info_txn_read_in_part_is_committed_so_its_other_write_is_lost() -> None:
    h = T().inv(0, ["send", "x", 1], ["send", "y", 2]).end(0, "info")
    h.txn(1, S("y", 1, 3)).txn(2, P({"x": [[0, 1]], "y": [[1, 3]]}))
    r = h.check()
    assert "unseen" in types(r)  # y=2 was never read and its offset is unknown
    assert r["stats"]["committed"] == 3


def test_precommitted_read() -> None:
    r = T().txn(0, S("x", 0, 1), P({"x": [[0, 1]]})).check()
    assert "precommitted-read" in types(r) and r["valid"] is False


def test_lost_write_and_unseen() -> None:
    r = T().txn(0, S("x", 0, 1)).txn(0, S("x", 1, 2)).txn(1, P({"x": [[1, 2]]})).check()
    assert types(r) == ["lost-write"]
    assert r["anomalies"]["lost-write"]["examples"][0]["value"] == 1
    r = T().txn(0, S("x", 0, 1)).txn(0, S("x", 1, 2)).txn(1, P({"x": [[0, 1]]})).check()
    assert types(r) == ["unseen"] and r["anomalies"]["unseen"]["by-key"] == {"x": 1}


def _sent(h: T, n: int, p: int = 9) -> T:
    for i in range(n):
        h.txn(p, S("x", i, 100 + i))
    return h


def test_nonmonotonic_poll_and_poll_skip() -> None:
    h = _sent(T(), 3).txn(0, P({"x": [[0, 100], [1, 101]]})).txn(0, P({"x": [[1, 101], [2, 102]]}))
    assert types(h.check()) == ["nonmonotonic-poll"]
    h = _sent(T(), 3).txn(0, P({"x": [[0, 100]]})).txn(1, P({"x": [[1, 101]]})).txn(0, P({"x": [[2, 102]]}))
    r = h.check()
    assert types(r) == ["poll-skip"] and r["anomalies"]["poll-skip"]["examples"][0]["skipped"] == [1]
    assert h.check(subscribe=True)["valid"] is True  # allowed with subscribe, as Jepsen's


def test_assign_resets_position() -> None:
    h = _sent(T(), 2).txn(0, P({"x": [[0, 100], [1, 101]]}))
    h.ops += [
        {"process": 0, "type": "invoke", "f": "assign", "value": ["x"]},
        {"process": 0, "type": "ok", "f": "assign", "value": ["x"]},
    ]
    h.txn(0, P({"x": [[0, 100], [1, 101]]}))
    assert h.check()["valid"] is True


def test_aborted_poll_forgets_position() -> None:
    h = _sent(T(), 2).txn(0, P({"x": [[0, 100]]})).inv(0, ["poll"]).end(0, "fail")
    h.txn(0, P({"x": [[0, 100], [1, 101]]}))
    assert h.check()["valid"] is True


def test_internal_poll_anomalies() -> None:
    r = _sent(T(), 3).txn(0, P({"x": [[0, 100], [2, 102]]}), P({"x": [[1, 101]]})).check()
    assert types(r) == ["int-nonmonotonic-poll", "int-poll-skip"]


def test_send_anomalies() -> None:
    r = T().txn(0, S("x", 1, 1)).txn(0, S("x", 0, 2)).txn(1, P({"x": [[0, 2], [1, 1]]})).check()
    assert types(r) == ["G0-process", "nonmonotonic-send"]  # the process order contradicts the offsets
    assert r["bad-anomaly-types"] == ["nonmonotonic-send"]
    r = T().txn(0, S("x", 1, 1), S("x", 0, 2)).txn(1, P({"x": [[0, 2], [1, 1]]})).check()
    assert types(r) == ["int-nonmonotonic-send"]
    h = T().inv(0, ["send", "x", 1], ["send", "x", 3]).txn(1, S("x", 1, 2)).ok(0, S("x", 0, 1), S("x", 2, 3))
    r = h.txn(2, P({"x": [[0, 1], [1, 2], [2, 3]]})).check()
    # another writer inside a transaction's range is also a ww cycle; both are always allowed
    assert types(r) == ["G0", "int-send-skip"] and r["valid"] is True


def _final(h: T, reads: dict[str, list], p: int = 99) -> T:
    return h.txn(p, P(reads))


def _cycle(r: dict[str, Any], name: str) -> list[dict]:
    assert name in types(r), types(r)
    return r["anomalies"][name]["examples"][0]["cycle"]


def test_g0_write_cycle_is_allowed() -> None:
    h = T().inv(0, ["send", "x", 1], ["send", "y", 2]).inv(1, ["send", "x", 3], ["send", "y", 4])
    h.ok(0, S("x", 0, 1), S("y", 1, 2)).ok(1, S("x", 1, 3), S("y", 0, 4))
    r = _final(h, {"x": [[0, 1], [1, 3]], "y": [[0, 4], [1, 2]]}).check()
    cycle = _cycle(r, "G0")
    assert len(cycle) == 2 and all(s["edge"] == ["ww"] for s in cycle)
    assert r["valid"] is True and types(r) == ["G0"]


def test_g1c_is_bad_unless_ww_deps() -> None:
    h = T().inv(0, ["send", "x", 1], ["poll"]).inv(1, ["send", "y", 2], ["poll"])
    h.ok(0, S("x", 0, 1), P({"y": [[0, 2]]})).ok(1, S("y", 0, 2), P({"x": [[0, 1]]}))
    r = h.check()
    cycle = _cycle(r, "G1c")
    assert len(cycle) == 2 and all(s["edge"] == ["wr"] for s in cycle)
    assert r["bad-anomaly-types"] == ["G1c"]
    assert r["anomalies"]["G1c"]["examples"][0]["ww"] is False


def test_wr_only_g1c_is_bad_even_with_ww_deps() -> None:
    # two transactions each reading the other's write: no ww edge, so ww_deps does not excuse it
    h = T().inv(0, ["send", "x", 1], ["poll"]).inv(1, ["send", "y", 2], ["poll"])
    h.ok(0, S("x", 0, 1), P({"y": [[0, 2]]})).ok(1, S("y", 0, 2), P({"x": [[0, 1]]}))
    r = h.check(ww_deps=True)
    assert r["valid"] is False and r["bad-anomaly-types"] == ["G1c"]
    assert r["anomalies"]["G1c"]["without-ww"] == 1
    assert r["anomalies"]["G1c"]["examples"][0]["ww"] is False
    assert h.check(ww_deps=True, allow=["G1c"])["valid"] is True


def test_g1c_needing_a_ww_edge_is_allowed_with_ww_deps() -> None:
    # T0 ->ww T1 on x, T1 ->wr T0 on y: the cycle needs the ww edge
    h = T().inv(0, ["send", "x", 1], ["poll"]).inv(1, ["send", "x", 2], ["send", "y", 3])
    h.ok(0, S("x", 0, 1), P({"y": [[0, 3]]})).ok(1, S("x", 1, 2), S("y", 0, 3))
    h = _final(h, {"x": [[0, 1], [1, 2]], "y": [[0, 3]]})
    r = h.check()
    cycle = _cycle(r, "G1c")
    assert sorted(e for s in cycle for e in s["edge"]) == ["wr", "ww"]
    assert r["anomalies"]["G1c"]["examples"][0]["ww"] is True and "without-ww" not in r["anomalies"]["G1c"]
    assert r["bad-anomaly-types"] == ["G1c"]
    r = h.check(ww_deps=True)
    assert r["valid"] is True and r["bad-anomaly-types"] == [] and types(r) == ["G1c"]


def _early_read(same_process: bool) -> T:
    """C sends y and polls x; A (concurrent with C) reads C's y, then B sends the x C reads:
    C ->wr A ->(process or realtime) B ->wr C, with no ww edge."""
    h = T().inv(2, ["send", "y", 40], ["poll"])
    h.txn(0, P({"y": [[0, 40]]}))
    h.txn(0 if same_process else 1, S("x", 0, 20))
    h.ok(2, S("y", 0, 40), P({"x": [[0, 20]]}))
    return _final(h, {"x": [[0, 20]], "y": [[0, 40]]})


@pytest.mark.parametrize("same_process", [True, False])
def test_wr_only_g1c_process_and_realtime_are_bad_even_with_ww_deps(same_process: bool) -> None:
    name = "G1c-process" if same_process else "G1c-realtime"
    r = _early_read(same_process).check(ww_deps=True)
    cycle = _cycle(r, name)
    assert sorted(e for s in cycle for e in s["edge"]) == sorted(["wr", "wr", name.split("-")[1]])
    assert r["valid"] is False and r["bad-anomaly-types"] == [name]
    assert r["anomalies"][name]["examples"][0]["ww"] is False


def _three(second: list, c_mops: list, c_done: list, same_process: bool, x: list | None = None) -> T:
    """A (writes y@1) then B (second), C concurrent with both: C ->ww A, B -> C via `second`."""
    pb = 0 if same_process else 1
    h = T().inv(2, *c_mops)
    h.txn(0, S("y", 1, 10))
    h.txn(pb, second)
    h.ok(2, *c_done)
    return _final(h, {"x": x or [[0, 20], [1, 30]], "y": [[0, 40], [1, 10]]})


def test_g0_process() -> None:
    h = _three(S("x", 0, 20), [["send", "x", 30], ["send", "y", 40]], [S("x", 1, 30), S("y", 0, 40)], True)
    r = h.check()
    cycle = _cycle(r, "G0-process")
    assert len(cycle) == 3 and sorted(e for s in cycle for e in s["edge"]) == ["process", "ww", "ww"]
    assert r["valid"] is True


def test_g1c_process() -> None:
    h = _three(S("x", 0, 20), [["poll"], ["send", "y", 40]], [P({"x": [[0, 20]]}), S("y", 0, 40)], True, [[0, 20]])
    r = h.check()
    cycle = _cycle(r, "G1c-process")
    assert sorted(e for s in cycle for e in s["edge"]) == ["process", "wr", "ww"]
    assert r["bad-anomaly-types"] == ["G1c-process"]
    assert r["anomalies"]["G1c-process"]["examples"][0]["ww"] is True
    assert h.check(ww_deps=True)["valid"] is True  # the cycle needs its ww edge


def test_g0_realtime() -> None:
    h = _three(S("x", 0, 20), [["send", "x", 30], ["send", "y", 40]], [S("x", 1, 30), S("y", 0, 40)], False)
    r = h.check()
    cycle = _cycle(r, "G0-realtime")
    assert sorted(e for s in cycle for e in s["edge"]) == ["realtime", "ww", "ww"]
    assert r["valid"] is True


def test_g1c_realtime() -> None:
    h = _three(S("x", 0, 20), [["poll"], ["send", "y", 40]], [P({"x": [[0, 20]]}), S("y", 0, 40)], False, [[0, 20]])
    r = h.check()
    cycle = _cycle(r, "G1c-realtime")
    assert sorted(e for s in cycle for e in s["edge"]) == ["realtime", "wr", "ww"]
    assert r["bad-anomaly-types"] == ["G1c-realtime"]
    assert r["anomalies"]["G1c-realtime"]["examples"][0]["ww"] is True
    assert h.check(ww_deps=True)["valid"] is True  # the cycle needs its ww edge


def test_bad_input() -> None:
    with pytest.raises(InputError, match="sent twice"):
        T().txn(0, S("x", 0, 1)).txn(1, S("x", 1, 1)).check()
    with pytest.raises(InputError, match="micro-op"):
        T().inv(0, ["send", "x", 1], ["frob"]).end(0, "info").check()
    with pytest.raises(InputError, match="unknown anomaly"):
        T().check(allow=["G2"])
    assert set(ANOMALY_TYPES) >= {"G0", "G1c-realtime", "unseen", "int-send-skip"}


# -- property: cycles reported iff a brute-force dependency graph has them ------------------------


@st.composite
def small_histories(draw: st.DrawFn) -> tuple[T, list]:
    n = draw(st.integers(2, 5))
    times = draw(st.permutations(list(range(2 * n))))
    spans = sorted((min(times[2 * i], times[2 * i + 1]), max(times[2 * i], times[2 * i + 1])) for i in range(n))
    free: list[int] = []  # per process, when its last op completed
    procs = []
    for a, b in spans:
        p = next((i for i, t in enumerate(free) if t < a), len(free))
        if p == len(free):
            free.append(b)
        else:
            free[p] = b
        procs.append(p)
    logs: dict[str, list[int]] = {"x": [], "y": []}
    writes: list[list] = [[] for _ in range(n)]
    v = 0
    for i in range(n):
        for k in draw(st.lists(st.sampled_from(["x", "y"]), max_size=2)):
            writes[i].append((k, v))
            logs[k].append(v)
            v += 1
    order = {k: draw(st.permutations(vals)) for k, vals in logs.items()}
    offset = {val: o for vals in order.values() for o, val in enumerate(vals)}
    reads = []
    for _ in range(n):
        rk = {}
        for k in draw(st.lists(st.sampled_from(["x", "y"]), max_size=2, unique=True)):
            vals = order[k]
            if vals:
                hi = draw(st.integers(0, len(vals) - 1))
                lo = draw(st.integers(0, hi))
                rk[k] = [[o, vals[o]] for o in range(lo, hi + 1)]
        reads.append(rk)
    events = sorted([(a, 0, i) for i, (a, _) in enumerate(spans)] + [(b, 1, i) for i, (_, b) in enumerate(spans)])
    h = T()
    for _, kind, i in events:
        done = [S(k, offset[val], val) for k, val in writes[i]] + ([P(reads[i])] if reads[i] else [])
        if not done:
            done = [P({})]
        if kind == 0:
            h.inv(procs[i], *[["send", m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in done])
        else:
            h.ok(procs[i], *done)
    return h, [(spans[i], procs[i], writes[i], reads[i]) for i in range(n)], offset


def _oracle(ops: list, offset: dict) -> tuple[bool, bool, bool]:
    """(some cycle over all dependencies, some cycle of ww edges only, some cycle without ww
    edges), from every pair."""
    writer = {val: i for i, (_, _, ws, _) in enumerate(ops) for _, val in ws}
    key_of = {val: k for _, _, ws, _ in ops for k, val in ws}
    full, ww, no_ww = nx.DiGraph(), nx.DiGraph(), nx.DiGraph()
    for a in writer:
        for b in writer:
            if key_of[a] == key_of[b] and offset[a] < offset[b] and writer[a] != writer[b]:
                full.add_edge(writer[a], writer[b])
                ww.add_edge(writer[a], writer[b])
    for i, (span, _, _, rk) in enumerate(ops):
        for pairs in rk.values():
            for _, val in pairs:
                if writer[val] != i:
                    full.add_edge(writer[val], i)
                    no_ww.add_edge(writer[val], i)
        for j, (span2, *_) in enumerate(ops):
            if span[1] < span2[0]:
                full.add_edge(i, j)
                no_ww.add_edge(i, j)
    has = lambda g: g.number_of_nodes() > 0 and not nx.is_directed_acyclic_graph(g)  # noqa: E731
    return has(full), has(ww), has(no_ww)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_histories())
def test_cycles_match_brute_force(case: tuple) -> None:
    h, ops, offset = case
    r = h.check()
    any_cycle, ww_cycle, no_ww_cycle = _oracle(ops, offset)
    found = [n for n in types(r) if n.startswith("G0") or n.startswith("G1c")]
    assert bool(found) == any_cycle, (found, r["anomalies"])
    assert ("G0" in found) == ww_cycle
    # with ww_deps, a G1c-class cycle is bad iff some cycle exists without any ww edge
    bad = [n for n in h.check(ww_deps=True)["bad-anomaly-types"] if n.startswith("G1c")]
    assert bool(bad) == no_ww_cycle, (bad, r["anomalies"])


def test_cli_checks_transactional_histories(tmp_path: Any) -> None:
    import json
    import subprocess
    import sys

    from checkers.history import write_jsonl

    path = tmp_path / "h.jsonl"
    h = T().inv(0, ["send", "x", 1], ["poll"]).inv(1, ["send", "y", 2], ["poll"])
    h.ok(0, S("x", 0, 1), P({"y": [[0, 2]]})).ok(1, S("y", 0, 2), P({"x": [[0, 1]]}))
    write_jsonl(from_dicts(h.ops, "t"), path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "harness.cli", "check", "-q", *args, str(path)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    for model in ("auto", "queue"):
        out = run("--model", model)
        assert out.returncode == 1, out.stderr
        assert json.loads(out.stdout)["bad-anomaly-types"] == ["G1c"]
    assert run("--ww-deps").returncode == 1  # wr edges only: not excused by --ww-deps
    assert run("--ww-deps", "--allow", "G1c").returncode == 0
    h = T().inv(0, ["send", "x", 1], ["poll"]).inv(1, ["send", "x", 2], ["send", "y", 3])
    h.ok(0, S("x", 0, 1), P({"y": [[0, 3]]})).ok(1, S("x", 1, 2), S("y", 0, 3))
    write_jsonl(from_dicts(_final(h, {"x": [[0, 1], [1, 2]], "y": [[0, 3]]}).ops, "t"), path)
    assert run().returncode == 1
    assert run("--ww-deps").returncode == 0  # the cycle needs a ww edge


def test_full_graph_search_agrees_on_valid_histories() -> None:
    h = synthetic_history(3000, 7)
    assert check_txn_queue(h, fast_path=False)["valid"] is True


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_dropping_a_read_is_caught(seed: int, pick: int) -> None:
    """Brute force: remove one polled pair from a valid history; the write it carried is then
    never read, so it is a lost write when a higher offset of its key was read, else unseen."""
    h = synthetic_history(300, seed)
    polled = [
        (i, j, k, n)
        for i, op in enumerate(h)
        if op.type == "ok" and op.f == "txn"
        for j, m in enumerate(op.value)
        if m[0] == "poll"
        for k, pairs in m[1].items()
        for n in range(len(pairs))
    ]
    if not polled:
        return
    i, j, k, n = polled[pick % len(polled)]
    offset, value = h.ops[i].value[j][1][k].pop(n)
    reads = [o for op in h if op.type == "ok" and op.f == "txn" for m in op.value if m[0] == "poll"
             for o, _ in m[1].get(k, [])]  # fmt: skip
    top = max(reads, default=-1)
    r = check_txn_queue(h)
    assert r["valid"] is False
    expected = "lost-write" if top > offset else "unseen"
    assert expected in types(r)
    assert any(e["value"] == value for e in r["anomalies"][expected]["examples"])


def test_cycle_through_an_indeterminate_transaction_read_in_part() -> None:
    h = T().inv(0, ["send", "x", 1]).inv(1, ["send", "x", 2], ["poll"]).end(0, "info")
    h.ok(1, S("x", 0, 2), P({"x": [[1, 1]]}))
    r = _final(h, {"x": [[0, 2], [1, 1]]}).check()
    cycle = _cycle(r, "G1c")
    assert sorted(e for s in cycle for e in s["edge"]) == ["wr", "ww"]
    assert any("-> info" in s["op"] for s in cycle)
