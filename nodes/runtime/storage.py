"""A node's data directory: durable quorum state, the raft log file, the events log and the dump.

Files in ``log.dirs``:

* ``quorum-state`` — :func:`~nodes.raft.encode_quorum_state` JSON, replaced atomically
  (write ``quorum-state.tmp``, fsync, rename, fsync the directory);
* ``raft.log`` — records framed by :func:`~nodes.raft.encode_record`; a torn or corrupt tail is
  cut off at start-up (and the cut is logged); ``raft.log.synced`` (:class:`SyncMark`) says how
  many of its bytes were fsynced, for the disk-fault helper (``diskfault.py``);
* ``high-watermark`` — the highest high watermark this node has seen, so that the committed-log
  dump also works offline (``python -m nodes dump-log --dir``) and after a restart;
* ``events.jsonl`` — node events (docs/formats.md "Node events"), one line each, flushed per line;
* ``meta.properties`` (the node id that owns the directory) and ``.lock`` (one process at a time).

:class:`LogFile` writes appends straight to the file (the page cache), unless ``hold`` is set
(the ``lazy-flush`` bug): then appends stay in the process until the next flush, so a SIGKILL
loses them, as a crash loses unflushed data in the simulator.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..raft import (
    QuorumState,
    QuorumStateError,
    Record,
    RecoveryInfo,
    decode_quorum_state,
    digest,
    encode_quorum_state,
    encode_record,
    recover,
)

__all__ = [
    "DataDir",
    "EventLog",
    "HighWatermarkFile",
    "LogFile",
    "QuorumStateFile",
    "StorageError",
    "SyncMark",
    "dump_entries",
    "format_dump",
    "offline_dump",
    "write_atomic",
]

log = logging.getLogger(__name__)

QUORUM_STATE = "quorum-state"
LOG_FILE = "raft.log"
HW_FILE = "high-watermark"
EVENTS_FILE = "events.jsonl"
META_FILE = "meta.properties"
LOCK_FILE = ".lock"


class StorageError(Exception):
    """The data directory cannot be used (corrupt state, held by another process, I/O error)."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename over, fsync the directory.

    A crash at any point leaves either the old or the new content, never a mix.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class QuorumStateFile:
    """The ``quorum-state`` file."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / QUORUM_STATE
        self.writes = 0

    def load(self) -> QuorumState | None:
        """The persisted state, or None if there is none; :class:`StorageError` if corrupt."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        if tmp.exists():
            log.info("removing %s left by an interrupted write", tmp)
            tmp.unlink()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from None
        try:
            return decode_quorum_state(data)
        except QuorumStateError as exc:
            raise StorageError(f"{self.path} is corrupt ({exc}); refusing to start (remove it to reset)") from None

    def save(self, state: QuorumState) -> None:
        write_atomic(self.path, encode_quorum_state(state))
        self.writes += 1


class SyncMark:
    """``<log file>.synced``: how many bytes of a log file were fsynced (rewritten in place, not
    fsynced itself: it survives a process kill, which is what the disk-fault helper needs).

    It is raised after an fsync completes, before the core hears of the flush, and cut at every
    truncation, so it never falls below what the node has acknowledged."""

    WIDTH = 20

    def __init__(self, log_path: Path) -> None:
        self.path = Path(str(log_path) + ".synced")
        self._fd: int | None = None
        self.value = 0

    def open(self, value: int) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        self.set(value)

    def set(self, value: int) -> None:
        self.value = value
        if self._fd is not None:
            os.pwrite(self._fd, f"{value:0{self.WIDTH}d}\n".encode(), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LogFile:
    """``raft.log``: append, truncate, flush (fsync in a worker thread).

    ``check_crc=False`` is the ``skip-crc`` bug: recovery decodes records without checking CRCs."""

    def __init__(self, directory: Path, *, hold: bool = False, check_crc: bool = True) -> None:
        self.path = Path(directory) / LOG_FILE
        self.hold = hold
        self.check_crc = check_crc
        self.synced = SyncMark(self.path)
        self._fd: int | None = None
        self._starts: list[int] = []  # byte position of each record written to the file
        self._size = 0  # bytes in the file
        self._held: list[tuple[int, bytes]] = []  # (offset, frame) appended but not yet written
        self.fsyncs = 0

    @property
    def end_offset(self) -> int:
        """Offset after the last record appended (written or held)."""
        return self._held[-1][0] + 1 if self._held else len(self._starts)

    @property
    def written_offset(self) -> int:
        """Offset after the last record written to the file (in the page cache or on disk)."""
        return len(self._starts)

    def open(self) -> tuple[list[Record], RecoveryInfo]:
        """Open (creating if needed), recover the valid prefix, cut a torn/corrupt tail."""
        if self._fd is not None:
            raise RuntimeError("log file already open")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            data = _read_fd(fd)
            records, info = recover(data, check_crc=self.check_crc)
            if info.truncated_bytes:
                os.ftruncate(fd, info.valid_bytes)
                log.warning(
                    "%s: cut %d byte(s) of %s tail; kept %d record(s) (%d bytes)%s",
                    self.path,
                    info.truncated_bytes,
                    info.reason,
                    len(records),
                    info.valid_bytes,
                    f"; intact records up to offset {info.seen_end} followed the damage: fetching them again"
                    if info.damaged
                    else "",
                )
            os.fsync(fd)  # what a previous process left in the page cache is durable from here on
            self.synced.open(info.valid_bytes)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        pos = 0
        starts = []
        for record in records:
            starts.append(pos)
            pos += len(encode_record(record))
        self._starts = starts
        self._size = info.valid_bytes
        return records, info

    def _require(self) -> int:
        if self._fd is None:
            raise RuntimeError("log file is not open")
        return self._fd

    def append(self, records: Iterable[Record]) -> None:
        for record in records:
            if record.offset != self.end_offset:
                raise StorageError(f"append of offset {record.offset} at log end {self.end_offset}")
            frame = encode_record(record)
            if self.hold:
                self._held.append((record.offset, frame))
            else:
                self._write(frame)

    def _write(self, frame: bytes) -> None:
        fd = self._require()
        _write_all(fd, frame)
        self._starts.append(self._size)
        self._size += len(frame)

    def truncate(self, from_offset: int) -> None:
        """Remove every record at ``from_offset`` or above (held ones included)."""
        fd = self._require()
        self._held = [(o, f) for o, f in self._held if o < from_offset]
        if from_offset < len(self._starts):
            self._held.clear()
            size = self._starts[from_offset]
            os.ftruncate(fd, size)
            del self._starts[from_offset:]
            self._size = size
            if self.synced.value > size:
                self.synced.set(size)

    def write_held(self) -> None:
        """Hand held appends to the OS (the first half of a flush)."""
        held, self._held = self._held, []
        for _, frame in held:
            self._write(frame)

    async def flush(self) -> None:
        """Write held appends, then fsync in a worker thread (the event loop keeps running)."""
        self.write_held()
        fd = self._require()
        size = self._size
        await asyncio.to_thread(os.fsync, fd)
        self.synced.set(min(size, self._size))
        self.fsyncs += 1

    def close(self, *, sync: bool) -> None:
        """Close; with ``sync`` write held appends and fsync first, else drop held appends."""
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


def _read_fd(fd: int) -> bytes:
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class HighWatermarkFile:
    """The highest high watermark seen, rewritten in place (fixed width, no fsync)."""

    WIDTH = 20

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / HW_FILE
        self._fd: int | None = None
        self.value = 0

    @staticmethod
    def read(path: Path) -> int:
        """The stored value; 0 when missing or unreadable (logged)."""
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return 0
        if not text.isdigit():
            log.warning("ignoring malformed %s: %r", path, text[:40])
            return 0
        return int(text)

    def open(self) -> int:
        self.value = self.read(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        return self.value

    def store(self, hw: int) -> None:
        """Record ``hw`` if it is higher than the stored value."""
        if hw <= self.value or self._fd is None:
            return
        self.value = hw
        os.pwrite(self._fd, f"{hw:0{self.WIDTH}d}\n".encode(), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class EventLog:
    """``events.jsonl``: one JSON object per line, flushed to the OS after each line."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / EVENTS_FILE
        self._file: Any = None

    def open(self) -> None:
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the node's life

    def write(self, data: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(data, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class DataDir:
    """Ownership of a node's directory: creates it, takes ``.lock``, checks ``meta.properties``."""

    def __init__(self, directory: Path, node_id: int) -> None:
        self.path = Path(directory)
        self.node_id = node_id
        self._lock_fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot use data directory {self.path}: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StorageError(f"{self.path} is in use by another node process") from None
        self._lock_fd = fd
        meta = self.path / META_FILE
        if meta.exists():
            owner = _meta_node_id(meta)
            if owner != self.node_id:
                self.release()
                raise StorageError(f"{self.path} belongs to node.id={owner}, not {self.node_id} ({meta})")
        else:
            write_atomic(meta, f"node.id={self.node_id}\nversion=1\n".encode())

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _meta_node_id(meta: Path) -> int | None:
    for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "node.id" and value.strip().isdigit():
            return int(value.strip())
    return None


# --- committed-log dumps (logs/<node>.jsonl) ---------------------------------------------------


def dump_entries(records: Iterable[Record]) -> list[dict[str, Any]]:
    """``{"offset", "epoch", "digest"}`` per record, as in docs/formats.md "Log dumps"."""
    return [{"offset": r.offset, "epoch": r.epoch, "digest": digest(r)} for r in records]


def format_dump(records: Iterable[Record]) -> str:
    """The dump as JSONL text (one entry per line, newline-terminated)."""
    return "".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in dump_entries(records))


def offline_dump(directory: Path, *, check_crc: bool = True) -> str:
    """The committed-log dump of a stopped node's directory (read-only; torn tails ignored), read as the node
    reads it at start-up (``check_crc=False``: as a node with the ``skip-crc`` bug)."""
    path = Path(directory)
    if not path.is_dir():
        raise StorageError(f"{path} is not a directory")
    try:
        data = (path / LOG_FILE).read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise StorageError(f"cannot read {path / LOG_FILE}: {exc}") from None
    records, _ = recover(data, check_crc=check_crc)
    hw = HighWatermarkFile.read(path / HW_FILE)
    return format_dump(records[:hw])
