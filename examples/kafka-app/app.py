"""The application under test: an order processor that consumes `orders` in a consumer group and records
each order it has processed (a database, in real life; a list here).

It must process every order at least once, whatever Kafka or the process itself does. Two clients are
shown, kafka-python and confluent-kafka (librdkafka), each with the right order of work: process a batch,
then commit its offsets. `commit_first=True` is the classic bug: commit, then process, so a crash in
between loses the batch (the group resumes after offsets whose records were never processed).
"""

from __future__ import annotations

TOPIC = "orders"
GROUP = "order-processor"


class Crash(Exception):
    """The process dies here (an OOM kill, a deploy, a bug): nothing after this point of the batch runs."""


def run_kafka_python(
    bootstrap: str, processed: list[str], *, crash_at: int | None = None, commit_first: bool = False,
    idle_s: float = 10.0,
) -> None:  # fmt: skip
    """Consume until nothing came for `idle_s` seconds; `crash_at`: die after polling batch number N."""
    import time

    from kafka import KafkaConsumer

    now = time.monotonic
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    batches, last = 0, now()
    try:
        while now() - last < idle_s:
            records = consumer.poll(timeout_ms=500, max_records=20)
            if not records:
                continue
            last = now()
            batches += 1
            if commit_first:
                consumer.commit()
            if batches == crash_at:
                raise Crash(f"crashed with batch {batches} polled but not processed")
            for batch in records.values():
                processed.extend(r.value.decode() for r in batch)
            if not commit_first:
                consumer.commit()
    finally:
        consumer.close(autocommit=False)


def run_confluent(
    bootstrap: str, processed: list[str], *, crash_at: int | None = None, commit_first: bool = False,
    idle_s: float = 10.0,
) -> None:  # fmt: skip
    """The same processor on librdkafka (confluent-kafka)."""
    import time

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([TOPIC])
    batches, last = 0, time.monotonic()
    try:
        while time.monotonic() - last < idle_s:
            messages = [m for m in consumer.consume(num_messages=20, timeout=0.5) if m.error() is None]
            if not messages:
                continue
            last = time.monotonic()
            batches += 1
            if commit_first:
                consumer.commit(asynchronous=False)
            if batches == crash_at:
                raise Crash(f"crashed with batch {batches} polled but not processed")
            processed.extend(m.value().decode() for m in messages)
            if not commit_first:
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
