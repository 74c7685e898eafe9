"""Disk faults on real files (`python -m nodes disk-fault`): what each fault does to a log file, and that
a node's recovery detects the damage by CRC, keeps a prefix of good records and knows how far to repair."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.broker.batch import Batch
from nodes.broker.topic_partition import TopicPartition
from nodes.raft import Record, encode_records, recover
from nodes.runtime.cli import main as nodes_main
from nodes.runtime.diskfault import damage, damage_dir, flip, frame_bounds, read_synced, tear
from nodes.runtime.partition_store import PartitionStore
from nodes.runtime.storage import LogFile, QuorumStateFile


def records(n: int, start: int = 0) -> list[Record]:
    return [Record(i, 1, b'{"f":"write","key":"r1","value":%d}' % i) for i in range(start, start + n)]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(0, 6), st.integers(0, 1 << 30))
def test_tear_keeps_the_synced_part_and_cuts_inside_an_unsynced_record(synced_n: int, extra: int, seed: int) -> None:
    rs = records(synced_n + extra)
    data = encode_records(rs)
    synced = len(encode_records(rs[:synced_n]))
    out, what = tear(data, synced, random.Random(seed))
    got, info = recover(out)
    if extra == 0:
        assert what is None and out == data[:synced]
        return
    assert what is not None and synced < len(out) < len(data)
    assert got == rs[: len(got)] and len(got) >= synced_n  # nothing synced lost, no garbage
    assert info.reason == "torn" and info.seen_end is None


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 8), st.integers(0, 1 << 30))
def test_flip_changes_one_bit_below_the_last_synced_record(n: int, seed: int) -> None:
    rs = records(n)
    data = encode_records(rs)
    out, what = flip(data, len(data), random.Random(seed))
    if n < 2:
        assert what is None and out == data
        return
    diff = [i for i in range(len(data)) if data[i] != out[i]]
    assert len(diff) == 1 and bin(data[diff[0]] ^ out[diff[0]]).count("1") == 1
    assert diff[0] < frame_bounds(data)[-1][0]  # never in the last record
    got, info = recover(out)
    assert got == rs[: len(got)] and len(got) < n
    assert info.seen_end == n  # the last record is intact: recovery knows how far the log went


def test_damage_loses_unsynced_bytes_everywhere() -> None:
    a, b = encode_records(records(3)), encode_records(records(2))
    files = [("raft.log", a, 10), ("partitions/t-0.log", b, len(b))]
    new, done = damage(files, "lose-unsynced", random.Random(0))
    assert new == {"raft.log": a[:10]} and done["lost-bytes"] == {"raft.log": len(a) - 10}


def _write_node_dir(directory: Path, n: int) -> None:
    async def write() -> None:
        lf = LogFile(directory)
        lf.open()
        lf.append(records(n))
        await lf.flush()
        lf.append(records(2, start=n))  # written, never fsynced
        store = PartitionStore(directory)
        store.open()
        tp = TopicPartition("t0", 0)
        store.append(tp, [Batch(i * 2, 2, 1, b"batch-%d" % i) for i in range(n)])
        await store.flush(tp)
        lf.close(sync=False)
        store.close(sync=False)

    asyncio.run(write())


def test_synced_sidecar_follows_fsyncs_and_truncations(tmp_path: Path) -> None:
    async def go() -> None:
        lf = LogFile(tmp_path)
        lf.open()
        lf.append(records(4))
        assert read_synced(lf.path, 10_000) == 0
        await lf.flush()
        size = lf.path.stat().st_size
        assert read_synced(lf.path, 10_000) == size
        lf.truncate(2)
        assert read_synced(lf.path, 10_000) == len(encode_records(records(2)))
        lf.close(sync=False)

    asyncio.run(go())


def test_corrupt_on_a_data_dir_is_detected_and_the_range_marked_for_repair(tmp_path: Path, capsys) -> None:
    _write_node_dir(tmp_path, 6)
    code = nodes_main(["disk-fault", "--dir", str(tmp_path), "--fault", "corrupt", "--seed", "3"])
    done = json.loads(capsys.readouterr().out)
    assert code == 0 and done["fault"] == "corrupt" and done["file"] in ("raft.log", "partitions/t0-0.log")
    assert done["lost-bytes"] == {"raft.log": len(encode_records(records(2, start=6)))}  # never fsynced
    lf = LogFile(tmp_path)
    got, info = lf.open()
    lf.close(sync=False)
    store = PartitionStore(tmp_path)
    batches = store.open()[TopicPartition("t0", 0)]
    store.close(sync=False)
    assert got == records(len(got))  # a prefix of what was written, never garbage
    assert batches == [Batch(i * 2, 2, 1, b"batch-%d" % i) for i in range(len(batches))]
    if done["file"] == "raft.log":
        assert len(got) < 6 and info.seen_end == 6
    else:
        assert len(got) == 6 and len(batches) < 6


def test_torn_and_lost_writes_on_a_data_dir(tmp_path: Path) -> None:
    _write_node_dir(tmp_path, 3)
    done = damage_dir(tmp_path, "torn", 1)
    assert done["file"] == "raft.log" and done["cut-at"] > done["synced"]
    lf = LogFile(tmp_path)
    got, info = lf.open()
    lf.close(sync=False)
    assert got == records(3) and info.reason == "torn" and info.seen_end is None
    assert not QuorumStateFile(tmp_path).path.exists()


def test_bad_arguments_exit_254(tmp_path: Path, capsys) -> None:
    assert nodes_main(["disk-fault", "--dir", str(tmp_path / "missing"), "--fault", "torn"]) == 254
    assert "not a directory" in capsys.readouterr().err
