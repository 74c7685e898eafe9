"""Pure-Python CRC-32C against the `crc32c` C extension."""

from __future__ import annotations

import os

import crc32c as reference
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.kafka import crc32c as ours


def test_known_vectors() -> None:
    assert ours.crc32c(b"") == 0
    assert ours.crc32c(b"123456789") == 0xE3069283  # the CRC catalogue check value
    assert ours.crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4
    assert ours.crc32c(b"\xff" * 32) == 0x62A8AB43


@given(st.binary(max_size=3000), st.integers(0, 0xFFFFFFFF))
def test_matches_reference_on_random_data(data: bytes, start: int) -> None:
    assert ours.crc32c(data) == reference.crc32c(data)
    assert ours.crc32c(data, start) == reference.crc32c(data, start)


@settings(max_examples=15)
@given(st.integers(1000, 300_000), st.integers(0, 0xFFFFFFFF))
def test_matches_reference_on_large_inputs(size: int, start: int) -> None:
    data = os.urandom(size)  # large random inputs take the vectorised path, several chunks
    assert ours.crc32c(data, start) == reference.crc32c(data, start)


@pytest.mark.parametrize("size", [0, 1, 3, 4, 7, 8, 9, 1023, 1024, 1025, 1026, 1027, 8191, 8192, 65535, 65536, 65537])
def test_boundaries_between_strategies(size: int) -> None:
    data = os.urandom(size)
    assert ours.crc32c(data) == reference.crc32c(data)
    assert ours.crc32c(bytearray(data)) == reference.crc32c(data)
    assert ours.crc32c(memoryview(data)) == reference.crc32c(data)


@given(st.binary(max_size=3000), st.binary(max_size=3000))
def test_incremental_and_combine(a: bytes, b: bytes) -> None:
    whole = reference.crc32c(a + b)
    assert ours.crc32c(b, ours.crc32c(a)) == whole
    assert ours.crc32c_combine(ours.crc32c(a), ours.crc32c(b), len(b)) == whole


@pytest.mark.parametrize("size", [40, 4096])
def test_buffers_of_wider_items(size: int) -> None:
    data = memoryview(os.urandom(size)).cast("I")
    assert ours.crc32c(data) == reference.crc32c(data.tobytes())
