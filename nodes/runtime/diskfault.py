"""Disk faults on a node's log files: lose unsynced writes, tear the last write, flip a bit.

The damage is computed by pure functions over a log file's bytes and its synced length, so the
simulator (``harness.sim.disk``, over the encoded records of its disk model) and the real
backends (``python -m nodes disk-fault --dir DIR``, run on a killed node's data directory) do
the same thing to the same bytes:

* ``lose-unsynced`` — the file is cut to its synced length (a power loss);
* ``torn`` — a power loss during the last write: unsynced bytes are lost except a prefix that
  ends inside a record (frames are ``length u32 | …``, both in ``raft.log`` and partition logs);
* ``corrupt`` — one bit flips in a record below the last synced one (data at rest that has gone
  bad: a "closed" part of the log), after the power loss.

Each log file has a sidecar ``<file>.synced`` (written by the node after every fsync and cut at
every truncation, see ``storage.SyncMark``): how many of its bytes were fsynced. A file without
one counts as wholly synced.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FAULTS = ("lose-unsynced", "torn", "corrupt")
SYNCED_SUFFIX = ".synced"
_LEN = struct.Struct(">I")


def frame_bounds(data: bytes, start: int = 0, limit: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each whole frame from ``start`` up to ``limit``, following length fields."""
    end = len(data) if limit is None else min(limit, len(data))
    out = []
    pos = start
    while pos + _LEN.size <= end:
        (length,) = _LEN.unpack_from(data, pos)
        nxt = pos + _LEN.size + length
        if length == 0 or nxt > end:
            break
        out.append((pos, nxt))
        pos = nxt
    return out


def tear(data: bytes, synced: int, rng: random.Random) -> tuple[bytes, dict[str, Any] | None]:
    """The synced bytes plus a prefix of the unsynced ones that ends inside a record (None: nothing
    unsynced to tear, the result is just the synced bytes)."""
    frames = frame_bounds(data, synced)
    if not frames:
        return data[:synced], None
    start, end = frames[rng.randrange(len(frames))]
    cut = rng.randint(start + 1, end - 1)
    return data[:cut], {"synced": synced, "size": len(data), "cut-at": cut, "record-at": start}


def flip(data: bytes, synced: int, rng: random.Random) -> tuple[bytes, dict[str, Any] | None]:
    """The synced bytes with one bit flipped in a record that is not the last synced one (None:
    fewer than two synced records, nothing flipped)."""
    frames = frame_bounds(data, 0, synced)
    if len(frames) < 2:
        return data[:synced], None
    start, end = frames[rng.randrange(len(frames) - 1)]
    pos = rng.randrange(start, end)
    bit = 1 << rng.randrange(8)
    out = bytearray(data[:synced])
    out[pos] ^= bit
    return bytes(out), {"synced": synced, "size": len(data), "byte": pos, "bit": bit, "record-at": start}


def damage(
    files: Sequence[tuple[str, bytes, int]], fault: str, rng: random.Random
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Apply ``fault`` to a node's log files ``[(name, bytes, synced length)]`` (raft log first, then
    partition logs by name): every file loses its unsynced bytes; ``torn`` tears one file that
    had some, ``corrupt`` flips a bit in one file with two synced records or more. Returns the
    new contents of the files that changed and what was done."""
    if fault not in FAULTS:
        raise ValueError(f"unknown disk fault {fault!r} (expected one of {', '.join(FAULTS)})")
    new = {name: data[:synced] for name, data, synced in files if synced < len(data)}
    done: dict[str, Any] = {"fault": fault, "lost-bytes": {n: len(d) - s for n, d, s in files if s < len(d)}}
    if fault == "torn":
        eligible = [(n, d, s) for n, d, s in files if frame_bounds(d, s)]
        if eligible:
            name, data, synced = eligible[rng.randrange(len(eligible))]
            new[name], detail = tear(data, synced, rng)
            done.update(file=name, **(detail or {}))
    elif fault == "corrupt":
        eligible = [(n, d, s) for n, d, s in files if len(frame_bounds(d, 0, s)) >= 2]
        if eligible:
            name, data, synced = eligible[rng.randrange(len(eligible))]
            new[name], detail = flip(data, synced, rng)
            done.update(file=name, **(detail or {}))
    return new, done


# ---------------------------------------------------------------- on a data directory


def log_files(directory: Path) -> list[Path]:
    """A node's log files: ``raft.log``, then ``partitions/*.log`` by name."""
    out = [directory / "raft.log"] if (directory / "raft.log").is_file() else []
    parts = directory / "partitions"
    if parts.is_dir():
        out += sorted(p for p in parts.iterdir() if p.suffix == ".log" and p.is_file())
    return out


def read_synced(path: Path, size: int) -> int:
    """The synced length of ``path`` from its sidecar (``size`` when there is none or it is bad)."""
    try:
        text = Path(str(path) + SYNCED_SUFFIX).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return size
    return min(int(text), size) if text.isdigit() else size


def damage_dir(directory: Path, fault: str, seed: int | str) -> dict[str, Any]:
    """Apply ``fault`` to a stopped node's data directory, in place; what was done (JSON-able)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a directory")
    paths = log_files(directory)
    files = []
    for p in paths:
        data = p.read_bytes()
        files.append((str(p.relative_to(directory)), data, read_synced(p, len(data))))
    new, done = damage(files, fault, random.Random(f"disk-{seed}"))
    for name, data in new.items():
        path = directory / name
        with open(path, "r+b") as f:
            f.seek(0)
            f.write(data)
            f.truncate(len(data))
            f.flush()
            os.fsync(f.fileno())
        Path(str(path) + SYNCED_SUFFIX).unlink(missing_ok=True)
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nodes disk-fault --dir DIR --fault F [--seed N]``: damage a stopped node's logs."""
    p = argparse.ArgumentParser(prog="python -m nodes disk-fault", description=main.__doc__)
    p.add_argument("--dir", required=True, type=Path, help="the node's log.dirs (stop the node first)")
    p.add_argument("--fault", required=True, choices=FAULTS)
    p.add_argument("--seed", default="0", help="picks the file, record and bit")
    args = p.parse_args(argv)
    try:
        done = damage_dir(args.dir, args.fault, args.seed)
    except (OSError, ValueError) as exc:
        print(f"disk-fault: {exc}", file=sys.stderr)
        return 254
    print(json.dumps(done, sort_keys=True))
    return 0
