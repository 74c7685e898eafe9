"""The broker's partition logs on disk: one append-only file per partition.

Files live in ``<log.dirs>/partitions/<topic>-<partition>.log`` (topic names are Kafka-legal,
``[a-zA-Z0-9._-]``; anything else is %-escaped). Each file is a sequence of batch frames
(:func:`nodes.broker.batch.encode_batch`: length, CRC-32, base offset, leader epoch, record
count, max timestamp, the producer's record batch bytes). At start-up
:func:`~nodes.broker.batch.recover_batches` keeps the valid contiguous prefix and the file is cut
to it; the cut is logged.

Durability follows the raft log (``storage.LogFile``): appends go to the page cache at once,
``flush`` fsyncs in a worker thread. With ``hold`` (the ``lazy-flush`` bug) appends stay in the
process until the next flush, so a SIGKILL loses them. A new file's directory entry is fsynced
with its first flush. Each file has a ``.synced`` sidecar (``storage.SyncMark``) for the
disk-fault helper. A damaged batch inside the file (a flipped bit: intact batches follow it) is
cut off with everything after it, so the range is never served; the node fetches it again from
the partition leader as a follower (a restarted broker is fenced, and out of the ISR, until it
has caught up). The offset the log had reached is kept in a ``.repair`` sidecar (written durably
before the cut) until a later start finds the log back there (``batch.repair_mark``); while it
is there the broker reports the partition damaged when it registers, and the controller takes it
out of the partition's ISR even as the last member, so it never leads with a log that lacks
committed records. ``check_crc=False`` is the ``skip-crc`` bug: recovery trusts the bytes.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, unquote

from ..broker.batch import Batch, encode_batch, recover_batches, repair_mark, scan_beyond
from ..broker.topic_partition import TopicPartition
from .storage import StorageError, SyncMark

__all__ = ["PARTITIONS_DIR", "PartitionLogFile", "PartitionStore", "partition_file_name", "parse_partition_file_name"]

log = logging.getLogger(__name__)

PARTITIONS_DIR = "partitions"
_SUFFIX = ".log"
_NAME = re.compile(r"(.+)-(\d+)\.log")
REPAIR_SUFFIX = ".repair"


def partition_file_name(tp: TopicPartition) -> str:
    """``t0-2.log`` for partition 2 of ``t0``."""
    return f"{quote(tp.topic, safe='._-')}-{tp.partition}{_SUFFIX}"


def parse_partition_file_name(name: str) -> TopicPartition | None:
    """The partition a file name stands for, or None if it is not a partition log."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return TopicPartition(unquote(m.group(1)), int(m.group(2)))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class PartitionLogFile:
    """One partition's file: append, truncate (at a batch boundary), flush, close."""

    def __init__(self, path: Path, *, hold: bool = False, check_crc: bool = True) -> None:
        self.path = path
        self.hold = hold
        self.check_crc = check_crc
        self.synced = SyncMark(path)
        self._fd: int | None = None
        self._bases: list[int] = []  # base offset of each batch written to the file
        self._starts: list[int] = []  # its byte position
        self._size = 0
        self._held: list[tuple[int, bytes]] = []  # (base offset, frame) not yet written
        self._new = False  # created by us: fsync the directory on the first flush
        self.fsyncs = 0
        self.repair_path = Path(str(path) + REPAIR_SUFFIX)
        self.repair_to: int | None = None  # the log lost a range: offset it had reached (see repair_mark)

    def open(self) -> list[Batch]:
        """Open (creating it if needed) and recover the valid prefix, cutting a torn tail."""
        self._new = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            data = _read_all(fd)
            batches, valid = recover_batches(data, check_crc=self.check_crc)
            end = batches[-1].next_offset if batches else 0
            seen = scan_beyond(data, valid, end) if valid < len(data) else None
            self.repair_to = repair_mark(end, seen, self._read_repair_mark())
            if self.repair_to is not None:
                self._write_repair_mark(self.repair_to)  # durable before the cut
            if valid < len(data):
                os.ftruncate(fd, valid)
                log.warning(
                    "%s: cut %d byte(s) of %s; kept %d batch(es) (%d bytes)%s",
                    self.path,
                    len(data) - valid,
                    "a damaged range" if seen is not None else "torn or corrupt tail",
                    len(batches),
                    valid,
                    f"; will not serve offsets up to {seen}, fetching them again" if seen is not None else "",
                )
            os.fsync(fd)
            if self.repair_to is None and self.repair_path.exists():
                self.repair_path.unlink()  # back where the damage had cut it
            self.synced.open(valid)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        pos = 0
        for batch in batches:
            self._bases.append(batch.base_offset)
            self._starts.append(pos)
            pos += len(encode_batch(batch))
        self._size = valid
        return batches

    def _read_repair_mark(self) -> int | None:
        try:
            text = self.repair_path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read {self.repair_path}: {exc}") from None
        if not text.isdigit():
            raise StorageError(f"{self.repair_path}: not an offset: {text[:40]!r}")
        return int(text)

    def _write_repair_mark(self, offset: int) -> None:
        tmp = Path(str(self.repair_path) + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, f"{offset}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.repair_path)
        _fsync_dir(self.path.parent)

    def _require(self) -> int:
        if self._fd is None:
            raise StorageError(f"{self.path} is not open")
        return self._fd

    def append(self, batches: Iterable[Batch]) -> None:
        for batch in batches:
            frame = encode_batch(batch)
            if self.hold:
                self._held.append((batch.base_offset, frame))
            else:
                self._write(batch.base_offset, frame)

    def _write(self, base: int, frame: bytes) -> None:
        _write_all(self._require(), frame)
        self._bases.append(base)
        self._starts.append(self._size)
        self._size += len(frame)

    def truncate(self, from_offset: int) -> None:
        """Drop every batch whose base offset is ``>= from_offset`` (held ones included)."""
        fd = self._require()
        self._held = [(b, f) for b, f in self._held if b < from_offset]
        i = bisect.bisect_left(self._bases, from_offset)
        if i < len(self._bases):
            self._held.clear()
            size = self._starts[i]
            os.ftruncate(fd, size)
            del self._bases[i:]
            del self._starts[i:]
            self._size = size
            if self.synced.value > size:
                self.synced.set(size)

    def write_held(self) -> None:
        held, self._held = self._held, []
        for base, frame in held:
            self._write(base, frame)

    async def flush(self) -> None:
        """Write held appends, then fsync in a worker thread."""
        self.write_held()
        fd = self._require()
        size = self._size
        await asyncio.to_thread(os.fsync, fd)
        self.synced.set(min(size, self._size))
        if self._new:
            self._new = False
            await asyncio.to_thread(_fsync_dir, self.path.parent)
        self.fsyncs += 1

    def close(self, *, sync: bool) -> None:
        if self._fd is None:
            return
        if sync:
            self.write_held()
            os.fsync(self._fd)
            self.synced.set(self._size)
        self._held.clear()
        self.synced.close()
        os.close(self._fd)
        self._fd = None


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartitionStore:
    """Every partition log of one node, in ``<directory>/partitions/``."""

    def __init__(self, directory: Path, *, hold: bool = False, check_crc: bool = True) -> None:
        self.path = Path(directory) / PARTITIONS_DIR
        self.hold = hold
        self.check_crc = check_crc
        self.files: dict[TopicPartition, PartitionLogFile] = {}

    @property
    def fsyncs(self) -> int:
        return sum(f.fsyncs for f in self.files.values())

    def damaged(self) -> list[TopicPartition]:
        """The partitions whose log lost a range and has not reached its end again (after :meth:`open`)."""
        return sorted(tp for tp, f in self.files.items() if f.repair_to is not None)

    def open(self) -> dict[TopicPartition, list[Batch]]:
        """Recover every partition log found (creating the directory if needed)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            names = sorted(os.listdir(self.path))
        except OSError as exc:
            raise StorageError(f"cannot use {self.path}: {exc}") from None
        logs: dict[TopicPartition, list[Batch]] = {}
        try:
            for name in names:
                tp = parse_partition_file_name(name)
                if tp is None:
                    continue
                f = PartitionLogFile(self.path / name, hold=self.hold, check_crc=self.check_crc)
                logs[tp] = f.open()
                self.files[tp] = f
        except BaseException:
            self.close(sync=False)
            raise
        return logs

    def _file(self, tp: TopicPartition) -> PartitionLogFile:
        f = self.files.get(tp)
        if f is None:
            f = PartitionLogFile(self.path / partition_file_name(tp), hold=self.hold, check_crc=self.check_crc)
            f.open()
            self.files[tp] = f
        return f

    def append(self, tp: TopicPartition, batches: Iterable[Batch]) -> None:
        self._file(tp).append(batches)

    def truncate(self, tp: TopicPartition, from_offset: int) -> None:
        self._file(tp).truncate(from_offset)

    async def flush(self, tp: TopicPartition) -> None:
        await self._file(tp).flush()

    def close(self, *, sync: bool) -> None:
        """Close every file; with ``sync`` write held appends and fsync first."""
        errors = []
        for f in self.files.values():
            try:
                f.close(sync=sync)
            except OSError as exc:
                errors.append(exc)
        self.files.clear()
        if errors:
            raise errors[0]
