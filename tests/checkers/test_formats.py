"""EDN reading/writing, Jepsen log import, format detection, and JSONL ↔ EDN round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checkers import edn, formats
from checkers.errors import InputError
from checkers.history import Op, parse_jsonl


def test_edn_scalars_and_collections() -> None:
    v = edn.loads(r'[nil true false -12 3N 2.5 1e3 "a\"b\n" :kw foo \a {:k [1 2]} #{1} (3 4) #_ 99 #inst "x"]')
    assert v[:7] == [None, True, False, -12, 3, 2.5, 1000.0]
    assert v[7] == 'a"b\n' and v[8] == "kw" and isinstance(v[8], edn.Keyword)
    assert v[9] == "foo" and v[10] == "a"
    assert v[11] == {"k": [1, 2]} and v[12] == frozenset({1}) and v[13] == [3, 4] and v[14] == "x"


@pytest.mark.parametrize(
    ("text", "message"), [("[1 2", "unclosed"), ("{:a}", "odd number"), ("[1 ]]", "unexpected"), ("[1 2/x]", "bad")]
)
def test_edn_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as e:
        edn.loads("\n" + text, "f.edn")
    assert e.value.file == "f.edn" and e.value.line in (1, 2)


def test_knossos_vector_with_comments(tmp_path: Path) -> None:
    p = tmp_path / "h.edn"
    p.write_text(
        "; a comment\n[{:process 0, :type :invoke, :f :write, :value 2}\n"
        " {:process 0, :type :ok, :f :write, :value 2}\n ; another\n"
        " {:process :nemesis, :type :info, :f :start, :value nil}]\n"
    )
    history = formats.load(p)
    assert [o.line for o in history.ops] == [2, 3, 5]
    assert history.ops[2].process == "nemesis"


def test_edn_lines_fast_path_and_fallback(tmp_path: Path) -> None:
    p = tmp_path / "kv.txt"
    p.write_text(
        '{:process 1, :type :invoke, :f :append, :key "0", :value "x 1 0 y"}\n'
        '{:process 1, :type :ok, :f :append, :key "0", :value "x 1 0 y"}\n'
        "{:process 2, :type :invoke, :f :cas, :value [1 2]}\n"
    )
    history = formats.load(p)
    assert history.ops[0].key == "0" and history.ops[2].value == [1, 2]
    assert [o.line for o in history.ops] == [1, 2, 3]


def test_jepsen_log_tabs_spaces_and_timeouts(tmp_path: Path) -> None:
    p = tmp_path / "etcd.log"
    p.write_text(
        "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"
        "some unrelated line\n"
        "INFO  jepsen.util - 0   :fail   :read   :timed-out\n"
        "INFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]\n"
        "INFO  jepsen.util - 2\t:info\t:cas\t:timed-out\n"
        "INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n"
    )
    history = formats.load(p)
    assert formats.detect(str(p), p.read_text()) == "jepsen-log"
    read, cas = history.operations()
    assert read.type == "fail" and read.complete is not None and read.complete.error == "timed-out"
    assert cas.type == "info" and cas.value == [3, 0]
    assert [o.line for o in history.ops] == [1, 3, 4, 5, 6]


def test_bad_input_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(InputError, match="empty history"):
        formats.load(empty)
    with pytest.raises(InputError, match="no such file"):
        formats.load(tmp_path / "missing.jsonl")
    odd = tmp_path / "odd.txt"
    odd.write_text("hello world\n")
    with pytest.raises(InputError, match="cannot tell the history format"):
        formats.load(odd)
    bad = tmp_path / "bad.edn"
    bad.write_text("[{:process 0 :type :weird :f :read}]")
    with pytest.raises(InputError, match="unknown :type") as e:
        formats.load(bad)
    assert e.value.line == 1


# ----------------------------------------------------------- round trips
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=8))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.from_regex(r"[a-z][a-z0-9\-]{0,6}", fullmatch=True), inner, max_size=3),
    ),
    max_leaves=8,
)


@given(json_values)
def test_edn_value_round_trip(value: object) -> None:
    def to_edn(v: object) -> object:
        if isinstance(v, dict):
            return {edn.Keyword(k): to_edn(x) for k, x in v.items()}
        if isinstance(v, list):
            return [to_edn(x) for x in v]
        return v

    assert formats._plain(edn.loads(edn.dumps(to_edn(value)))) == value


@st.composite
def histories(draw: st.DrawFn) -> list[dict]:
    n = draw(st.integers(1, 6))
    rows = []
    for p in range(n):
        f = draw(st.sampled_from(["read", "write", "cas", "send"]))
        key = draw(st.one_of(st.none(), st.sampled_from(["r1", "t0-2"])))
        for typ in ("invoke", draw(st.sampled_from(["ok", "fail", "info"]))):
            row = {"index": len(rows), "time": len(rows) * 7, "process": p, "type": typ, "f": f}
            if key is not None:
                row["key"] = key
            row["value"] = draw(json_values)
            if draw(st.booleans()):
                row["node"] = "n1"
            rows.append(row)
    rows.append(
        {
            "index": len(rows),
            "time": 0,
            "process": "nemesis",
            "type": "info",
            "f": "start-partition",
            "value": {"n1": ["n2", "n3"]},
        }
    )
    return rows


@given(histories())
def test_jsonl_edn_round_trip(rows: list[dict]) -> None:
    history = parse_jsonl([json.dumps(r) for r in rows], "h.jsonl")
    text = formats.to_edn(history)
    back = formats.parse_edn(text, "h.edn")
    assert [o.to_dict() for o in back.ops] == [o.to_dict() for o in history.ops]


def test_edn_export_is_knossos_shaped() -> None:
    op = Op(index=0, type="invoke", process=3, f="cas", value=[1, 4], time=12, key="r1")
    assert formats.op_to_edn(op) == '{:index 0, :time 12, :type :invoke, :process 3, :f :cas, :key "r1", :value [1 4]}'


@given(
    st.one_of(
        st.just("nil"),
        st.integers(-(10**20), 10**20).map(str),
        st.tuples(st.integers(-99, 99), st.integers(-99, 99), st.sampled_from([" ", ", ", "  "])).map(
            lambda t: f"[{t[0]}{t[2]}{t[1]}]"
        ),
        st.from_regex(r":[a-z][a-z0-9\-?!*.]{0,12}", fullmatch=True),
        st.sampled_from(["[1 2 3]", "{:a 1}", '"text"', ":a/b", "[nil 1]", "#{1 2}", "1.5", "007", "+5"]),
    )
)
def test_log_values_read_as_edn(text: str) -> None:
    """The Jepsen log fast path reads every value exactly as the EDN reader does."""
    from checkers.formats import _log_value, _plain

    assert _log_value(text, "x") == _plain(edn.loads(text, "x"))


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "process": st.integers(0, 60),
                "type": st.sampled_from([":invoke", ":ok", ":fail", ":info"]),
                "f": st.sampled_from([":get", ":put", ":append"]),
                "key": st.text("0123456789", min_size=1, max_size=2).map(lambda k: f'"{k}"'),
                "value": st.one_of(
                    st.just("nil"), st.integers(-5, 5).map(str), st.text('xy 0\\"', max_size=6).map(edn.dumps)
                ),
            }
        ),
        min_size=1,
        max_size=8,
    )
)
def test_flat_edn_lines_read_as_the_reader_does(maps: list[dict[str, str]]) -> None:
    """Porcupine-style files (one flat map per line) give the same ops on the fast path as through the reader."""
    lines = ["{" + ", ".join(f":{k} {v}" for k, v in m.items()) + "}" for m in maps]
    text = "\n".join(lines) + "\n"
    fast = edn.read_flat_lines(text)
    assert fast is not None
    slow = list(edn.read_elements("[" + text + "]"))
    assert [({str(k): v for k, v in d.items()}) for d, _ in fast] == [
        {str(k): formats._plain(v) for k, v in d.items()} for d, _ in slow
    ]


@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["process", "type", "f", "key", "value", "time", "node"]),
                st.sampled_from(["nil", "0", "-3", ":ok", ":get", '"a b"', '"q\\"x"', "true"]),
            ),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["\n", "\r\n", "\n\n"]),
    st.sampled_from(["", " ", "\t"]),
)
def test_every_flat_line_reader_agrees(lines: list[list[tuple[str, str]]], newline: str, indent: str) -> None:
    """The whole-text reader of uniform lines (same keys, same order) and the line-by-line one give the same
    maps and line numbers on any flat text: keys in any order, blank lines, CRLF, indentation."""
    text = newline.join(indent + "{" + ", ".join(f":{k} {v}" for k, v in pairs) + "}" for pairs in lines) + "\n"
    by_line = edn._read_lines(text, plain=True)
    assert edn.read_flat_lines(text) == by_line


@given(
    st.dictionaries(
        st.sampled_from(["process", "type", "f", "key", "value", "time", "node", "error", "index", "other"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-3, 3),
            st.sampled_from(["ok", "invoke", "info", "fail", "get", "nemesis", "x"]),
            st.lists(st.integers(0, 2), max_size=2),
        ),
    )
)
def test_the_common_op_shape_reads_as_any_op(obj: dict) -> None:
    """`_op_from_edn`'s shortcut for plain maps builds the same Op, or raises the same error, as the full path."""
    from checkers.errors import InputError

    def read(fn):  # noqa: ANN001, ANN202
        try:
            return fn(obj, "src", 7, 3)._fields()
        except InputError as e:
            return str(e)

    assert read(formats._op_from_edn) == read(formats._op_from_edn_any)
