"""The queue workload on real clusters: Kafka clients that send unique values and poll them back.

The same operation stream as the simulator (`workloads.queue.QueueGenerator` seeded
``workload-{seed}``): `assign` replaces a client's partitions and resets its positions to 0,
`send` appends one unique integer to partition key ``t0-<p>`` with the run's acks, `poll`
fetches a partition from the client's position. The client executes whatever operation it is
given (f, key, value), so `kraftwerk replay` drives it with a stored schedule's ops instead of the
generator's; a poll of a partition the process is not assigned fails at once (`not-assigned`),
as the simulator's client skips it. Outcomes follow `workloads.queue` and the
simulator's client: produce errors that prove nothing was appended are `fail`, the others
`info`; a send that timed out or lost its connection after the request was written is `info`;
a poll that failed or timed out is `fail` (a fetch changes nothing, and the client's position
only moves on an `ok` poll). A poll's `ok` value is ``[[offset, value], …]``, as the simulator
records it, so `checkers.queue` judges real and simulated runs alike.

The client speaks the Kafka wire protocol (Metadata to find partition leaders, Produce, Fetch,
CreateTopics) with the project's own codecs (`nodes.kafka.protocol`, record batches from
`nodes.kafka.records`) over `nodes.runtime.client.ClientConnection`, directly on the runner's
asyncio loop. kafka-python was the alternative, but it would need a thread per client, retries
and buffering of its own that hide what happened to one request (the outcome of each
operation must be judged from exactly one Produce or Fetch), and the node image does not need
it either way; our codecs are already tested against kafka-python (tests/harness/test_cluster_kafka.py).

`setup` creates the topic (partitions, replication factor, min.insync.replicas, unclean leader
election, as the simulator does) before the main phase and waits until every node's metadata
shows a leader for every partition; `final` drains every partition: each client thread assigns
its share of the partitions (reading them again from offset 0) and polls each one until it has
read past the highest acknowledged offset, or until the partition's end (an empty poll at the
leader's high watermark) has stayed put for a few seconds, which is what a lost acknowledged
tail looks like.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.runner.db import ClusterNotReady
from harness.runner.interpreter import Completion
from harness.runner.workload import LegacyWorkload as Workload
from nodes.kafka import protocol as kp
from nodes.kafka.errors import ErrorCode
from nodes.kafka.records import build_batch, encode_batch, iter_batches
from nodes.runtime.client import BackoffError, ClientConfig, ClientConnection, ConnectError, NetworkError
from workloads import generator as gen
from workloads.queue import ACKS, TOPIC, QueueGenerator, keys, produce_outcome

PRODUCE_VERSION = 8
FETCH_VERSION = 11
METADATA_VERSION = 9
CREATE_TOPICS_VERSION = 4
PRODUCE_TIMEOUT_MS = 1500  # the broker's wait for acks=all, as in the simulator
FETCH_MAX_WAIT_MS = 100
FETCH_MAX_BYTES = 1 << 20
END_QUIET_S = 4.0  # the final phase gives up on a partition whose end has not moved for this long
REFRESH = frozenset({3, 5, 6, 74, 75})  # answers that mean "ask someone else who leads this partition"
OFFSET_OUT_OF_RANGE = 1
TOPIC_ALREADY_EXISTS = 36
# broker timings shorter than Kafka's (9 s, 2 s, 30 s), as in the simulator: a fault of a few
# seconds fences a broker, moves its partitions and shrinks ISRs
BROKER_PROPERTIES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "5000",
}


def node_properties(options: argparse.Namespace) -> dict[str, str]:
    """The node.properties keys a queue run adds: the broker role's topic defaults and timings."""
    return {
        "min.insync.replicas": str(options.min_isr),
        "default.replication.factor": str(options.replication_factor),
        "num.partitions": str(options.partitions),
        "unclean.leader.election.enable": "true" if options.unclean else "false",
        **BROKER_PROPERTIES,
    }


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


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.lower()
    except ValueError:
        return f"error-{code}"


def partition_of(key: str) -> int:
    return int(key.rsplit("-", 1)[1])


@dataclass
class Consumer:
    """One process's consumer state: its assigned partitions and positions (fresh after a crash)."""

    assigned: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)
    end_since: dict[str, float] = field(default_factory=dict)  # key -> when polls started finding its end
    polled: set[str] = field(default_factory=set)  # keys polled ok since the last assign

    def assign(self, keys: Sequence[str]) -> None:
        self.assigned = list(keys)
        self.positions = dict.fromkeys(self.assigned, 0)
        self.end_since = {}
        self.polled = set()


class QueueClient:
    """One worker process's Kafka client: a metadata cache and one connection per broker."""

    def __init__(self, workload: QueueWorkload, process: int, rng: random.Random) -> None:
        self.workload = workload
        self.timeout = workload.timeout
        self.consumer = workload.consumer(process)
        self.rng = rng
        self.leaders: dict[str, str] = {}
        self._conns: dict[str, ClientConnection] = {}

    def _conn(self, node: str) -> ClientConnection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.workload.endpoints[node]
            config = ClientConfig(
                client_id="kraftwerk-queue",
                max_in_flight=1,
                request_timeout=self.timeout,
                connect_timeout=self.timeout,
                header_versions=kp.header_versions,
            )
            conn = self._conns[node] = ClientConnection(host, port, config, rng=self.rng, name=f"kafka {node}")
        return conn

    async def _call(self, node: str, api: int, version: int, request: Any, deadline: float) -> Any:
        timeout = max(0.05, deadline - time.monotonic())
        return await self._conn(node).send(api, version, request.encode(version), timeout=timeout)

    async def _leader(self, key: str, deadline: float) -> str | None:
        """The cached leader of `key`, else what a random node's Metadata says (None: nobody leads it)."""
        if key in self.leaders:
            return self.leaders[key]
        names = sorted(self.workload.endpoints)
        node = names[self.rng.randrange(len(names))]
        request = kp.MetadataRequest(topics=[kp.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
        body = await self._call(node, kp.ApiKey.METADATA, METADATA_VERSION, request, deadline)
        response = kp.MetadataResponse.decode(body, METADATA_VERSION)
        for topic in response.topics:
            if topic.name != TOPIC:
                continue
            for p in topic.partitions:
                k = f"{TOPIC}-{p.partition_index}"
                name = f"n{p.leader_id}"
                if p.error_code == 0 and p.leader_id >= 0 and name in self.workload.endpoints:
                    self.leaders[k] = name
                else:
                    self.leaders.pop(k, None)
        return self.leaders.get(key)

    async def invoke(self, op: dict[str, Any]) -> Completion:
        f = op["f"]
        if f == "assign":
            self.consumer.assign(op["value"])
            return Completion("ok", op["value"])
        if f not in ("send", "poll"):
            return Completion("fail", op.get("value"), f"unknown operation {f!r}")
        key = op["key"]
        if f == "poll" and key not in self.consumer.assigned:
            # a replayed poll whose assign went to a process that has crashed since (the generator and
            # the final phase only poll what they assigned): a consumer cannot fetch what it does not own
            return Completion("fail", None, "not-assigned")
        deadline = time.monotonic() + self.timeout
        written = False  # the Produce may have reached the broker
        node: str | None = None
        try:
            async with asyncio.timeout(self.timeout):
                node = await self._leader(key, deadline)
                if node is None:  # nobody leads it yet: nothing was sent
                    return Completion("fail", op.get("value"), "leader-not-available")
                if f == "send":
                    written = True
                    return await self._send(node, key, op["value"], deadline)
                return await self._poll(node, key, deadline)
        except (ConnectError, BackoffError) as e:  # nothing was written: a definite failure either way
            self.leaders.pop(key, None)
            return Completion("fail", op.get("value") if f == "send" else None, f"connect: {e}", node)
        except (TimeoutError, NetworkError, OSError, ValueError) as e:
            self.leaders.pop(key, None)
            why = "timeout" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
            if f == "send":
                return Completion("info" if written else "fail", op["value"], why, node)
            return Completion("fail", None, why, node)

    async def _send(self, node: str, key: str, value: int, deadline: float) -> Completion:
        acks = self.workload.acks
        batch = encode_batch(build_batch([(None, encode_value(value))], timestamp=int(time.time() * 1000)))
        request = kp.ProduceRequest(
            acks=acks,
            timeout_ms=PRODUCE_TIMEOUT_MS,
            topic_data=[
                kp.TopicProduceData(
                    name=TOPIC, partition_data=[kp.PartitionProduceData(index=partition_of(key), records=batch)]
                )
            ],
        )
        if acks == 0:
            timeout = max(0.05, deadline - time.monotonic())
            await self._conn(node).send(
                kp.ApiKey.PRODUCE,
                PRODUCE_VERSION,
                request.encode(PRODUCE_VERSION),
                timeout=timeout,
                expect_response=False,
            )
            return Completion("info", value, "acks=0: no answer", node)
        body = await self._call(node, kp.ApiKey.PRODUCE, PRODUCE_VERSION, request, deadline)
        part = kp.ProduceResponse.decode(body, PRODUCE_VERSION).responses[0].partition_responses[0]
        error = int(part.error_code)
        outcome = produce_outcome(error)
        if error in REFRESH:
            self.leaders.pop(key, None)
        if outcome == "ok":
            self.workload.note_ack(key, part.base_offset)
            return Completion("ok", [part.base_offset, value], None, node)
        return Completion(outcome, value, error_name(error), node)

    async def _poll(self, node: str, key: str, deadline: float) -> Completion:
        start = self.consumer.positions.get(key, 0)
        request = kp.FetchRequest(
            replica_id=-1,
            max_wait_ms=FETCH_MAX_WAIT_MS,
            min_bytes=1,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                kp.FetchTopic(
                    topic=TOPIC,
                    partitions=[
                        kp.FetchPartition(
                            partition=partition_of(key), fetch_offset=start, partition_max_bytes=FETCH_MAX_BYTES
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        body = await self._call(node, kp.ApiKey.FETCH, FETCH_VERSION, request, deadline)
        response = kp.FetchResponse.decode(body, FETCH_VERSION)
        if response.error_code:
            return Completion("fail", None, error_name(response.error_code), node)
        part = response.responses[0].partitions[0]
        error = int(part.error_code)
        if error != 0:
            if error in REFRESH:
                self.leaders.pop(key, None)
            if error == OFFSET_OUT_OF_RANGE:  # the log was truncated below our position
                self.consumer.positions[key] = 0
            return Completion("fail", None, error_name(error), node)
        pairs: list[list[Any]] = []
        for batch in iter_batches(part.records or b""):
            for offset, _ts, _key, data, _headers in batch.entries():
                if offset >= start:
                    pairs.append([offset, decode_value(data)])
        self.consumer.polled.add(key)
        if pairs:
            self.consumer.positions[key] = pairs[-1][0] + 1
            self.consumer.end_since.pop(key, None)
        elif start >= part.high_watermark:
            self.consumer.end_since.setdefault(key, time.monotonic())
        return Completion("ok", pairs, None, node)

    async def close(self) -> None:
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns = {}


class _Drain(gen.Generator):
    """One thread's final phase: assign its partitions (positions back to 0), then poll each to its end."""

    def __init__(self, workload: QueueWorkload, thread: int, keys: Sequence[str]) -> None:
        self.workload, self.thread, self.keys = workload, thread, list(keys)
        self.assigned_by: Any = None  # the process that assigned the keys (from offset 0) in this phase

    def op(self, ctx: gen.Context) -> gen.Result:
        if self.thread not in ctx.workers:
            return None
        if self.thread not in ctx.free:
            return gen.PENDING, self
        process = ctx.workers[self.thread]
        consumer = self.workload.consumer(process)
        while self.keys:
            key = self.keys[0]
            if self.assigned_by != process or key not in consumer.assigned:
                self.assigned_by = process
                return gen.fill({"f": "assign", "key": None, "value": list(self.keys), "process": process}, ctx), self
            ended = consumer.end_since.get(key)
            read_all = consumer.positions.get(key, 0) > self.workload.acked_max.get(key, -1)
            quiet = ended is not None and time.monotonic() - ended >= END_QUIET_S
            if key in consumer.polled and (read_all or quiet):
                self.keys.pop(0)
                continue
            pause = int(0.05 * gen.SECOND) if ended is not None else 0
            poll = {"f": "poll", "key": key, "value": None, "process": process, "time": ctx.time + pause}
            return gen.fill(poll, ctx), self
        return None


class QueueWorkload(Workload):
    """A Kafka topic `t0` of `partitions` partitions: unique sends and polls (checker model `queue`)."""

    name = "queue"
    model = "queue"

    def __init__(
        self,
        endpoints: Mapping[str, tuple[str, int]],
        seed: int,
        *,
        timeout: float = 2.0,
        acks: str | int = "all",
        partitions: int = 3,
        replication_factor: int = 3,
        min_isr: int = 2,
        unclean: bool = False,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.seed = seed
        self.timeout = timeout
        self.acks = acks if isinstance(acks, int) else ACKS[acks]
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.min_isr = min_isr
        self.unclean = unclean
        self.ops = QueueGenerator(random.Random(f"workload-{seed}"), partitions)
        self.consumers: dict[int, Consumer] = {}
        self.acked_max: dict[str, int] = {}
        self.partition_leaders: dict[str, str] = {}  # as the last metadata of `setup` listed them

    @classmethod
    def from_options(
        cls, endpoints: Mapping[str, tuple[str, int]], seed: int, options: argparse.Namespace, **kwargs: Any
    ) -> QueueWorkload:
        """The workload `kraftwerk test`'s queue options describe (--acks, --partitions, …)."""
        return cls(
            endpoints,
            seed,
            acks=options.acks,
            partitions=options.partitions,
            replication_factor=options.replication_factor,
            min_isr=options.min_isr,
            unclean=options.unclean,
            **kwargs,
        )

    def consumer(self, process: int) -> Consumer:
        return self.consumers.setdefault(process, Consumer())

    def note_ack(self, key: str, offset: int) -> None:
        if offset > self.acked_max.get(key, -1):
            self.acked_max[key] = offset

    # ------------------------------------------------------------------ phases
    def _next(self, ctx: gen.Context) -> dict[str, Any]:
        # the op is drawn for one process (its assignment decides between poll and assign), so the
        # process is chosen here rather than by `gen.fill`; Fn asks only when some thread is free
        process = ctx.some_free_process()
        op = self.ops.next(self.consumer(process).assigned)
        value = list(op.value) if op.f == "assign" else op.value
        return {"f": op.f, "key": op.key, "value": value, "process": process}

    def generator(self) -> gen.Generator:
        return gen.Fn(self._next)

    def final(self, keys: Sequence[Any], threads: int) -> gen.Generator | None:
        """Every partition (not only the ones the history names) drained by the client threads."""
        every = self.all_keys()
        per_thread = [
            gen.on_threads(lambda x, t=t: x == t, _Drain(self, t, every[t::threads]))
            for t in range(min(threads, len(every)))
        ]
        return gen.any_of(*per_thread) if per_thread else None

    def all_keys(self) -> list[str]:
        return keys(self.partitions)

    def client(self, thread: int, process: int) -> QueueClient:
        return QueueClient(self, process, random.Random(f"client-{self.seed}-{thread}-{process}"))

    async def setup(self, timeout: float) -> float:
        """Create the topic through any node, then wait until every partition has a leader and
        enough in-sync replicas for acks=all; the seconds it took (ClusterNotReady after `timeout`)."""
        started = time.monotonic()
        names = sorted(self.endpoints)
        created = False
        last = "no answer"
        attempt = 0
        client = QueueClient(self, -1, random.Random(f"setup-{self.seed}"))
        try:
            while time.monotonic() - started < timeout:
                node = names[attempt % len(names)]
                attempt += 1
                deadline = time.monotonic() + 2.0
                try:
                    if not created:
                        created, last = await self._create(client, node, deadline)
                    if created:  # every node's metadata lists a leader for every partition
                        ready = True
                        for name in names:
                            led, last = await self._led(client, name, deadline)
                            ready = ready and led
                        if ready:
                            return time.monotonic() - started
                except (TimeoutError, NetworkError, OSError, ValueError) as e:
                    last = f"{node}: {type(e).__name__}: {e}"
                await asyncio.sleep(0.2)
        finally:
            await client.close()
        raise ClusterNotReady(f"topic {TOPIC} not created and led within {timeout:g}s: {last}")

    async def _create(self, client: QueueClient, node: str, deadline: float) -> tuple[bool, str]:
        configs = [
            kp.CreatableTopicConfig(name="min.insync.replicas", value=str(self.min_isr)),
            kp.CreatableTopicConfig(name="unclean.leader.election.enable", value="true" if self.unclean else "false"),
        ]
        topic = kp.CreatableTopic(
            name=TOPIC,
            num_partitions=self.partitions,
            replication_factor=self.replication_factor,
            assignments=[],
            configs=configs,
        )
        request = kp.CreateTopicsRequest(topics=[topic], timeout_ms=5000, validate_only=False)
        body = await client._call(node, kp.ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, request, deadline)
        result = kp.CreateTopicsResponse.decode(body, CREATE_TOPICS_VERSION).topics[0]
        if result.error_code in (0, TOPIC_ALREADY_EXISTS):
            return True, "created"
        return False, f"{node}: create-topics: {error_name(result.error_code)} {result.error_message or ''}".strip()

    async def _led(self, client: QueueClient, node: str, deadline: float) -> tuple[bool, str]:
        request = kp.MetadataRequest(topics=[kp.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
        body = await client._call(node, kp.ApiKey.METADATA, METADATA_VERSION, request, deadline)
        response = kp.MetadataResponse.decode(body, METADATA_VERSION)
        for topic in response.topics:
            if topic.name != TOPIC:
                continue
            parts = topic.partitions
            need = min(self.replication_factor, max(self.min_isr, 1))
            if len(parts) == self.partitions and all(
                p.error_code == 0 and p.leader_id >= 0 and len(p.isr_nodes) >= need for p in parts
            ):
                self.partition_leaders = {f"{TOPIC}-{p.partition_index}": f"n{p.leader_id}" for p in parts}
                return True, "led"
            return False, f"{node}: partitions not led yet: {[(p.partition_index, p.leader_id) for p in parts]}"
        return False, f"{node}: metadata does not list {TOPIC} yet"
