"""The workloads' transport to simulated nodes: a request body in, a reply (or a timeout) out.

`SimTransport.send(link, request, deliver)` carries a request over the simulated network (on the
client's own link, never partitioned from the harness, as on real clusters) and calls `deliver`
once: with the `Reply` when the node's answer arrives, or `Failure` when the request times out or
the node closes it. A register `KvRequest` goes to the node's `client_request`; a queue body
(`workloads.queue.bodies`: Metadata, Produce, Fetch, CreateTopic, InitProducerId, and the group bodies of
`--sub-via subscribe`, which go to `group_call`, and the transaction bodies of `--txn`:
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn to `txn_call`, TxnOffsetCommit to `group_call`)
to its broker `client_call` as the broker message it stands for. A fetch answer's batches become
records as a consumer returns them (`workloads.queue.bodies.visible_records`: no control batches, no
aborted records for read_committed). An acks=0 produce is answered `Reply(None)` once sent, as no answer comes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.sim.engine import MS
from nodes import broker as bm
from nodes.broker import group_messages as gm
from nodes.broker import txn_messages as tm
from nodes.broker.batch import NewBatch
from nodes.broker.messages import InitProducerIdRequest
from nodes.broker.producer_state import ProducerBatch, marker_of, producer_of
from workloads.protocol import Answer, Failure, Reply, Request
from workloads.queue import bodies
from workloads.register import KvReply, KvRequest


class _Outstanding:
    """One request in flight: what the simulation routes the node's reply (or its closing) to."""

    __slots__ = ("name", "deliver", "answered", "body")

    def __init__(self, name: str, deliver: Callable[[Answer], None], body: Any) -> None:
        self.name = name  # the client's network link
        self.deliver = deliver
        self.answered = False
        self.body = body

    def _answer(self, answer: Answer) -> None:
        if not self.answered:
            self.answered = True
            self.deliver(answer)

    def reply(self, request_id: int, effect: Any, node_name: str) -> None:
        if self.answered:
            return  # a late answer (after its timeout, or to an acks=0 produce)
        if isinstance(self.body, bodies.REQUESTS):
            self._answer(Reply(broker_answer(self.body, effect.response)))
            return
        leader = effect.leader_id
        self._answer(Reply(KvReply(effect.type, effect.value, effect.error, None if leader is None else f"n{leader}")))

    def closed(self, request_id: int) -> None:
        self._answer(Failure("closed", sent=True))

    def timeout(self) -> None:
        self._answer(Failure("timeout", sent=True))


class SimTransport:
    """Sends the requests of simulated clients to `sim`'s nodes."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim

    def send(self, link: str, request: Request, deliver: Callable[[Answer], None]) -> None:
        sim = self.sim
        body = request.body
        node = sim.nodes[int(request.node[1:])]
        pending = _Outstanding(link, deliver, body)
        request_id = sim.new_request(pending)
        if isinstance(body, KvRequest):
            args: tuple[Any, ...] = (node.client_request, pending, request_id, body.f, body.key, body.value)
        elif isinstance(body, bodies.REQUESTS):
            args = (node.client_call, pending, request_id, *broker_call(body))
        else:
            raise TypeError(f"simulated nodes cannot serve a {type(body).__name__}")
        sim.net.send(link, node.name, *args, partitionable=False)
        if isinstance(body, bodies.Produce) and body.acks == 0:
            sim.sched.after(0, pending._answer, Reply(None))
            return
        sim.sched.after(int(request.timeout_s * 1000) * MS, pending.timeout)


# ---------------------------------------------------------------------------- queue bodies (broker messages)


def broker_call(body: Any) -> tuple[str, Any]:
    """The broker client call (method, request) a queue body is."""
    if isinstance(body, bodies.GROUP_REQUESTS):
        return "group_call", _group_request(body)
    if isinstance(body, bodies.TXN_REQUESTS):
        return _txn_request(body)
    if isinstance(body, bodies.Metadata):
        return "metadata", bm.MetadataRequest((body.topic,))
    if isinstance(body, bodies.Produce):
        tp = bm.TopicPartition(body.topic, body.partition)
        # one record per batch: the batch's data is the value itself, its base offset the record's offset
        producer = None
        if body.producer_id >= 0:
            producer = ProducerBatch(body.producer_id, body.producer_epoch, body.sequence, 1, body.transactional)
        batch = NewBatch(body.value, 1, producer=producer)
        return "produce", bm.ProduceRequest(body.acks, body.timeout_ms, (bm.ProducePartition(tp, (batch,)),))
    if isinstance(body, bodies.Fetch):
        epoch = body.leader_epoch if body.leader_epoch >= 0 else None  # KIP-320's current_leader_epoch
        part = bm.FetchPartition(bm.TopicPartition(body.topic, body.partition), body.offset, current_leader_epoch=epoch)
        request = bm.FetchRecordsRequest(
            (part,), max_wait_ms=body.max_wait_ms, min_bytes=1, isolation_level=body.isolation_level
        )
        return "fetch", request
    if isinstance(body, bodies.InitProducerId):
        if body.transactional_id is None:
            return "init_producer_id", InitProducerIdRequest()
        return "init_producer_id", InitProducerIdRequest(body.transactional_id, body.transaction_timeout_ms)
    if isinstance(body, bodies.CreateTopic):
        if body.assignments:
            placed = tuple((p, tuple(bodies.broker_id(n) for n in r)) for p, r in body.assignments)
            topic = bm.NewTopic(body.topic, -1, -1, placed, configs=body.configs)
        else:
            topic = bm.NewTopic(body.topic, body.partitions, body.replication_factor, configs=body.configs)
        return "create_topics", bm.CreateTopicsRequest((topic,), timeout_ms=body.timeout_ms)
    raise TypeError(f"not a queue request body: {body!r}")


def _txn_request(body: Any) -> tuple[str, Any]:
    if isinstance(body, bodies.AddPartitionsToTxn):
        parts = tuple(bm.TopicPartition(body.topic, p) for p in body.partitions)
        return "txn_call", tm.AddPartitionsToTxnRequest(
            body.transactional_id, body.producer_id, body.producer_epoch, parts
        )
    if isinstance(body, bodies.AddOffsetsToTxn):
        return "txn_call", tm.AddOffsetsToTxnRequest(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group
        )
    if isinstance(body, bodies.EndTxn):
        return "txn_call", tm.EndTxnRequest(body.transactional_id, body.producer_id, body.producer_epoch, body.commit)
    offsets = tuple(gm.CommitOffset(bm.TopicPartition(body.topic, p), o) for p, o in body.offsets)
    request = gm.TxnOffsetCommitRequest(
        body.transactional_id, body.group, body.producer_id, body.producer_epoch, offsets
    )
    return "group_call", request


def _first_error(errors: Any) -> bm.BrokerError:
    return next((e for _, e in errors if e != bm.BrokerError.NONE), bm.BrokerError.NONE)


def txn_answer(body: Any, r: Any) -> bodies.TxnAnswer:
    """The queue reply body for the coordinators' answer `r` to a transaction body."""
    if isinstance(body, bodies.AddPartitionsToTxn | bodies.TxnOffsetCommit):
        error = _first_error(r.errors)
    else:
        error = r.error
    return bodies.TxnAnswer(int(error), _name(error))


def _group_request(body: Any) -> Any:
    if isinstance(body, bodies.FindCoordinator):
        return gm.FindCoordinatorRequest((body.group,), body.key_type)
    if isinstance(body, bodies.JoinGroup):
        return gm.JoinGroupRequest(
            body.group,
            body.member_id,
            body.session_timeout_ms,
            body.rebalance_timeout_ms,
            "consumer",
            (("range", body.subscription),),
            require_known_member=True,
            client_id="kraftwerk-queue",
        )
    if isinstance(body, bodies.SyncGroup):
        return gm.SyncGroupRequest(body.group, body.generation, body.member_id, body.assignments)
    if isinstance(body, bodies.Heartbeat):
        return gm.HeartbeatRequest(body.group, body.generation, body.member_id)
    if isinstance(body, bodies.LeaveGroup):
        return gm.LeaveGroupRequest(body.group, (body.member_id,))
    if isinstance(body, bodies.FetchOffsets):
        return gm.OffsetFetchRequest(body.group, tuple(bm.TopicPartition(body.topic, p) for p in body.partitions))
    epochs = dict(body.leader_epochs)
    offsets = tuple(gm.CommitOffset(bm.TopicPartition(body.topic, p), o, epochs.get(p, -1)) for p, o in body.offsets)
    return gm.OffsetCommitRequest(body.group, body.generation, body.member_id, offsets)


def _name(error: bm.BrokerError) -> str:
    return error.name.lower()


def group_answer(body: Any, r: Any) -> Any:
    """The queue reply body for the group coordinator's answer `r` to `body`."""
    if isinstance(body, bodies.FindCoordinator):
        c = r.coordinators[0]
        return bodies.CoordinatorFound(int(c.error), _name(c.error), f"n{c.node_id}" if c.node_id >= 0 else None)
    if isinstance(body, bodies.JoinGroup):
        return bodies.GroupJoined(int(r.error), _name(r.error), r.generation, r.leader, r.member_id, r.members)
    if isinstance(body, bodies.SyncGroup):
        return bodies.GroupSynced(int(r.error), _name(r.error), r.assignment)
    if isinstance(body, bodies.Heartbeat | bodies.LeaveGroup):
        return bodies.GroupAnswer(int(r.error), _name(r.error))
    if isinstance(body, bodies.FetchOffsets):
        return bodies.OffsetsFetched(
            int(r.error),
            _name(r.error),
            tuple((o.partition.partition, o.offset) for o in r.offsets),
            tuple((o.partition.partition, o.leader_epoch) for o in r.offsets),
        )
    error = _first_error(r.errors)
    return bodies.OffsetsCommitted(int(error), _name(error))


def _served(b: Any) -> bodies.ServedBatch:
    marker = marker_of(b)
    if marker is not None:
        return (b.base_offset, marker.producer_id, True, True, ())
    producer = producer_of(b)
    if producer is not None:
        return (b.base_offset, producer.producer_id, producer.transactional, False, ((b.base_offset, b.data),))
    return (b.base_offset, -1, False, False, ((b.base_offset, b.data),))


def broker_answer(body: Any, response: Any) -> Any:
    """The queue reply body for the broker's `response` to `body`."""
    if isinstance(body, bodies.GROUP_REQUESTS):
        return group_answer(body, response)
    if isinstance(body, bodies.TXN_REQUESTS):
        return txn_answer(body, response)
    if isinstance(body, bodies.Metadata):
        for topic in response.topics:
            if topic.name == body.topic and topic.error == bm.BrokerError.NONE:
                return bodies.MetadataReply(
                    tuple(
                        bodies.PartitionInfo(
                            p.partition,
                            f"n{p.leader}" if p.leader is not None and p.leader >= 0 else None,
                            len(p.isr),
                            int(p.error),
                            p.leader_epoch,
                        )
                        for p in topic.partitions
                    )
                )
        return bodies.MetadataReply(None)
    if isinstance(body, bodies.Produce):
        part = response.partitions[0]
        return bodies.Produced(int(part.error), part.error.name.lower(), part.base_offset)
    if isinstance(body, bodies.Fetch):
        if response.error != bm.BrokerError.NONE:
            return bodies.Fetched(int(response.error), response.error.name.lower())
        part = response.partitions[0]
        if part.error != bm.BrokerError.NONE:
            return bodies.Fetched(int(part.error), part.error.name.lower())
        # one record per batch: its data is the value itself (a control batch's is the marker)
        served = [_served(b) for b in part.batches]
        return bodies.fetched(
            served, part.aborted_transactions, body.isolation_level == 1, part.last_stable_offset, part.high_watermark
        )
    if isinstance(body, bodies.InitProducerId):
        error = response.error
        return bodies.ProducerId(int(error), error.name.lower(), response.producer_id, response.producer_epoch)
    result = response.topics[0]
    return bodies.TopicCreated(int(result.error), result.error.name.lower(), result.error_message)
