"""history.jsonl parsing, validation with line numbers, pairing, and the streaming writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.errors import InputError
from checkers.history import HistoryWriter, Op, parse_jsonl, read_jsonl, write_jsonl


def lines(*objs: dict) -> list[str]:
    return [json.dumps(o) for o in objs]


def op(i: int, p: object, t: str, f: str = "read", v: object = None, **kw: object) -> dict:
    return {"index": i, "time": i * 100, "process": p, "type": t, "f": f, "value": v, **kw}


def test_design_example_parses() -> None:
    text = [
        '{"index": 0, "time": 1200345, "process": 3, "type": "invoke", "f": "cas", "key": "r1", "value": [1, 4]}',
        '{"index": 1, "time": 9800020, "process": 3, "type": "ok", "f": "cas", "key": "r1", "value": [1, 4], '
        '"node": "n2"}',
        '{"index": 2, "time": 9900000, "process": "nemesis", "type": "info", "f": "start-partition", '
        '"value": {"n1": ["n3","n4"]}}',
    ]
    history = parse_jsonl(text, "h.jsonl")
    [operation] = history.operations()
    assert operation.type == "ok" and operation.key == "r1" and operation.value == [1, 4]
    assert operation.complete is not None and operation.complete.node == "n2"
    assert [o.f for o in history.nemesis()] == ["start-partition"]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"index": 1, "process": 0, "type": "maybe", "f": "read"}', "unknown type 'maybe'"),
        ('{"index": 1, "process": 0, "type": "ok"}', "missing field 'f'"),
        ('{"index": 1, "process": 1.5, "type": "invoke", "f": "read"}', "process must be an integer"),
        ('{"index": 1, "time": -4, "process": 2, "type": "invoke", "f": "read"}', "time must be"),
        ('{"index": 7, "process": 2, "type": "invoke", "f": "read"}', "out of sequence"),
        ("[1, 2]", "expected a JSON object"),
        ('{"index": 1, "process": 5, "type": "ok", "f": "read", "value": 1}', "without a matching invoke"),
        ('{"index": 1, "process": 0, "type": "invoke", "f": "write", "value": 2}', "still open"),
        ('{"index": 1, "process": 0, "type": "ok", "f": "write", "value": 2}', "but invoked 'read'"),
    ],
)
def test_malformed_lines_are_named(bad_line: str, message: str) -> None:
    text = [json.dumps(op(0, 0, "invoke")), bad_line]
    with pytest.raises(InputError, match=message) as e:
        parse_jsonl(text, "run/history.jsonl")
    assert e.value.line == 2
    assert str(e.value).startswith("run/history.jsonl:2: ")


def test_process_reuse_after_crash_is_rejected() -> None:
    text = lines(op(0, 0, "invoke", "write", 1), op(1, 0, "info", "write", 1), op(2, 0, "invoke"))
    with pytest.raises(InputError, match="after it crashed") as e:
        parse_jsonl(text, "h")
    assert e.value.line == 3


def test_pairing_and_open_ops() -> None:
    text = lines(
        op(0, 0, "invoke", "write", 1),
        op(1, 1, "invoke"),
        op(2, 0, "ok", "write", 1),
        op(3, 1, "fail"),
        op(4, 2, "invoke", "write", 3),
    )
    ops = parse_jsonl(text).operations()
    got = [(o.process, o.type, o.call, o.ret) for o in ops]
    assert got == [(0, "ok", 0, 2), (1, "fail", 1, 3), (2, "info", 4, None)]


def test_blank_lines_and_missing_index() -> None:
    text = ['{"process": 0, "type": "invoke", "f": "read"}', "", '{"process": 0, "type": "ok", "f": "read"}']
    history = parse_jsonl(text)
    assert [o.index for o in history.ops] == [0, 1]
    assert [o.line for o in history.ops] == [1, 3]


def test_round_trip_and_streaming_writer(tmp_path: Path) -> None:
    src = lines(op(0, 0, "invoke", "write", 1, key="k"), op(1, 0, "ok", "write", 1, key="k", node="n1", extra=5))
    history = parse_jsonl(src)
    out = tmp_path / "h.jsonl"
    write_jsonl(history, out)
    again = read_jsonl(out)
    assert [o.to_dict() for o in again.ops] == [o.to_dict() for o in history.ops]
    assert again.ops[1].extra == {"extra": 5}
    streamed = tmp_path / "s.jsonl"
    with HistoryWriter(streamed) as w:
        w.append(Op(index=-1, type="invoke", process=0, f="read", time=5))
        # the line is on disk before the writer is closed: a killed run leaves a readable history
        assert streamed.read_text().count("\n") == 1
        w.append(Op(index=-1, type="ok", process=0, f="read", value=None, time=9))
    assert [o.index for o in read_jsonl(streamed).ops] == [0, 1]


def test_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match="UTF-8"):
        read_jsonl(p)
