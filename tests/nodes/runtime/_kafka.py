"""A minimal asyncio Kafka client for the runtime tests, built on our own codecs and NetworkClient."""

from __future__ import annotations

from typing import Any, TypeVar

from nodes.kafka import protocol as kp
from nodes.kafka.records import build_batch, encode_batch, iter_batches
from nodes.runtime.client import ClientConfig, ClientConnection

M = TypeVar("M", bound=kp.Message)


class KafkaWire:
    """Requests to one broker's client listener; ``call`` returns the decoded response."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        config = ClientConfig(client_id="test-kafka", request_timeout=timeout, header_versions=kp.header_versions)
        self.conn = ClientConnection(host, port, config)

    async def call(self, message: kp.Message, version: int, *, timeout: float | None = None) -> Any:
        body = await self.conn.send(message.API_KEY, version, message.encode(version), timeout=timeout)
        assert body is not None
        return kp.response_type(message.API_KEY).decode(body, version)

    async def send_only(self, message: kp.Message, version: int) -> None:
        await self.conn.send(message.API_KEY, version, message.encode(version), expect_response=False)

    async def close(self) -> None:
        await self.conn.close()

    async def __aenter__(self) -> KafkaWire:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def batch_bytes(*values: bytes) -> bytes:
    return encode_batch(build_batch([(None, v, (), 1_000 + i) for i, v in enumerate(values)]))


def produce(topic: str, partition: int, data: bytes, acks: int = -1, timeout_ms: int = 5000) -> kp.ProduceRequest:
    return kp.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[kp.TopicProduceData(topic, [kp.PartitionProduceData(partition, data)])],
    )


def fetch(topic: str, partition: int, offset: int, max_wait_ms: int = 0, epoch: int = -1) -> kp.FetchRequest:
    return kp.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[kp.FetchTopic(topic, [kp.FetchPartition(partition, epoch, offset, -1, -1, 1 << 20)])],
    )


def values(records: Any) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a Fetch record set."""
    return [(off, v) for batch in iter_batches(bytes(records or b"")) for off, _, _, v, _ in batch.entries()]
