"""``partition-leader`` lines for ``events.jsonl`` (docs/formats.md "Node events")."""

from __future__ import annotations

from typing import Any

from ..raft.events import render_node
from .topic_partition import TopicPartition


def partition_leader_event(
    node_id: int, now: int, tp: TopicPartition, leader_epoch: int, leader: int | None
) -> dict[str, Any]:
    return {
        "node": render_node(node_id),
        "time": now,
        "type": "partition-leader",
        "partition": str(tp),
        "leader_epoch": leader_epoch,
        "leader": render_node(leader),
    }
