"""``TopicPartition``: the name of one partition (``"t0-2"`` is partition 2 of topic ``t0``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """``"t0-2" -> TopicPartition("t0", 2)`` (the topic may itself contain dashes)."""
        topic, sep, index = text.rpartition("-")
        if not sep or not topic or not index.isdigit():
            raise ValueError(f"not a topic-partition name: {text!r}")
        return cls(topic, int(index))
