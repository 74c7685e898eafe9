"""Durable files: atomic quorum-state replace, log recovery from torn tails, held (lazy) appends."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from nodes.raft import QuorumState, Record, digest, encode_record
from nodes.runtime.storage import (
    DataDir,
    EventLog,
    HighWatermarkFile,
    LogFile,
    QuorumStateFile,
    StorageError,
    offline_dump,
    write_atomic,
)


def rec(offset: int, epoch: int = 1, payload: bytes | None = None) -> Record:
    return Record(offset, epoch, payload if payload is not None else f"p{offset}".encode())


# -- quorum-state ------------------------------------------------------------------------------


def test_quorum_state_round_trip(tmp_path: Path) -> None:
    qs = QuorumStateFile(tmp_path)
    assert qs.load() is None
    qs.save(QuorumState(3, None, 2))
    qs.save(QuorumState(4, 1, 1))
    assert QuorumStateFile(tmp_path).load() == QuorumState(4, 1, 1)
    assert qs.writes == 2
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_quorum_state_replace_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qs = QuorumStateFile(tmp_path)
    qs.save(QuorumState(5, 2, 2))
    synced: list[int] = []
    real_fsync = os.fsync

    def spy_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    def crash_before_rename(src: object, dst: object) -> None:
        raise OSError("crash before rename")

    monkeypatch.setattr(os, "fsync", spy_fsync)
    monkeypatch.setattr(os, "replace", crash_before_rename)
    with pytest.raises(OSError):
        qs.save(QuorumState(6, None, 3))
    assert synced, "the temp file is fsynced before the rename"
    monkeypatch.undo()
    # the old state is intact; the leftover temp file is removed at the next start
    assert (tmp_path / "quorum-state.tmp").exists()
    assert QuorumStateFile(tmp_path).load() == QuorumState(5, 2, 2)
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_write_atomic_fsyncs_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (order.append("rename"), real_replace(a, b))[1])
    write_atomic(tmp_path / "f", b"data")
    assert order == ["fsync", "rename", "fsync"]
    assert (tmp_path / "f").read_bytes() == b"data"


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"epoch": -1}', b"[]", b'{"epoch": 1, "leader": "x"}'])
def test_corrupt_quorum_state_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "quorum-state").write_bytes(content)
    with pytest.raises(StorageError, match="quorum-state is corrupt"):
        QuorumStateFile(tmp_path).load()


# -- the log file ------------------------------------------------------------------------------


def test_log_append_truncate_and_reopen(tmp_path: Path) -> None:
    lf = LogFile(tmp_path)
    assert lf.open()[0] == []
    lf.append([rec(0), rec(1), rec(2, 2)])
    lf.truncate(1)
    lf.append([rec(1, 3, b"new")])
    assert lf.end_offset == 2
    lf.close(sync=True)
    records, info = LogFile(tmp_path).open()
    assert records == [rec(0), rec(1, 3, b"new")]
    assert info.truncated_bytes == 0
    with pytest.raises(StorageError):
        lf2 = LogFile(tmp_path)
        lf2.open()
        lf2.append([rec(5)])  # not at the log end


@pytest.mark.parametrize("cut", [1, 4, 7, 20])
def test_recovery_cuts_a_torn_tail_and_logs_it(tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture) -> None:
    good = b"".join(encode_record(rec(i)) for i in range(3))
    torn = encode_record(rec(3, 1, b"x" * 30))[:cut]
    (tmp_path / "raft.log").write_bytes(good + torn)
    with caplog.at_level(logging.WARNING):
        records, info = LogFile(tmp_path).open()
    assert records == [rec(0), rec(1), rec(2)]
    assert info.truncated_bytes == cut and info.reason == "torn"
    assert (tmp_path / "raft.log").stat().st_size == len(good)
    assert f"cut {cut} byte(s) of torn tail" in caplog.text


def test_recovery_cuts_from_a_corrupt_record(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    frames = [encode_record(rec(i)) for i in range(4)]
    bad = bytearray(frames[2])
    bad[-1] ^= 0xFF  # payload bit flip: CRC mismatch
    (tmp_path / "raft.log").write_bytes(frames[0] + frames[1] + bytes(bad) + frames[3])
    with caplog.at_level(logging.WARNING):
        lf = LogFile(tmp_path)
        records, info = lf.open()
    assert [r.offset for r in records] == [0, 1] and info.reason == "corrupt"
    assert info.truncated_bytes == len(bad) + len(frames[3])
    assert "corrupt tail" in caplog.text
    lf.append([rec(2, 2)])  # appends continue after the cut
    lf.close(sync=True)
    assert [r.epoch for r in LogFile(tmp_path).open()[0]] == [1, 1, 2]


def test_held_appends_reach_the_file_only_on_flush(tmp_path: Path) -> None:
    lf = LogFile(tmp_path, hold=True)
    lf.open()
    lf.append([rec(0), rec(1)])
    assert (tmp_path / "raft.log").stat().st_size == 0 and lf.end_offset == 2 and lf.written_offset == 0
    asyncio.run(lf.flush())
    assert lf.written_offset == 2 and lf.fsyncs == 1
    lf.append([rec(2), rec(3)])
    lf.truncate(3)  # a truncation inside the held part
    assert lf.end_offset == 3 and lf.written_offset == 2
    lf.truncate(1)  # and one reaching into the written part drops every held record
    assert lf.end_offset == 1 and lf.written_offset == 1
    lf.append([rec(1, 2)])
    lf.close(sync=False)  # a crash: held appends are lost
    assert LogFile(tmp_path).open()[0] == [rec(0)]


def test_close_with_sync_writes_held_appends(tmp_path: Path) -> None:
    lf = LogFile(tmp_path, hold=True)
    lf.open()
    lf.append([rec(0)])
    lf.close(sync=True)
    assert LogFile(tmp_path).open()[0] == [rec(0)]


# -- high watermark, events, dumps, directory ownership ----------------------------------------


def test_high_watermark_never_goes_down(tmp_path: Path) -> None:
    hw = HighWatermarkFile(tmp_path)
    assert hw.open() == 0
    hw.store(5)
    hw.store(3)
    hw.store(12)
    hw.close()
    assert HighWatermarkFile.read(tmp_path / "high-watermark") == 12
    (tmp_path / "high-watermark").write_text("garbage")
    assert HighWatermarkFile.read(tmp_path / "high-watermark") == 0


def test_offline_dump_is_the_committed_prefix(tmp_path: Path) -> None:
    records = [rec(0), rec(1), Record(2, 2, b"lc", control=True), rec(3, 2)]
    (tmp_path / "raft.log").write_bytes(b"".join(encode_record(r) for r in records))
    (tmp_path / "high-watermark").write_text("3\n")
    lines = offline_dump(tmp_path).splitlines()
    assert len(lines) == 3
    assert lines[2] == f'{{"offset":2,"epoch":2,"digest":"{digest(records[2])}"}}'
    with pytest.raises(StorageError):
        offline_dump(tmp_path / "missing")


def test_event_log_appends_lines(tmp_path: Path) -> None:
    ev = EventLog(tmp_path)
    ev.open()
    ev.write({"node": "n1", "time": 1, "type": "hw", "epoch": 1, "hw": 2})
    assert (tmp_path / "events.jsonl").read_text() == '{"node":"n1","time":1,"type":"hw","epoch":1,"hw":2}\n'
    ev.close()
    ev.open()
    ev.write({"a": 1})
    ev.close()
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 2


def test_data_dir_lock_and_owner(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "n1", 1)
    d.acquire()
    with pytest.raises(StorageError, match="in use"):
        DataDir(tmp_path / "n1", 1).acquire()
    d.release()
    with pytest.raises(StorageError, match="belongs to node.id=1"):
        DataDir(tmp_path / "n1", 2).acquire()
    again = DataDir(tmp_path / "n1", 1)
    again.acquire()
    again.release()
