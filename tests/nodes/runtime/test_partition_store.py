"""Partition log files: append, truncate, flush, recovery of torn tails and lost ranges, lazy-flush
holding."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from nodes.broker import Batch, TopicPartition
from nodes.runtime.partition_store import (
    PartitionLogFile,
    PartitionStore,
    parse_partition_file_name,
    partition_file_name,
)

TP = TopicPartition("orders.v1-x", 3)


def batch(base: int, count: int = 2, epoch: int = 1) -> Batch:
    return Batch(base, count, epoch, bytes([base % 256]) * (10 + base), 1000 + base)


def test_file_names_round_trip() -> None:
    for tp in (TP, TopicPartition("t", 0), TopicPartition("a-b-7", 12), TopicPartition("we ird/", 1)):
        name = partition_file_name(tp)
        assert "/" not in name and name.endswith(".log")
        assert parse_partition_file_name(name) == tp
    assert parse_partition_file_name("notes.txt") is None
    assert parse_partition_file_name("t-x.log") is None


def test_append_truncate_reopen(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path)
    assert store.open() == {}
    store.append(TP, [batch(0), batch(2), batch(4, 3)])
    store.append(TopicPartition("t", 0), [batch(0, 1)])
    store.truncate(TP, 2)  # drops the batches at 2 and 4
    store.append(TP, [batch(2, 1, epoch=2)])
    asyncio.run(store.flush(TP))
    assert store.fsyncs == 1
    store.close(sync=True)

    again = PartitionStore(tmp_path)
    logs = again.open()
    assert logs == {TP: [batch(0), batch(2, 1, epoch=2)], TopicPartition("t", 0): [batch(0, 1)]}
    again.truncate(TP, 0)
    again.close(sync=True)
    assert PartitionStore(tmp_path).open()[TP] == []


def test_torn_tail_is_cut_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = PartitionStore(tmp_path)
    store.open()
    store.append(TP, [batch(0), batch(2)])
    store.close(sync=True)
    path = tmp_path / "partitions" / partition_file_name(TP)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01\x00torn")  # a frame header promising 256 bytes, then nothing
    with caplog.at_level(logging.WARNING):
        logs = PartitionStore(tmp_path).open()
    assert logs[TP] == [batch(0), batch(2)]
    assert path.stat().st_size == size
    assert "torn or corrupt tail" in caplog.text and "kept 2 batch(es)" in caplog.text

    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # corrupt the last batch: recovery keeps the first only
    path.write_bytes(bytes(data))
    assert PartitionStore(tmp_path).open()[TP] == [batch(0)]


def test_a_lost_range_is_reported_damaged_until_the_log_is_back_where_it_was(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path)
    store.open()
    store.append(TP, [batch(0), batch(2), batch(4)])
    store.append(TopicPartition("t", 0), [batch(0, 1)])
    store.close(sync=True)
    assert store.damaged() == []
    path = tmp_path / "partitions" / partition_file_name(TP)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # a bit flips in the middle batch: the one after it is intact
    path.write_bytes(bytes(data))

    again = PartitionStore(tmp_path)
    assert again.open()[TP] == [batch(0)]
    assert again.damaged() == [TP]
    mark = Path(str(path) + ".repair")
    assert mark.read_text() == "6\n"  # the log had reached offset 6
    again.close(sync=True)
    # stopped before the damage report went through: the cut log looks whole, the mark still says not
    third = PartitionStore(tmp_path)
    assert third.open()[TP] == [batch(0)] and third.damaged() == [TP]
    third.append(TP, [batch(2, 4, epoch=2)])  # fetched back up to offset 6
    third.close(sync=True)
    fourth = PartitionStore(tmp_path)
    fourth.open()
    assert fourth.damaged() == [] and not mark.exists()


def test_hold_keeps_appends_in_the_process_until_a_flush(tmp_path: Path) -> None:
    f = PartitionLogFile(tmp_path / "t-0.log", hold=True)
    assert f.open() == []
    f.append([batch(0), batch(2)])
    assert (tmp_path / "t-0.log").stat().st_size == 0  # a SIGKILL now loses both
    f.truncate(2)
    asyncio.run(f.flush())
    f.append([batch(2, 4)])
    f.close(sync=False)  # a crash: the held batch at 2 is lost
    again = PartitionLogFile(tmp_path / "t-0.log")
    assert again.open() == [batch(0)]
    again.close(sync=False)
