"""Register commands and the state machine, without raft."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.kv import Command, CommandError, RegisterMachine, decode_command, encode_command

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@given(st.sampled_from(["read", "write"]), st.text(max_size=10), json_values)
def test_command_round_trip(f, key, value):
    command = Command(f, key, value)
    assert decode_command(encode_command(command)) == command


@given(st.text(max_size=10), json_values, json_values)
def test_cas_round_trip(key, expected, new):
    command = Command("cas", key, [expected, new])
    assert decode_command(encode_command(command)) == command


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Command("incr", "k"),
        lambda: Command("cas", "k", 5),
        lambda: Command("cas", "k", [1, 2, 3]),
        lambda: Command("write", 7, 1),
        lambda: encode_command(Command("write", "k", object())),
        lambda: decode_command(b"\xff"),
        lambda: decode_command(b"[1]"),
        lambda: decode_command(b'{"f": "nope", "k": "x"}'),
    ],
)
def test_malformed(bad):
    with pytest.raises(CommandError):
        bad()


def test_register_semantics():
    m = RegisterMachine()
    assert m.apply(Command("read", "r1")).value is None  # initial null
    assert m.apply(Command("write", "r1", 3)).ok
    assert m.apply(Command("read", "r1")).value == 3
    assert m.apply(Command("read", "r2")).value is None  # keys are independent
    swapped = m.apply(Command("cas", "r1", [3, 4]))
    assert swapped.ok and swapped.value == [3, 4] and m.read("r1") == 4
    refused = m.apply(Command("cas", "r1", [3, 5]))
    assert not refused.ok and refused.error == "cas-mismatch" and m.read("r1") == 4
    assert m.apply(Command("cas", "r3", [None, 1])).ok  # cas from the initial null
