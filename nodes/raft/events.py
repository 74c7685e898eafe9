"""Builders for ``events.jsonl`` lines (docs/formats.md "Node events"). Node ids render as ``"n<id>"``."""

from __future__ import annotations

from typing import Any


def render_node(node_id: int | None) -> str | None:
    """``3 -> "n3"``; None stays None."""
    return None if node_id is None else f"n{node_id}"


def state_event(
    node_id: int, now: int, epoch: int, role: str, leader: int | None, voted_for: int | None
) -> dict[str, Any]:
    return {
        "node": render_node(node_id),
        "time": now,
        "type": "state",
        "epoch": epoch,
        "role": role,
        "leader": render_node(leader),
        "voted_for": render_node(voted_for),
    }


def hw_event(node_id: int, now: int, epoch: int, hw: int) -> dict[str, Any]:
    return {"node": render_node(node_id), "time": now, "type": "hw", "epoch": epoch, "hw": hw}
