"""The queue workload's request bodies over the Kafka wire protocol (our nodes' client listener).

One `KafkaWire` per client process: one `ClientConnection` per node, opened on demand, so a
process that crashed (an `info`) never shares a connection with its successor. Each body is one
Kafka request with the project's own codecs (`nodes.kafka.protocol`; record batches from
`nodes.kafka.records`): Metadata, Produce (one record per batch, with the idempotent producer's
id, epoch and sequence when it has them), Fetch, CreateTopics, InitProducerId, and for
`--sub-via subscribe` the group coordinator's FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetFetch and OffsetCommit, and for `--txn` the transaction APIs (FindCoordinator with
key type 1, InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, transactional batches, read_committed fetches whose control batches and
aborted records are left out as a consumer leaves them out). kafka-python
was the alternative, but its retries and buffering would hide what happened to one request, and
the outcome of each operation must be judged from exactly one Produce or Fetch; our codecs are
tested against kafka-python (tests/harness/test_cluster_kafka.py).

No answer is a `Failure`: `sent` is False only when the connection could not be opened (the
request certainly never reached the node).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Mapping
from typing import Any

from nodes.kafka import protocol as kp
from nodes.kafka.errors import ErrorCode
from nodes.kafka.records import build_batch, encode_batch, iter_batches
from nodes.runtime.client import BackoffError, ClientConfig, ClientConnection, ConnectError, NetworkError
from workloads.protocol import Failure, Reply, Request
from workloads.queue import bodies as q
from workloads.queue.bodies import (
    CreateTopic,
    Fetch,
    Fetched,
    InitProducerId,
    Metadata,
    MetadataReply,
    PartitionInfo,
    Produce,
    Produced,
    ProducerId,
    TopicCreated,
    broker_id,
)

PRODUCE_VERSION = 8
FETCH_VERSION = 11
METADATA_VERSION = 9
CREATE_TOPICS_VERSION = 4
INIT_PRODUCER_ID_VERSION = 1
FETCH_MAX_BYTES = 1 << 20
# the group coordinator's APIs (--sub-via subscribe)
FIND_COORDINATOR_VERSION = 3
JOIN_GROUP_VERSION = 5
SYNC_GROUP_VERSION = 3
HEARTBEAT_VERSION = 3
LEAVE_GROUP_VERSION = 3
OFFSET_FETCH_VERSION = 6
OFFSET_COMMIT_VERSION = 7
# the transaction APIs (--txn)
TXN_VERSION = 1  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn
TXN_OFFSET_COMMIT_VERSION = 2


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.lower()
    except ValueError:
        return f"error-{code}"


class KafkaWire:
    """Sends the queue workload's bodies to the nodes at `endpoints` ({node: (host, port)})."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], rng: random.Random) -> None:
        self.endpoints = dict(endpoints)
        self.rng = rng
        self._conns: dict[str, ClientConnection] = {}

    def _conn(self, node: str, timeout: float) -> ClientConnection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.endpoints[node]
            config = ClientConfig(
                client_id="kraftwerk-queue",
                max_in_flight=1,
                request_timeout=timeout,
                connect_timeout=timeout,
                header_versions=kp.header_versions,
            )
            conn = self._conns[node] = ClientConnection(host, port, config, rng=self.rng, name=f"kafka {node}")
        return conn

    async def call(self, request: Request) -> Reply | Failure:
        """One request, one answer: the reply body, or why there was none."""
        body = request.body
        try:
            if isinstance(body, Metadata):
                return Reply(await self._metadata(request.node, body, request.timeout_s))
            if isinstance(body, Produce):
                return Reply(await self._produce(request.node, body, request.timeout_s))
            if isinstance(body, Fetch):
                return Reply(await self._fetch(request.node, body, request.timeout_s))
            if isinstance(body, CreateTopic):
                return Reply(await self._create(request.node, body, request.timeout_s))
            if isinstance(body, InitProducerId):
                return Reply(await self._init_producer_id(request.node, body, request.timeout_s))
            if isinstance(body, q.GROUP_REQUESTS):
                return Reply(await self._group(request.node, body, request.timeout_s))
            if isinstance(body, q.TXN_REQUESTS):
                return Reply(await self._txn(request.node, body, request.timeout_s))
        except (ConnectError, BackoffError) as e:
            return Failure(f"connect: {e}", sent=False)
        except TimeoutError:
            return Failure("timeout", sent=True)
        except (NetworkError, OSError, ValueError) as e:
            return Failure(f"{type(e).__name__}: {e}", sent=True)
        raise TypeError(f"not a queue request body: {body!r}")

    async def _send(self, node: str, api: int, version: int, request: Any, timeout: float) -> memoryview:
        answer = await self._conn(node, timeout).send(api, version, request.encode(version), timeout=timeout)
        assert answer is not None
        return answer

    async def _metadata(self, node: str, body: Metadata, timeout: float) -> MetadataReply:
        request = kp.MetadataRequest(topics=[kp.MetadataRequestTopic(name=body.topic)], allow_auto_topic_creation=False)
        data = await self._send(node, kp.ApiKey.METADATA, METADATA_VERSION, request, timeout)
        response = kp.MetadataResponse.decode(data, METADATA_VERSION)
        for topic in response.topics:
            if topic.name == body.topic and topic.error_code == 0:
                return MetadataReply(
                    tuple(
                        PartitionInfo(
                            p.partition_index,
                            f"n{p.leader_id}" if p.leader_id >= 0 else None,
                            len(p.isr_nodes),
                            p.error_code,
                            p.leader_epoch,
                        )
                        for p in topic.partitions
                    )
                )
        return MetadataReply(None)

    async def _produce(self, node: str, body: Produce, timeout: float) -> Produced | None:
        batch = encode_batch(
            build_batch(
                [(None, body.value)],
                timestamp=int(time.time() * 1000),
                producer_id=body.producer_id,
                producer_epoch=body.producer_epoch,
                base_sequence=body.sequence,
                transactional=body.transactional,
            )
        )
        request = kp.ProduceRequest(
            acks=body.acks,
            timeout_ms=body.timeout_ms,
            topic_data=[
                kp.TopicProduceData(
                    name=body.topic, partition_data=[kp.PartitionProduceData(index=body.partition, records=batch)]
                )
            ],
        )
        if body.acks == 0:  # no answer comes: done once written
            payload = request.encode(PRODUCE_VERSION)
            await self._conn(node, timeout).send(
                kp.ApiKey.PRODUCE, PRODUCE_VERSION, payload, timeout=timeout, expect_response=False
            )
            return None
        data = await self._send(node, kp.ApiKey.PRODUCE, PRODUCE_VERSION, request, timeout)
        part = kp.ProduceResponse.decode(data, PRODUCE_VERSION).responses[0].partition_responses[0]
        return Produced(int(part.error_code), error_name(part.error_code), part.base_offset)

    async def _fetch(self, node: str, body: Fetch, timeout: float) -> Fetched:
        partition = kp.FetchPartition(
            partition=body.partition,
            fetch_offset=body.offset,
            partition_max_bytes=FETCH_MAX_BYTES,
            current_leader_epoch=body.leader_epoch,  # on the wire from Fetch v9 (KIP-320)
        )
        request = kp.FetchRequest(
            replica_id=-1,
            max_wait_ms=body.max_wait_ms,
            min_bytes=1,
            isolation_level=body.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[kp.FetchTopic(topic=body.topic, partitions=[partition])],
            forgotten_topics_data=[],
            rack_id="",
        )
        data = await self._send(node, kp.ApiKey.FETCH, FETCH_VERSION, request, timeout)
        response = kp.FetchResponse.decode(data, FETCH_VERSION)
        if response.error_code:
            return Fetched(response.error_code, error_name(response.error_code))
        part = response.responses[0].partitions[0]
        if part.error_code:
            return Fetched(part.error_code, error_name(part.error_code))
        served = [
            (
                batch.base_offset,
                batch.producer_id,
                batch.is_transactional,
                batch.is_control,
                ()
                if batch.is_control
                else tuple(
                    (offset, None if value is None else bytes(value))
                    for offset, _ts, _key, value, _headers in batch.entries()
                ),
            )
            for batch in iter_batches(part.records or b"")
        ]
        aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
        return q.fetched(served, aborted, body.isolation_level == 1, part.last_stable_offset, part.high_watermark)

    async def _create(self, node: str, body: CreateTopic, timeout: float) -> TopicCreated:
        topic = kp.CreatableTopic(
            name=body.topic,
            num_partitions=-1 if body.assignments else body.partitions,
            replication_factor=-1 if body.assignments else body.replication_factor,
            assignments=[
                kp.CreatableReplicaAssignment(partition_index=p, broker_ids=[broker_id(n) for n in r])
                for p, r in body.assignments
            ],
            configs=[kp.CreatableTopicConfig(name=k, value=v) for k, v in body.configs],
        )
        request = kp.CreateTopicsRequest(topics=[topic], timeout_ms=body.timeout_ms, validate_only=False)
        data = await self._send(node, kp.ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, request, timeout)
        result = kp.CreateTopicsResponse.decode(data, CREATE_TOPICS_VERSION).topics[0]
        return TopicCreated(result.error_code, error_name(result.error_code), result.error_message)

    async def _init_producer_id(self, node: str, body: InitProducerId, timeout: float) -> ProducerId:
        request = kp.InitProducerIdRequest(
            transactional_id=body.transactional_id, transaction_timeout_ms=body.transaction_timeout_ms or 60_000
        )
        data = await self._send(node, kp.ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, request, timeout)
        r = kp.InitProducerIdResponse.decode(data, INIT_PRODUCER_ID_VERSION)
        return ProducerId(r.error_code, error_name(r.error_code), r.producer_id, r.producer_epoch)

    async def _group(self, node: str, body: Any, timeout: float) -> Any:
        """One group coordinator request (FindCoordinator, JoinGroup, …) and its reply body."""
        if isinstance(body, q.FindCoordinator):
            v = FIND_COORDINATOR_VERSION
            r = await self._call(node, kp.FindCoordinatorRequest(key=body.group, key_type=body.key_type), v, timeout)
            return q.CoordinatorFound(
                r.error_code, error_name(r.error_code), f"n{r.node_id}" if r.node_id >= 0 else None
            )
        if isinstance(body, q.JoinGroup):
            request = kp.JoinGroupRequest(
                group_id=body.group,
                session_timeout_ms=body.session_timeout_ms,
                rebalance_timeout_ms=body.rebalance_timeout_ms,
                member_id=body.member_id,
                protocol_type="consumer",
                protocols=[kp.JoinGroupRequestProtocol("range", body.subscription)],
            )
            r = await self._call(node, request, JOIN_GROUP_VERSION, timeout)
            members = tuple((m.member_id, bytes(m.metadata)) for m in r.members)
            return q.GroupJoined(
                r.error_code, error_name(r.error_code), r.generation_id, r.leader, r.member_id, members
            )
        if isinstance(body, q.SyncGroup):
            request = kp.SyncGroupRequest(
                group_id=body.group,
                generation_id=body.generation,
                member_id=body.member_id,
                assignments=[kp.SyncGroupRequestAssignment(m, a) for m, a in body.assignments],
            )
            r = await self._call(node, request, SYNC_GROUP_VERSION, timeout)
            return q.GroupSynced(r.error_code, error_name(r.error_code), bytes(r.assignment))
        if isinstance(body, q.Heartbeat):
            request = kp.HeartbeatRequest(group_id=body.group, generation_id=body.generation, member_id=body.member_id)
            r = await self._call(node, request, HEARTBEAT_VERSION, timeout)
            return q.GroupAnswer(r.error_code, error_name(r.error_code))
        if isinstance(body, q.LeaveGroup):
            request = kp.LeaveGroupRequest(group_id=body.group, members=[kp.MemberIdentity(body.member_id)])
            r = await self._call(node, request, LEAVE_GROUP_VERSION, timeout)
            code = r.error_code or next((m.error_code for m in r.members if m.error_code), 0)
            return q.GroupAnswer(code, error_name(code))
        if isinstance(body, q.FetchOffsets):
            topics = [kp.OffsetFetchRequestTopic(body.topic, list(body.partitions))]
            r = await self._call(
                node, kp.OffsetFetchRequest(group_id=body.group, topics=topics), OFFSET_FETCH_VERSION, timeout
            )
            parts = [p for t in r.topics for p in t.partitions if t.name == body.topic]
            code = r.error_code or next((p.error_code for p in parts if p.error_code), 0)
            return q.OffsetsFetched(
                code,
                error_name(code),
                tuple((p.partition_index, p.committed_offset) for p in parts),
                tuple((p.partition_index, p.committed_leader_epoch) for p in parts),
            )
        assert isinstance(body, q.CommitOffsets)
        epochs = dict(body.leader_epochs)
        partitions = [
            kp.OffsetCommitRequestPartition(p, o, committed_leader_epoch=epochs.get(p, -1)) for p, o in body.offsets
        ]
        request = kp.OffsetCommitRequest(
            group_id=body.group,
            generation_id_or_member_epoch=body.generation,
            member_id=body.member_id,
            topics=[kp.OffsetCommitRequestTopic(body.topic, partitions)],
        )
        r = await self._call(node, request, OFFSET_COMMIT_VERSION, timeout)
        code = next((p.error_code for t in r.topics for p in t.partitions if p.error_code), 0)
        return q.OffsetsCommitted(code, error_name(code))

    async def _txn(self, node: str, body: Any, timeout: float) -> q.TxnAnswer:
        """One transaction request (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn): its first error."""
        if isinstance(body, q.AddPartitionsToTxn):
            request = kp.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=body.transactional_id,
                v3_and_below_producer_id=body.producer_id,
                v3_and_below_producer_epoch=body.producer_epoch,
                v3_and_below_topics=[kp.AddPartitionsToTxnTopic(body.topic, list(body.partitions))],
            )
            r = await self._call(node, request, TXN_VERSION, timeout)
            codes = [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]
            code = next((c for c in codes if c), 0)
        elif isinstance(body, q.AddOffsetsToTxn):
            request = kp.AddOffsetsToTxnRequest(
                transactional_id=body.transactional_id,
                producer_id=body.producer_id,
                producer_epoch=body.producer_epoch,
                group_id=body.group,
            )
            code = (await self._call(node, request, TXN_VERSION, timeout)).error_code
        elif isinstance(body, q.EndTxn):
            request = kp.EndTxnRequest(
                transactional_id=body.transactional_id,
                producer_id=body.producer_id,
                producer_epoch=body.producer_epoch,
                committed=body.commit,
            )
            code = (await self._call(node, request, TXN_VERSION, timeout)).error_code
        else:
            assert isinstance(body, q.TxnOffsetCommit)
            partitions = [kp.TxnOffsetCommitRequestPartition(p, o) for p, o in body.offsets]
            request = kp.TxnOffsetCommitRequest(
                transactional_id=body.transactional_id,
                group_id=body.group,
                producer_id=body.producer_id,
                producer_epoch=body.producer_epoch,
                topics=[kp.TxnOffsetCommitRequestTopic(body.topic, partitions)],
            )
            r = await self._call(node, request, TXN_OFFSET_COMMIT_VERSION, timeout)
            code = next((p.error_code for t in r.topics for p in t.partitions if p.error_code), 0)
        return q.TxnAnswer(code, error_name(code))

    async def _call(self, node: str, request: Any, version: int, timeout: float) -> Any:
        data = await self._send(node, request.API_KEY, version, request, timeout)
        return kp.response_type(request.API_KEY).decode(data, version)

    async def close(self) -> None:
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._conns = {}
