"""The queue's topic: its name, its keys (one a partition: ``t0-2``), an explicit replica placement,
and how record values are written and read back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TOPIC = "t0"


def validate_assignment(
    assignment: Mapping[int, Sequence[str]] | None, nodes: Sequence[str], partitions: int, rf: int
) -> dict[int, tuple[str, ...]]:
    """An explicit replica placement for the topic (partition -> replica nodes, leader first), checked
    against the topic's partition count and replication factor; ValueError naming what is wrong."""
    if not assignment:
        return {}
    out = {int(p): tuple(str(n) for n in r) for p, r in assignment.items()}
    if sorted(out) != list(range(partitions)):
        raise ValueError(f"assignment must list partitions 0..{partitions - 1} once each, got {sorted(out)}")
    for p, r in sorted(out.items()):
        if len(r) != rf or len(set(r)) != len(r):
            raise ValueError(f"assignment of partition {p}: {list(r)} is not {rf} distinct replicas")
        unknown = [n for n in r if n not in nodes]
        if unknown:
            raise ValueError(f"assignment of partition {p}: {', '.join(unknown)} not among the nodes")
    return out


def keys(partitions: int, topic: str = TOPIC) -> list[str]:
    return [f"{topic}-{i}" for i in range(partitions)]


def partition_of(key: str) -> int:
    return int(key.rsplit("-", 1)[1])


def encode_value(value: int) -> bytes:
    return str(value).encode()


def decode_value(data: bytes | None) -> Any:
    """A polled record's value: the integer sent, or its text when it is not one."""
    if data is None:
        return None
    try:
        return int(data)
    except ValueError:
        return bytes(data).decode("utf-8", "replace")
