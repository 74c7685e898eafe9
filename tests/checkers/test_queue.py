"""Tests for the queue checker (checkers/queue.py): one test per anomaly, near misses, input errors,
and a Hypothesis property over a simulated Kafka-like log with injected faults."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from checkers.errors import InputError
from checkers.history import History, Op, from_dicts, read_jsonl
from checkers.queue import ANOMALY_TYPES, MAX_EXAMPLES, check_queue

K = "t0-0"
K2 = "t0-1"


class H:
    """A tiny history builder: each helper appends an invoke and (unless type is None) its completion."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def raw(self, process: Any, type: str, f: str, value: Any = None, key: Any = None) -> H:
        op: dict[str, Any] = {"process": process, "type": type, "f": f, "value": value}
        if key is not None:
            op["key"] = key
        self.ops.append(op)
        return self

    def send(self, p: int, v: Any, offset: Any = None, key: Any = K, type: str | None = "ok") -> H:
        self.raw(p, "invoke", "send", v, key)
        if type == "ok":
            self.raw(p, "ok", "send", [offset, v], key)
        elif type is not None:
            self.raw(p, type, "send", v, key)
        return self

    def poll(self, p: int, pairs: Any, key: Any = K, type: str | None = "ok") -> H:
        self.raw(p, "invoke", "poll", None, key)
        if type is not None:
            self.raw(p, type, "poll", pairs if type == "ok" else None, key)
        return self

    def mpoll(self, p: int, by_key: Any) -> H:
        self.raw(p, "invoke", "poll", None)
        return self.raw(p, "ok", "poll", by_key)

    def assign(self, p: int, keys: Any, f: str = "assign") -> H:
        self.raw(p, "invoke", f, keys)
        return self.raw(p, "ok", f, keys)

    def history(self) -> History:
        return from_dicts(self.ops, source="test.jsonl")

    def check(self, **kw: Any) -> dict[str, Any]:
        return check_queue(self.history(), **kw)


def examples(result: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return result["anomalies"][name]["examples"]


# -- clean histories ----------------------------------------------------------------------------


def test_clean_history_is_valid_and_counts() -> None:
    h = (
        H()
        .send(0, "a", 0)
        .send(0, "b", 1)
        .send(1, "c", 0, key=K2)
        .assign(2, [K, K2])
        .poll(2, [[0, "a"]])
        .poll(2, [[1, "b"]])
        .poll(2, [[0, "c"]], key=K2)
        .poll(2, [])
    )
    r = h.check()
    assert r["valid"] is True
    assert r["anomaly-types"] == [] and r["bad-anomaly-types"] == [] and r["anomalies"] == {}
    s = r["stats"]
    assert s["sends"] == {"ok": 3, "fail": 0, "info": 0, "ok-without-offset": 0}
    assert s["polls"] == {"ok": 4, "fail": 0, "info": 0, "empty": 1}
    assert s["keys"] == 2 and s["values-read"] == 3 and s["assigns"] == 1
    assert s["max-offset"] == {K: 1, K2: 0}
    assert r["recovered"]["count"] == 0 and r["unsent-reads"]["count"] == 0
    json.dumps(r)  # the result is plain JSON


def test_no_successful_poll_is_unknown() -> None:
    assert H().poll(0, None, type="fail").check()["valid"] == "unknown"
    assert H().check()["valid"] == "unknown"
    # with an ok send and no poll, the send is unseen: invalid unless allowed, then unknown
    h = H().send(0, "a", 0)
    assert h.check()["valid"] is False
    assert h.check(allow=["unseen"])["valid"] == "unknown"


# -- lost-write / unseen ------------------------------------------------------------------------


def test_lost_write() -> None:
    r = H().send(0, "a", 0).send(0, "b", 1).poll(1, [[1, "b"]]).check()
    assert r["valid"] is False
    assert r["anomaly-types"] == ["lost-write"]
    [ex] = examples(r, "lost-write")
    assert ex["key"] == K and ex["offset"] == 0 and ex["value"] == "a"
    assert ex["index"] == 1 and ex["max-read-offset"] == 1 and ex["max-read-index"] == 5


def test_lost_write_near_miss_is_unseen() -> None:
    # nothing above offset 1 was read: "b" is unseen, not lost; an unknown offset is unseen too
    r = H().send(0, "a", 0).send(0, "b", 1).send(0, "c", None).poll(1, [[0, "a"]]).check()
    assert r["anomaly-types"] == ["unseen"]
    assert r["anomalies"]["unseen"]["count"] == 2
    assert r["anomalies"]["unseen"]["by-key"] == {K: 2}
    assert {e["value"] for e in examples(r, "unseen")} == {"b", "c"}
    # read everything: valid
    assert H().send(0, "a", 0).send(0, "b", 1).poll(1, [[0, "a"], [1, "b"]]).check()["valid"] is True


def test_lost_write_with_inconsistent_offsets() -> None:
    # "a" was acknowledged at 0, but a poll saw "x" at 0 and read past it: "a" is lost, and 0 is
    # inconsistent; an info send ("x") that was read is recovered, not an anomaly.
    h = H().send(0, "a", 0).send(1, "x", type="info").send(2, "b", 1).poll(3, [[0, "x"], [1, "b"]])
    r = h.check()
    assert r["anomaly-types"] == ["inconsistent-offsets", "lost-write"]
    assert examples(r, "lost-write")[0]["value"] == "a"
    ex = examples(r, "inconsistent-offsets")[0]
    assert ex["key"] == K and ex["offset"] == 0 and {v["value"] for v in ex["values"]} == {"a", "x"}
    assert r["recovered"]["count"] == 1


def test_value_read_elsewhere_is_not_lost() -> None:
    # acknowledged at K:0 but read at K2:0 -> a duplicate (two keys), never lost or unseen
    r = H().send(0, "a", 0).send(0, "b", 1).poll(1, [[0, "a"]], key=K2).poll(1, [[1, "b"]]).check()
    assert r["anomaly-types"] == ["duplicate"]
    [ex] = examples(r, "duplicate")
    assert {(p["key"], p["offset"]) for p in ex["positions"]} == {(K, 0), (K2, 0)}


def test_unseen_counts_per_key() -> None:
    h = H().send(0, 1, 0).send(0, 2, 1).send(0, 3, 0, key=K2).poll(1, [], key=K)
    r = h.check()
    assert r["anomalies"]["unseen"]["count"] == 3
    assert r["anomalies"]["unseen"]["by-key"] == {K: 2, K2: 1}


# -- duplicate / inconsistent-offsets -----------------------------------------------------------


def test_duplicate_within_a_key() -> None:
    r = H().send(0, "a", 0).poll(1, [[0, "a"], [1, "a"]]).check()
    assert r["anomaly-types"] == ["duplicate"]
    [ex] = examples(r, "duplicate")
    assert ex["value"] == "a" and sorted(p["offset"] for p in ex["positions"]) == [0, 1]


def test_duplicate_between_send_ack_and_poll() -> None:
    r = H().send(0, "a", 3).poll(1, [[5, "a"]]).check()
    assert "duplicate" in r["anomaly-types"]


def test_duplicate_near_miss_same_offset_read_twice() -> None:
    r = H().send(0, "a", 0).poll(1, [[0, "a"]]).poll(2, [[0, "a"]]).assign(1, [K]).poll(1, [[0, "a"]])
    assert r.check()["valid"] is True


def test_inconsistent_offsets_between_polls() -> None:
    r = H().send(0, "a").send(0, "b").poll(1, [[0, "a"]]).poll(2, [[0, "b"]]).check()
    assert r["anomaly-types"] == ["inconsistent-offsets"]
    [ex] = examples(r, "inconsistent-offsets")
    assert ex["offset"] == 0 and [v["value"] for v in ex["values"]] == ["a", "b"]


def test_inconsistent_offsets_near_miss_different_keys() -> None:
    r = H().send(0, "a", 0).send(0, "b", 0, key=K2).poll(1, [[0, "a"]]).poll(1, [[0, "b"]], key=K2)
    assert r.check()["valid"] is True


# -- aborted-read / recovered -------------------------------------------------------------------


def test_aborted_read() -> None:
    r = H().send(0, "a", type="fail").poll(1, [[0, "a"]]).check()
    assert r["anomaly-types"] == ["aborted-read"]
    [ex] = examples(r, "aborted-read")
    assert ex["value"] == "a" and ex["read-offset"] == 0 and ex["index"] == 1 and ex["read-index"] == 3


def test_info_send_read_is_recovered_not_aborted() -> None:
    # an info send, and one whose invoke never completed, may have happened: reading them is fine
    h = H().send(0, "a", type="info").send(1, "b", type=None).poll(2, [[0, "a"], [1, "b"]])
    r = h.check()
    assert r["valid"] is True and r["anomaly-types"] == []
    assert r["recovered"]["count"] == 2
    assert r["stats"]["sends"]["info"] == 2


def test_unsent_reads_are_informational() -> None:
    r = H().poll(0, [[0, "ghost"]]).check()
    assert r["valid"] is True
    assert r["unsent-reads"]["count"] == 1 and r["unsent-reads"]["examples"][0]["value"] == "ghost"


# -- nonmonotonic-poll --------------------------------------------------------------------------


def _three() -> H:
    return H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2)


def test_nonmonotonic_poll_between_polls() -> None:
    r = _three().poll(1, [[0, "a"], [1, "b"]]).poll(1, [[1, "b"], [2, "c"]]).check()
    assert r["anomaly-types"] == ["nonmonotonic-poll"]
    [ex] = examples(r, "nonmonotonic-poll")
    assert ex["within"] is False and ex["prev-offset"] == 1 and ex["offset"] == 1 and ex["delta"] == 0
    assert ex["process"] == 1 and ex["key"] == K


def test_nonmonotonic_poll_within_one_poll() -> None:
    r = _three().poll(1, [[0, "a"], [2, "c"], [1, "b"]]).check()
    kinds = {(n, e.get("within")) for n in r["anomaly-types"] for e in examples(r, n)}
    assert ("nonmonotonic-poll", True) in kinds
    ex = next(e for e in examples(r, "nonmonotonic-poll") if e["within"])
    assert ex["prev-offset"] == 2 and ex["offset"] == 1


@pytest.mark.parametrize(
    "between",
    [
        lambda h: h.assign(1, [K]),
        lambda h: h.assign(1, [K], f="subscribe"),
        lambda h: h.poll(1, None, type="fail"),
    ],
    ids=["assign", "subscribe", "failed-poll"],
)
def test_nonmonotonic_poll_near_miss_reset(between: Any) -> None:
    h = _three().poll(1, [[0, "a"], [1, "b"]])
    between(h)
    h.poll(1, [[0, "a"], [1, "b"], [2, "c"]])
    assert h.check()["valid"] is True


def test_nonmonotonic_poll_near_miss_other_process_or_key() -> None:
    h = _three().send(0, "d", 0, key=K2).poll(1, [[0, "a"], [1, "b"]]).poll(2, [[0, "a"], [1, "b"]])
    h.poll(1, [[0, "d"]], key=K2).poll(1, [[2, "c"]])
    assert h.check()["valid"] is True


def test_crashed_consumer_restarts_under_new_process() -> None:
    # process 1 crashes (info); its successor 3 may poll from the beginning again
    h = _three().poll(1, [[0, "a"], [1, "b"]]).poll(1, None, type="info").poll(3, [[0, "a"], [1, "b"], [2, "c"]])
    assert h.check()["valid"] is True


# -- poll-skip ----------------------------------------------------------------------------------


def test_poll_skip_between_polls() -> None:
    r = _three().poll(1, [[0, "a"]]).poll(1, [[2, "c"]]).poll(2, [[1, "b"]]).check()
    assert r["anomaly-types"] == ["poll-skip"]
    [ex] = examples(r, "poll-skip")
    assert ex["within"] is False and ex["after-assign"] is False
    assert ex["skipped"] == [[1, "b"]] and ex["skipped-count"] == 1 and ex["delta"] == 2


def test_poll_skip_within_one_poll() -> None:
    r = _three().poll(1, [[0, "a"], [2, "c"]]).poll(2, [[1, "b"]]).check()
    assert r["anomaly-types"] == ["poll-skip"]
    [ex] = examples(r, "poll-skip")
    assert ex["within"] is True and ex["skipped"] == [[1, "b"]]


def test_poll_skip_uses_offsets_observed_later() -> None:
    # offset 1 is only known from a later poll by another process
    h = H().poll(1, [[0, "a"]]).poll(1, [[2, "c"]]).poll(2, [[0, "a"], [1, "b"], [2, "c"]])
    r = h.check()
    assert r["anomaly-types"] == ["poll-skip"]


def test_poll_skip_near_miss_unknown_offsets() -> None:
    # nobody observed offset 1 (gaps happen, e.g. transaction markers): no skip
    h = H().send(0, "a", 0).send(0, "c", 2).poll(1, [[0, "a"]]).poll(1, [[2, "c"]]).poll(2, [[0, "a"], [2, "c"]])
    assert h.check()["valid"] is True


def test_poll_skip_after_assign_past_old_position() -> None:
    h = _three().send(0, "d", 3).poll(1, [[0, "a"]]).assign(1, [K]).poll(1, [[3, "d"]]).poll(2, [[0, "a"]])
    h.poll(2, [[1, "b"], [2, "c"], [3, "d"]])
    r = h.check()
    assert r["anomaly-types"] == ["poll-skip"]
    [ex] = examples(r, "poll-skip")
    assert ex["after-assign"] is True and ex["skipped"] == [[1, "b"], [2, "c"]]


def test_poll_skip_near_miss_after_subscribe() -> None:
    h = _three().poll(1, [[0, "a"]]).assign(1, [K], f="subscribe").poll(1, [[2, "c"]]).poll(2, [[1, "b"]])
    assert h.check()["valid"] is True


def test_poll_skip_examples_capped() -> None:
    h = H()
    for i in range(100):
        h.send(0, i, i)
    h.poll(1, [[i, i] for i in range(0, 100, 2)]).poll(2, [[i, i] for i in range(100)])
    r = h.check()
    assert r["anomalies"]["poll-skip"]["count"] == 49
    assert len(examples(r, "poll-skip")) == MAX_EXAMPLES


# -- nonmonotonic-send --------------------------------------------------------------------------


def test_nonmonotonic_send() -> None:
    h = H().send(0, "a", 5).send(0, "b", 3).poll(1, [[3, "b"], [4, "x"], [5, "a"]])
    r = h.check()
    assert r["anomaly-types"] == ["nonmonotonic-send"]
    [ex] = examples(r, "nonmonotonic-send")
    assert ex["prev-offset"] == 5 and ex["offset"] == 3 and ex["value"] == "b" and ex["process"] == 0


def test_nonmonotonic_send_near_misses() -> None:
    # different processes, different keys, or an unknown offset in between are fine
    h = (
        H()
        .send(0, "a", 5)
        .send(1, "b", 3)
        .send(0, "c", 0, key=K2)
        .send(0, "d", None)
        .send(0, "e", 6)
        .poll(2, [[3, "b"], [4, "d"], [5, "a"], [6, "e"]])
        .poll(2, [[0, "c"]], key=K2)
    )
    assert h.check()["valid"] is True


# -- multi-partition polls ----------------------------------------------------------------------


def test_map_polls() -> None:
    h = H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2).send(0, "x", 0, key=K2)
    h.assign(1, [K, K2]).mpoll(1, {K: [[0, "a"]], K2: [[0, "x"]]}).mpoll(1, {K: [[2, "c"]], K2: []})
    h.mpoll(2, {K: [[0, "a"], [1, "b"], [2, "c"]]})
    r = h.check()
    assert r["anomaly-types"] == ["poll-skip"]
    assert examples(r, "poll-skip")[0]["skipped"] == [[1, "b"]]
    assert r["stats"]["polls"]["ok"] == 3


def test_map_polls_integer_keys_match_string_keys() -> None:
    # sends with integer keys, map polls with (JSON) string keys
    h = H().send(0, "a", 0, key=7).mpoll(1, {"7": [[0, "a"]]})
    assert h.check()["valid"] is True


# -- policy -------------------------------------------------------------------------------------


def test_allow_policy() -> None:
    h = _three().poll(1, [[0, "a"]]).poll(1, [[2, "c"]])  # poll-skip + lost-write ("b")
    r = h.check()
    assert r["anomaly-types"] == ["lost-write", "poll-skip"] and r["valid"] is False
    r = h.check(allow=["lost-write"])
    assert "poll-skip" in r["bad-anomaly-types"] and r["valid"] is False and "allowed-by-subscribe" not in r
    r = h.check(allow=("lost-write", "poll-skip"))
    assert r["valid"] is True and r["anomaly-types"] == ["lost-write", "poll-skip"]
    assert r["bad-anomaly-types"] == []
    assert h.check(allow="poll-skip")["bad-anomaly-types"] == ["lost-write"]  # one name as a string


def test_allow_unknown_name_is_an_error() -> None:
    with pytest.raises(InputError, match="unknown anomaly"):
        H().check(allow=["G0"])
    assert set(ANOMALY_TYPES) == {
        "commit-regression",
        "start-past-commit",
        "stale-generation-commit",
        "lost-write",
        "duplicate",
        "inconsistent-offsets",
        "aborted-read",
        "nonmonotonic-poll",
        "poll-skip",
        "nonmonotonic-send",
        "unseen",
    }


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "line", "match"),
    [
        (lambda: H().raw(0, "invoke", "send", "a", K).raw(0, "ok", "send", "a", K), 2, r"\[offset, value\]"),
        (lambda: H().raw(0, "invoke", "send", "a", K).raw(0, "ok", "send", [0, "a", 1], K), 2, "offset"),
        (lambda: H().raw(0, "invoke", "send", "a", K).raw(0, "ok", "send", ["0", "a"], K), 2, "integer"),
        (lambda: H().raw(0, "invoke", "send", "a", K).raw(0, "ok", "send", [1.5, "a"], K), 2, "integer"),
        (lambda: H().raw(0, "invoke", "send", "a", K).raw(0, "ok", "send", [0, "b"], K), 2, "invoked"),
        (lambda: H().raw(0, "invoke", "send", "a"), 1, "key"),
        (lambda: H().send(0, "a", 0).send(1, "a", type="fail"), 3, "sent twice.*line 1"),
        (lambda: H().send(0, "a", 0).poll(1, "nope"), 4, "poll ok value"),
        (lambda: H().send(0, "a", 0).poll(1, [0, "a"]), 4, "pair"),
        (lambda: H().send(0, "a", 0).poll(1, [[0, "a", 1]]), 4, "pair"),
        (lambda: H().send(0, "a", 0).poll(1, [["0", "a"]]), 4, "offset must be"),
        (lambda: H().send(0, "a", 0).poll(1, [[True, "a"]]), 4, "offset must be"),
        (lambda: H().send(0, "a", 0).poll(1, [[-1, "a"]]), 4, "offset must be"),
        (lambda: H().send(0, "a", 0).poll(1, [[0, "a"]], key=None), 4, "without a key"),
        (lambda: H().send(0, "a", 0).mpoll(1, {K: "x"}), 4, "must be a list"),
        (lambda: H().assign(1, K), 1, "assign value must be a list"),
    ],
)
def test_bad_shapes_name_the_line(build: Any, line: int, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        build().check()
    assert err.value.file == "test.jsonl"
    assert err.value.line == line


def test_bad_input_from_a_jsonl_file_names_the_real_line(tmp_path: Any) -> None:
    lines = [
        {"index": 0, "process": 0, "type": "invoke", "f": "send", "key": K, "value": 1},
        {"index": 1, "process": 0, "type": "ok", "f": "send", "key": K, "value": [0, 1]},
        {"index": 2, "process": 1, "type": "invoke", "f": "poll", "key": K, "value": None},
        {"index": 3, "process": 1, "type": "ok", "f": "poll", "key": K, "value": [[0.5, 1]]},
    ]
    path = tmp_path / "history.jsonl"
    path.write_text(
        "\n".join(json.dumps(x) for x in lines[:2]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[2:]) + "\n"
    )
    with pytest.raises(InputError) as err:
        check_queue(read_jsonl(path))
    assert err.value.line == 5 and err.value.file == str(path)
    assert str(err.value).startswith(f"{path}:5: ")


# -- property: a simulated correct log is valid; one injected fault is caught -------------------

HOLE = object()  # a log entry removed after it was acknowledged


class Sim:
    """A Kafka-like log with random producers and consumers, written out as a history."""

    def __init__(self, rnd: random.Random, nkeys: int, slots: int) -> None:
        self.rnd = rnd
        self.keys = [f"t0-{i}" for i in range(nkeys)]
        self.log: dict[str, list[Any]] = {k: [] for k in self.keys}
        self.ops: list[dict[str, Any]] = []
        self.slots = slots
        self.proc = list(range(slots))  # current process id of each worker
        self.consumer = [rnd.random() < 0.5 for _ in range(slots)]
        self.assigned: list[list[str]] = [[] for _ in range(slots)]
        self.position: list[dict[str, int]] = [{} for _ in range(slots)]
        self.pending: list[tuple | None] = [None] * slots
        self.next_value = 0
        self.fresh = 1000

    def emit(self, p: int, type: str, f: str, value: Any, key: str | None = None) -> None:
        op: dict[str, Any] = {"process": p, "type": type, "f": f, "value": value}
        if key is not None:
            op["key"] = key
        self.ops.append(op)

    def read(self, key: str, start: int, n: int) -> tuple[list[list[Any]], int]:
        entries = self.log[key][start : start + n]
        pairs = [[start + i, v] for i, v in enumerate(entries) if v is not HOLE]
        return pairs, start + len(entries)

    def crash(self, s: int) -> None:
        self.proc[s] += self.slots
        self.assigned[s] = []
        self.position[s] = {}

    def step(self) -> None:
        rnd = self.rnd
        s = rnd.randrange(self.slots)
        p = self.proc[s]
        pend = self.pending[s]
        if pend is None:
            if not self.consumer[s]:
                key = rnd.choice(self.keys)
                v = self.next_value
                self.next_value += 1
                self.emit(p, "invoke", "send", v, key)
                self.pending[s] = ("send", key, v)
            elif not self.assigned[s] or rnd.random() < 0.1:
                keys = rnd.sample(self.keys, rnd.randint(1, len(self.keys)))
                self.emit(p, "invoke", "assign", keys)
                self.pending[s] = ("assign", keys)
            elif rnd.random() < 0.3:
                self.emit(p, "invoke", "poll", None)
                self.pending[s] = ("mpoll",)
            else:
                key = rnd.choice(self.assigned[s])
                self.emit(p, "invoke", "poll", None, key)
                self.pending[s] = ("poll", key)
            return
        self.pending[s] = None
        kind = pend[0]
        outcome = rnd.choices(["ok", "fail", "info"], [8, 1, 1])[0]
        if kind == "send":
            _, key, v = pend
            if outcome == "ok":
                self.log[key].append(v)
                offset = len(self.log[key]) - 1 if rnd.random() < 0.9 else None
                self.emit(p, "ok", "send", [offset, v], key)
            elif outcome == "fail":
                self.emit(p, "fail", "send", v, key)
            else:
                if rnd.random() < 0.5:
                    self.log[key].append(v)
                self.emit(p, "info", "send", v, key)
                self.crash(s)
        elif kind == "assign":
            keys = pend[1]
            if outcome == "info":
                self.emit(p, "info", "assign", keys)
                self.crash(s)
            else:
                self.assigned[s] = keys
                self.position[s] = {k: 0 for k in keys}
                self.emit(p, "ok", "assign", keys)
        else:
            keys = self.assigned[s] if kind == "mpoll" else [pend[1]]
            if outcome == "info":
                self.emit(p, "info", "poll", None, None if kind == "mpoll" else keys[0])
                self.crash(s)
                return
            if outcome == "fail":
                for k in keys:  # a failed poll may still move the position forward
                    if rnd.random() < 0.5:
                        self.position[s][k] += rnd.randint(0, 3)
                self.emit(p, "fail", "poll", None, None if kind == "mpoll" else keys[0])
                return
            result = {}
            for k in keys:
                pairs, self.position[s][k] = self.read(k, self.position[s][k], rnd.randint(0, 3))
                result[k] = pairs
            if kind == "mpoll":
                self.emit(p, "ok", "poll", result)
            else:
                self.emit(p, "ok", "poll", result[keys[0]], keys[0])

    def fresh_process(self) -> int:
        self.fresh += 1
        return self.fresh

    def ok_send(self, p: int, key: str) -> tuple[Any, int]:
        v = self.next_value
        self.next_value += 1
        self.emit(p, "invoke", "send", v, key)
        self.log[key].append(v)
        offset = len(self.log[key]) - 1
        self.emit(p, "ok", "send", [offset, v], key)
        return v, offset

    def final_polls(self, rewind: bool = False) -> None:
        """Fresh consumers assign every key and read each partition from the start to the end."""
        for key in self.keys:
            p = self.fresh_process()
            self.emit(p, "invoke", "assign", [key])
            self.emit(p, "ok", "assign", [key])
            pos = 0
            while pos < len(self.log[key]):
                pairs, new = self.read(key, pos, self.rnd.randint(1, 4))
                self.emit(p, "invoke", "poll", None, key)
                self.emit(p, "ok", "poll", pairs, key)
                if rewind and pairs:
                    rewind = False
                    new = pairs[-1][0]  # the consumer forgets it read the last record
                pos = new

    def history(self) -> History:
        return from_dicts(self.ops, source="sim")


def _simulate(rnd: random.Random, steps: int) -> Sim:
    sim = Sim(rnd, nkeys=rnd.randint(1, 3), slots=rnd.randint(1, 5))
    for _ in range(steps):
        sim.step()
    return sim


SIM_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SIM_SETTINGS
@given(rnd=st.randoms(use_true_random=False), steps=st.integers(0, 150))
def test_simulated_correct_log_is_valid(rnd: random.Random, steps: int) -> None:
    sim = _simulate(rnd, steps)
    sim.final_polls()
    r = check_queue(sim.history())
    assert r["anomaly-types"] == [], r["anomalies"]
    assert r["valid"] == (True if r["stats"]["polls"]["ok"] else "unknown")
    assert r["unsent-reads"]["count"] == 0


FAULTS = {
    "drop": ({"lost-write"}, {"lost-write", "poll-skip"}),
    "duplicate": ({"duplicate"}, {"duplicate"}),
    "swap": ({"inconsistent-offsets"}, {"inconsistent-offsets", "duplicate"}),
    "aborted": ({"aborted-read"}, {"aborted-read"}),
    "rewind": ({"nonmonotonic-poll"}, {"nonmonotonic-poll"}),
}


@SIM_SETTINGS
@given(rnd=st.randoms(use_true_random=False), steps=st.integers(0, 120), fault=st.sampled_from(sorted(FAULTS)))
def test_simulated_single_fault_is_detected(rnd: random.Random, steps: int, fault: str) -> None:
    sim = _simulate(rnd, steps)
    key = rnd.choice(sim.keys)
    p = sim.fresh_process()
    target = None
    if fault == "drop":  # acknowledged, then lost from the log
        target, offset = sim.ok_send(p, key)
        sim.ok_send(p, key)
        sim.log[key][offset] = HOLE
    elif fault == "duplicate":  # the log holds the value twice
        target, _ = sim.ok_send(p, key)
        sim.log[key].append(target)
    elif fault == "swap":  # two acknowledged records trade offsets
        _, o1 = sim.ok_send(p, key)
        _, o2 = sim.ok_send(p, key)
        log = sim.log[key]
        log[o1], log[o2] = log[o2], log[o1]
    elif fault == "aborted":  # a send reported failed is in the log
        target = sim.next_value
        sim.next_value += 1
        sim.emit(p, "invoke", "send", target, key)
        sim.log[key].append(target)
        sim.emit(p, "fail", "send", target, key)
    elif fault == "rewind":  # a consumer re-reads a record without a new assignment
        sim.ok_send(p, key)
    sim.final_polls(rewind=fault == "rewind")
    r = check_queue(sim.history())
    must, may = FAULTS[fault]
    types = set(r["anomaly-types"])
    assert must <= types <= may, (fault, r["anomalies"])
    assert r["valid"] is False
    if fault == "drop":
        assert [e["value"] for e in examples(r, "lost-write")] == [target]
    elif fault in ("duplicate", "aborted"):
        name = "duplicate" if fault == "duplicate" else "aborted-read"
        assert [e["value"] for e in examples(r, name)] == [target]


# -- speed --------------------------------------------------------------------------------------


def _big_history(n_operations: int, keys: int = 8, producers: int = 8, consumers: int = 8) -> History:
    """A correct history built from Op records directly (no per-dict validation): round-robin
    producers append, consumers read one record per poll in order."""
    rnd = random.Random(7)
    ops: list[Op] = []
    logs: list[list[int]] = [[] for _ in range(keys)]
    pos = [[0] * keys for _ in range(consumers)]
    for value in range(n_operations // 2):
        k = rnd.randrange(keys)
        p = rnd.randrange(producers)
        key = f"t0-{k}"
        logs[k].append(value)
        ops.append(Op(len(ops), "invoke", p, "send", value, key=key, line=len(ops) + 1))
        ops.append(Op(len(ops), "ok", p, "send", [len(logs[k]) - 1, value], key=key, line=len(ops) + 1))
        c = rnd.randrange(consumers)
        k = rnd.randrange(keys)
        key = f"t0-{k}"
        start = pos[c][k]
        pairs = [[o, logs[k][o]] for o in range(start, min(start + 3, len(logs[k])))]
        pos[c][k] = start + len(pairs)
        cp = producers + c
        ops.append(Op(len(ops), "invoke", cp, "poll", None, key=key, line=len(ops) + 1))
        ops.append(Op(len(ops), "ok", cp, "poll", pairs, key=key, line=len(ops) + 1))
    final = producers + consumers
    for k in range(keys):
        ops.append(Op(len(ops), "invoke", final, "poll", None, key=f"t0-{k}", line=len(ops) + 1))
        ops.append(
            Op(len(ops), "ok", final, "poll", [[o, v] for o, v in enumerate(logs[k])], key=f"t0-{k}", line=len(ops) + 1)
        )
    return History(ops, "big")


def test_large_history_is_valid() -> None:
    """A big correct history stays valid (its speed is measured in benchmarks/checkers.py)."""
    history = _big_history(50_000)
    r = check_queue(history)
    assert r["valid"] is True, r["anomaly-types"]
    assert r["stats"]["ops"] == len(history)


# -- subscribe: Jepsen's allowed set, and committed offsets ---------------------------------------


def test_subscribe_allows_poll_skip_and_nonmonotonic_poll_between_polls() -> None:
    h = _three().send(0, "d", 3).assign(1, [K], f="subscribe")
    h.mpoll(1, {K: [[0, "a"], [1, "b"]]}).mpoll(1, {K: [[0, "a"]]}).mpoll(1, {K: [[3, "d"]]})
    h.poll(2, [[2, "c"]])
    r = h.check()
    assert set(r["anomaly-types"]) == {"nonmonotonic-poll", "poll-skip"}
    assert r["bad-anomaly-types"] == [] and r["valid"] is True
    assert r["allowed-by-subscribe"] == ["nonmonotonic-poll", "poll-skip"]
    # the same history without the subscribe is invalid
    assign_only = _three().send(0, "d", 3).assign(1, [K])
    assign_only.mpoll(1, {K: [[0, "a"], [1, "b"]]}).mpoll(1, {K: [[0, "a"]]}).mpoll(1, {K: [[3, "d"]]})
    assign_only.poll(2, [[2, "c"]])
    assert assign_only.check()["valid"] is False


def test_subscribe_does_not_allow_anomalies_within_one_poll() -> None:
    r = _three().assign(1, [K], f="subscribe").mpoll(1, {K: [[0, "a"], [2, "c"]]}).check()
    assert "poll-skip" in r["bad-anomaly-types"] and r["valid"] is False and "allowed-by-subscribe" not in r


def commit(h: H, p: int, offsets: dict[str, int], type: str = "ok") -> H:
    h.raw(p, "invoke", "commit", None)
    return h.raw(p, type, "commit", offsets if type == "ok" else None)


def test_commit_regression() -> None:
    h = _three().poll(1, [[0, "a"], [1, "b"], [2, "c"]])
    commit(h, 1, {K: 3})
    commit(h, 2, {K: 1, K2: 0})
    r = h.check()
    assert r["bad-anomaly-types"] == ["commit-regression"]
    [ex] = examples(r, "commit-regression")
    assert ex["offset"] == 1 and ex["prev-offset"] == 3 and ex["process"] == 2 and ex["prev-process"] == 1


def test_commit_regression_near_misses() -> None:
    h = _three().poll(1, [[0, "a"], [1, "b"], [2, "c"]])
    commit(h, 1, {K: 3})
    commit(h, 2, {K: 1}, type="fail")  # refused: nothing committed
    commit(h, 2, {K2: 1})  # another key
    commit(h, 2, {K: 3})  # the same offset again
    # overlapping commits are not ordered: 3 invoked while 5 was in flight
    h.raw(3, "invoke", "commit", None).raw(4, "invoke", "commit", None)
    h.raw(4, "ok", "commit", {K: 5}).raw(3, "ok", "commit", {K: 4})
    assert h.check()["valid"] is True


def test_commit_value_must_be_a_map_of_offsets() -> None:
    with pytest.raises(InputError, match="commit ok value must be a map"):
        commit(H(), 1, [1]).check()  # type: ignore[arg-type]
    with pytest.raises(InputError, match="offset must be an integer"):
        commit(H(), 1, {K: "x"}).check()  # type: ignore[dict-item]


def test_stale_generation_commit() -> None:
    h = _three()
    commit(h, 1, {"generation": 3, "offsets": {K: 1}})  # type: ignore[dict-item]
    commit(h, 2, {"generation": 2, "offsets": {K: 2}})  # type: ignore[dict-item]
    r = h.check()
    assert "stale-generation-commit" in r["bad-anomaly-types"] and "commit-regression" not in r["anomaly-types"]
    [ex] = examples(r, "stale-generation-commit")
    assert ex["generation"] == 2 and ex["later-generation"] == 3 and ex["process"] == 2
    # overlapping commits, the same generation, or a later one: fine
    ok = _three()
    commit(ok, 1, {"generation": 3, "offsets": {K: 1}})  # type: ignore[dict-item]
    commit(ok, 2, {"generation": 3, "offsets": {}})  # type: ignore[dict-item]
    ok.raw(3, "invoke", "commit", None).raw(4, "invoke", "commit", None)
    ok.raw(4, "ok", "commit", {"generation": 5, "offsets": {}}).raw(3, "ok", "commit", {"generation": 4, "offsets": {}})
    assert "stale-generation-commit" not in ok.check()["anomaly-types"]
    with pytest.raises(InputError, match="generation must be an integer"):
        commit(H(), 1, {"generation": "x", "offsets": {}}).check()  # type: ignore[dict-item]


def test_stale_generation_commit_of_nothing_is_not_judged() -> None:
    # a member with no partitions "commits" nothing: the workload completes it without the coordinator
    h = _three()
    commit(h, 1, {"generation": 3, "offsets": {K: 1}})  # type: ignore[dict-item]
    commit(h, 2, {"generation": 2, "offsets": {}})  # type: ignore[dict-item]
    assert "stale-generation-commit" not in h.check()["anomaly-types"]


# -- start-past-commit: an assignment that starts past what the group committed --------------------


def join(h: H, p: int, start: dict[str, int], committed: Any = None, type: str = "ok", read: Any = None) -> H:
    """A subscribed poll that began an assignment: its completion records where each key starts."""
    h.raw(p, "invoke", "poll", None)
    assigned: dict[str, Any] = {"generation": 1, "start": start}
    if committed is not False:
        assigned["committed"] = committed if committed is not None else dict(start)
    h.raw(p, type, "poll", (read or {}) if type == "ok" else None)
    h.ops[-1]["assigned"] = assigned
    return h


def _five() -> H:
    """Offsets 0-4 of K hold a-e (process 4 reads them all); process 1 subscribed, read 0-2, committed 3."""
    h = H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2).send(0, "d", 3).send(0, "e", 4)
    h.assign(1, [K], f="subscribe").assign(2, [K], f="subscribe")
    h.mpoll(1, {K: [[0, "a"], [1, "b"], [2, "c"]]}).poll(4, [[0, "a"], [1, "b"], [2, "c"], [3, "d"], [4, "e"]])
    return commit(h, 1, {"generation": 1, "offsets": {K: 3}})  # type: ignore[dict-item]


def test_start_past_commit() -> None:
    h = join(_five(), 2, {K: 5})  # the group committed 3: offsets 3 and 4 are never delivered
    r = h.check()
    assert r["bad-anomaly-types"] == ["start-past-commit"] and r["valid"] is False  # not allowed by subscribe
    [ex] = examples(r, "start-past-commit")
    assert ex["key"] == K and ex["start"] == 5 and ex["committed"] == 5 and ex["max-commit"] == 3
    assert ex["skipped"] == [[3, "d"], [4, "e"]] and ex["skipped-count"] == 2
    assert ex["process"] == 2 and ex["generation"] == 1 and ex["index"] == len(h.ops) - 1
    assert ex["commit-index"] == len(h.ops) - 3  # the commit's completion
    assert r["start-before-commit"] == {"count": 0, "examples": []}
    assert r["stats"]["assignment-starts"] == 1


def test_start_past_commit_near_misses() -> None:
    # at the commit, or before it (re-delivery: allowed, counted)
    r = join(_five(), 2, {K: 3}).check()
    assert r["valid"] is True and r["start-before-commit"]["count"] == 0
    r = join(_five(), 2, {K: 1}).check()
    assert "start-past-commit" not in r["anomaly-types"]
    [ex] = r["start-before-commit"]["examples"]
    assert ex["start"] == 1 and ex["min-commit"] == 3
    # past the commit, but no record is known in between
    h = H().send(0, "a", 0).assign(1, [K], f="subscribe").mpoll(1, {K: [[0, "a"]]})
    commit(h, 1, {K: 1})
    assert "start-past-commit" not in join(h, 2, {K: 6}).check()["anomaly-types"]
    # another key's commit says nothing about this one; a start of 0 before any commit is fine
    assert "start-past-commit" not in join(_five(), 2, {K2: 0}).check()["anomaly-types"]


def test_start_past_commit_not_over_records_the_member_read_itself() -> None:
    # process 1 read 0-2, committed only 1, and kept its position 3 for the partition it retained
    h = H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2).assign(1, [K], f="subscribe")
    h.mpoll(1, {K: [[0, "a"], [1, "b"], [2, "c"]]})
    commit(h, 1, {K: 1})
    assert "start-past-commit" not in join(h, 1, {K: 3}).check()["anomaly-types"]

    def read_two() -> H:
        h = H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2).assign(1, [K], f="subscribe")
        h.mpoll(1, {K: [[0, "a"], [1, "b"]]})
        commit(h, 1, {K: 1})
        return h.assign(2, [K], f="subscribe").poll(4, [[0, "a"], [1, "b"], [2, "c"]])

    # ... but another process starting there skips offsets 1 and 2
    [ex] = examples(join(read_two(), 2, {K: 3}).check(), "start-past-commit")
    assert ex["skipped"] == [[1, "b"], [2, "c"]] and ex["skipped-count"] == 2
    [ex] = examples(join(read_two(), 1, {K: 3}).check(), "start-past-commit")  # process 1 never read offset 2
    assert ex["skipped"] == [[2, "c"]]


def test_start_past_commit_concurrent_commits_may_be_what_was_fetched() -> None:
    # a commit of 5 invoked while the poll was open: its OffsetFetch may have seen it
    h = _five().raw(2, "invoke", "poll", None).raw(3, "invoke", "commit", None)
    h.raw(3, "ok", "commit", {K: 5}).raw(2, "ok", "poll", {})
    h.ops[-1]["assigned"] = {"start": {K: 5}}
    assert "start-past-commit" not in h.check()["anomaly-types"]
    # ... or in flight when the poll began, completing after it
    h = _five().raw(3, "invoke", "commit", None)
    join(h, 2, {K: 5}).raw(3, "ok", "commit", {K: 5})
    assert "start-past-commit" not in h.check()["anomaly-types"]
    # ... but not one invoked after the poll completed
    h = join(_five(), 2, {K: 5})
    commit(h, 3, {K: 5})
    assert "start-past-commit" in h.check()["anomaly-types"]


def test_start_past_commit_info_and_fail_commits() -> None:
    # an info commit of 5 may have taken effect at any time after its invocation
    h = _five().raw(3, "invoke", "commit", None).raw(3, "info", "commit", {"generation": 1, "offsets": {K: 5}})
    assert "start-past-commit" not in join(h, 2, {K: 5}).check()["anomaly-types"]
    # one with no value may have committed anything: the start is not judged
    h = _five().raw(3, "invoke", "commit", None).raw(3, "info", "commit", None)
    r = join(h, 2, {K: 5}).check()
    assert "start-past-commit" not in r["anomaly-types"] and r["start-before-commit"]["unjudged-starts"] == 1
    # an invocation that never completed is an info commit of unknown offsets too
    h = _five().raw(3, "invoke", "commit", None)
    assert "start-past-commit" not in join(h, 2, {K: 5}).check()["anomaly-types"]
    # a failed commit of 5 did not happen
    h = _five().raw(3, "invoke", "commit", None).raw(3, "fail", "commit", None)
    assert "start-past-commit" in join(h, 2, {K: 5}).check()["anomaly-types"]


def test_start_past_commit_against_a_replaced_commit() -> None:
    # 5 was committed, then 3 (a regression): a start at 5 skips 3 and 4
    h = _five()
    commit(h, 3, {K: 5})
    commit(h, 1, {K: 3})
    r = join(h, 2, {K: 5}).check()
    assert set(r["bad-anomaly-types"]) == {"commit-regression", "start-past-commit"}
    assert examples(r, "start-past-commit")[0]["max-commit"] == 3
    # with the two commits overlapping, 5 may be the later one: fine
    h = _five().raw(3, "invoke", "commit", None).raw(4, "invoke", "commit", None)
    h.raw(3, "ok", "commit", {K: 5}).raw(4, "ok", "commit", {K: 3})
    assert "start-past-commit" not in join(h, 2, {K: 5}).check()["anomaly-types"]


def test_start_past_commit_before_any_commit_and_on_failed_polls() -> None:
    # nothing committed: consumers start at the beginning
    h = H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2).assign(1, [K], f="subscribe")
    r = join(h, 1, {K: 2}, committed={K: -1}, type="fail").check()  # joined, then its fetch failed
    [ex] = examples(r, "start-past-commit")
    assert ex["max-commit"] == 0 and ex["commit-index"] is None and ex["committed"] == -1
    assert ex["skipped"] == [[0, "a"], [1, "b"]]
    assert "start-past-commit" not in join(H().send(0, "a", 0), 1, {K: 0}, committed=False).check()["anomaly-types"]


def test_histories_without_assigned_are_unchanged() -> None:
    r = _five().mpoll(2, {K: [[3, "d"], [4, "e"]]}).check()
    assert r["valid"] is True and "start-before-commit" not in r and "assignment-starts" not in r["stats"]


@pytest.mark.parametrize(
    ("assigned", "match"),
    [
        ([1], "assigned must be a map"),
        ({"begin": {}}, "assigned must be a map"),
        ({"start": {K: -1}}, "non-negative"),
        ({"start": {K: "1"}}, "non-negative"),
        ({"start": {K: 1}, "committed": {K: "x"}}, "non-negative"),
        ({"start": {K: 1}, "committed": [1]}, "committed must be a map"),
        ({"start": {K: 1}, "generation": "g"}, "generation must be an integer"),
    ],
)
def test_assigned_bad_shapes_name_the_line(assigned: Any, match: str) -> None:
    h = H().raw(1, "invoke", "poll", None).raw(1, "ok", "poll", {})
    h.ops[-1]["assigned"] = assigned
    with pytest.raises(InputError, match=match) as err:
        h.check()
    assert err.value.line == 2


def _oracle(ops: list[dict[str, Any]], known: dict[str, set[int]]) -> tuple[int, int]:
    """start-past-commit and start-before-commit counts by the definition, quadratically."""
    calls: dict[int, int] = {}
    spans = []  # (call, ret | None, type, value) of each operation
    for i, op in enumerate(ops):
        if op["type"] == "invoke":
            calls[op["process"]] = len(spans)
            spans.append([i, None, "info", op])
        else:
            span = spans[calls.pop(op["process"])]
            span[1], span[2], span[3] = i, op["type"], op
    past = before = 0
    commits = [s for s in spans if s[3]["f"] == "commit" and s[2] != "fail"]
    for pcall, pret, _, op in spans:
        if op["f"] != "poll" or "assigned" not in op:
            continue
        if any(c[0] < pret and not isinstance(c[3].get("value"), dict) for c in commits):
            continue  # an info commit of unknown offsets
        for key, start in op["assigned"]["start"].items():
            of = [
                (c, c[3]["value"]["offsets"][key])
                for c in commits
                if key in (c[3]["value"] or {"offsets": {}})["offsets"]
            ]
            done_before = [c for c, _ in of if c[2] == "ok" and c[1] < pcall]
            cands = [
                o
                for c, o in of
                if c[0] < pret and not (c[2] == "ok" and any(c[1] < d[0] for d in done_before))  # replaced for sure
            ]
            if not done_before:
                cands.append(0)
            if start > max(cands) and any(max(cands) <= o < start for o in known[key]):
                past += 1
            elif start < min(cands):
                before += 1
    return past, before


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    n=st.integers(1, 14),
    known=st.sets(st.integers(0, 9), max_size=10),
)
def test_start_past_commit_matches_the_definition(data: Any, n: int, known: set[int]) -> None:
    """Random commits (ok, info with and without offsets, fail) and joins of 3 processes, interleaved."""
    h = H()
    for i, o in enumerate(sorted(known)):
        h.send(9, f"v{o}", o, key=K if i % 2 == 0 else K2)
    sent = {K: {o for i, o in enumerate(sorted(known)) if i % 2 == 0}}
    sent[K2] = set(known) - sent[K]
    todo = [[] for _ in range(3)]  # per process: its ops still to invoke
    for _ in range(n):
        p = data.draw(st.integers(0, 2))
        if data.draw(st.booleans()):
            typ = data.draw(st.sampled_from(["ok", "ok", "info", "fail", "info-unknown"]))
            offsets = data.draw(st.dictionaries(st.sampled_from([K, K2]), st.integers(0, 10), max_size=2))
            todo[p].append(("commit", typ, offsets))
        else:
            start = data.draw(st.dictionaries(st.sampled_from([K, K2]), st.integers(0, 10), min_size=1, max_size=2))
            todo[p].append(("join", data.draw(st.sampled_from(["ok", "fail"])), start))
    open_: list[Any] = [None] * 3
    pid = [0, 1, 2]  # a worker's process id: a new one after an info
    while any(todo) or any(open_):
        w = data.draw(st.sampled_from([q for q in range(3) if todo[q] or open_[q]]))
        p = pid[w]
        if open_[w] is None:
            open_[w] = todo[w].pop(0)
            h.raw(p, "invoke", "poll" if open_[w][0] == "join" else "commit", None)
            continue
        f, typ, value = open_[w]
        open_[w] = None
        if f == "join":
            h.raw(p, typ, "poll", {} if typ == "ok" else None)
            h.ops[-1]["assigned"] = {"start": value}
            continue
        if typ.startswith("info"):
            pid[w] += 3
            if typ == "info-unknown" and data.draw(st.booleans()):
                continue  # never completes
        v = None if typ in ("fail", "info-unknown") else {"generation": 1, "offsets": value}
        h.raw(p, "info" if typ == "info-unknown" else typ, "commit", v)
    r = h.check()
    past, before = _oracle(h.ops, sent)
    event(f"start-past-commit: {bool(past)}, start-before-commit: {bool(before)}")
    assert r["anomalies"].get("start-past-commit", {}).get("count", 0) == past
    assert r.get("start-before-commit", {}).get("count", 0) == before
