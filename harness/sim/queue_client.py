"""Simulated Kafka-style clients for the queue workload (one operation at a time, like a Jepsen worker).

A client keeps a metadata cache (partition → leader) and asks any node for
metadata when it does not know a leader; it produces single-record batches
with the configured acks and fetches from its own positions. The invocation is
recorded before any metadata lookup; the timeout covers the whole operation.

Given a plan (the `assign`, `send` and `poll` operations of a stored schedule),
a client issues exactly those operations, each no earlier than its recorded
time, instead of drawing them: that is how a queue schedule is replayed or
shrunk. Its random stream is drawn at the same points either way, so a plan
taken from a run replays that run byte for byte. A planned poll of a partition
the client is not assigned (its assign was shrunk away, or a crash cleared it)
is skipped, as a consumer cannot fetch a partition it does not own.
"""

from __future__ import annotations

import random
from typing import Any

from harness.sim.engine import MS
from harness.streams import stream
from nodes.broker import (
    FetchPartition,
    FetchRecordsRequest,
    MetadataRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from nodes.broker.batch import NewBatch
from workloads.queue import TOPIC, QueueGenerator, QueueOp, produce_outcome

# answers that mean "ask someone else who leads this partition"
REFRESH = {3, 5, 6, 74, 75}


def encode_value(value: int) -> bytes:
    return str(value).encode()


def decode_value(data: bytes) -> Any:
    try:
        return int(data)
    except ValueError:
        return data.decode("utf-8", "replace")


class SimQueueClient:
    def __init__(self, sim: Any, slot: int, rng: random.Random, generator: QueueGenerator) -> None:
        self.sim = sim
        self.slot = slot
        self.name = f"c{slot}"  # its own network links, so its traffic never shifts another client's timing
        self.process = slot
        self.rng = rng
        self.final_rng = stream("final", sim.opts.seed, slot)
        self.generator = generator
        self.leaders: dict[str, int] = {}
        self.assigned: list[str] = []
        self.positions: dict[str, int] = {}
        self.current: tuple[int, QueueOp] | None = None
        self.pending: tuple[int, QueueOp, str] | None = None  # an in-flight request: (id, op, node)
        self.final_keys: list[str] = []
        self.final_polled: set[str] = set()  # keys a final poll has read (even if empty)
        self.done = False
        self.plan: list[dict[str, Any]] | None = None

    # ----------------------------------------------------------------- scheduling
    def start(self) -> None:
        delay = self.rng.randint(0, self.sim.opts.think_ms * MS)
        self._next_at(self.sim.sched.now + delay)

    def _later(self) -> None:
        think = self.sim.opts.think_ms * MS
        rng = self.final_rng if self.sim.phase != "main" else self.rng
        delay = rng.randint(0, 2 * think) if think else 0
        if self.sim.phase == "main":
            self._next_at(self.sim.sched.now + delay)
        else:
            self.sim.sched.after(delay, self.next_op)

    def _next_at(self, when: int) -> None:
        """Schedule the next main-phase operation: after the think time, or at the plan's next step."""
        if self.plan is None:
            self.sim.sched.at(when, self.next_op)
        elif self.plan:
            self.sim.sched.at(max(self.sim.sched.now, self.sim.main_start + self.plan[0]["at"]), self.next_op)

    def _planned(self) -> QueueOp | None:
        """The plan's next operation if it is due (skipping polls of unassigned partitions)."""
        assert self.plan is not None
        sim = self.sim
        while self.plan:
            step = self.plan[0]
            due = sim.main_start + step["at"]
            if sim.sched.now < due:
                sim.sched.at(due, self.next_op)
                return None
            self.plan.pop(0)
            if step["f"] == "poll" and step["key"] not in self.assigned:
                continue
            value = list(step["value"]) if step["f"] == "assign" else step["value"]
            return QueueOp(step["f"], step["key"], value)
        return None

    def next_op(self) -> None:
        sim = self.sim
        if self.current is not None or self.done:
            return
        if sim.phase == "main":
            if sim.sched.now >= sim.main_end:
                return
            if self.plan is not None:
                planned = self._planned()
                if planned is None:
                    return
                op = planned
            else:
                op = self.generator.next(self.assigned)
        elif sim.phase == "final":
            op = self._final_op()
            if op is None:
                self.done = True
                return
        else:
            return
        self.invoke(op)

    def _final_op(self) -> QueueOp | None:
        """Drain every key given to this client: assign them, then poll each until it is read to the end.

        Every key is polled successfully at least once, even one with no acknowledged send: a run
        whose sends all failed is then still observed (valid), not unknown.
        """
        sim = self.sim
        if sim.sched.now >= sim.final_end:
            return None
        while self.final_keys:
            key = self.final_keys[0]
            if key not in self.assigned:
                return QueueOp("assign", None, list(self.final_keys))
            if self.positions.get(key, 0) > sim.acked_max.get(key, -1) and key in self.final_polled:
                self.final_keys.pop(0)
                continue
            return QueueOp("poll", key, None)
        return None

    # ----------------------------------------------------------------- operations
    def invoke(self, op: QueueOp) -> None:
        sim = self.sim
        if sim.phase == "main":
            value = list(op.value) if op.f == "assign" else op.value
            at = sim.sched.now - sim.main_start  # like the fault schedule: from the start of the main phase
            sim.op_log.append({"at": at, "client": self.slot, "f": op.f, "key": op.key, "value": value})
        self.current_id = sim.new_request(self)
        self.current = (self.current_id, op)
        sim.recorder.record(self.process, "invoke", op.f, op.value, key=op.key)
        if op.f == "assign":
            self.assigned = list(op.value)
            self.positions = {k: 0 for k in self.assigned}
            self._complete("ok", op.value, None, None)
            return
        sim.sched.after(sim.opts.timeout_ms * MS, self.timeout, self.current_id)
        self._dispatch()

    def _dispatch(self) -> None:
        """Send the current operation to its partition's leader, or ask for metadata first."""
        assert self.current is not None
        _, op = self.current
        assert op.key is not None
        sim = self.sim
        leader = self.leaders.get(op.key)
        rng = self.final_rng if sim.phase != "main" else self.rng
        if leader is None:
            node = sim.nodes[sim.node_ids[rng.randrange(len(sim.node_ids))]]
            rid = sim.new_request(self)
            self.pending = (rid, QueueOp("metadata", op.key, None), node.name)
            sim.net.send(
                self.name,
                node.name,
                node.client_call,
                self,
                rid,
                "metadata",
                MetadataRequest((TOPIC,)),
                partitionable=False,
            )
            return
        node = sim.nodes[leader]
        tp = TopicPartition.parse(op.key)
        rid = sim.new_request(self)
        self.pending = (rid, op, node.name)
        if op.f == "send":
            request: Any = ProduceRequest(
                sim.opts.acks,
                sim.opts.produce_timeout_ms,
                (ProducePartition(tp, (NewBatch(encode_value(op.value), 1),)),),
            )
            sim.net.send(self.name, node.name, node.client_call, self, rid, "produce", request, partitionable=False)
            if sim.opts.acks == 0:
                self.pending = None
                self._complete("info", op.value, node.name, "acks=0: no answer")
        else:
            request = FetchRecordsRequest(
                (FetchPartition(tp, self.positions.get(op.key, 0)),), max_wait_ms=100, min_bytes=1
            )
            sim.net.send(self.name, node.name, node.client_call, self, rid, "fetch", request, partitionable=False)

    def reply(self, request_id: int, effect: Any, node_name: str) -> None:
        if self.pending is None or self.pending[0] != request_id or self.current is None:
            return
        _, op, _ = self.pending
        self.pending = None
        response = effect.response
        if op.f == "metadata":
            for topic in response.topics:
                for p in topic.partitions:
                    key = f"{topic.name}-{p.partition}"
                    if p.leader is not None and p.leader >= 0:
                        self.leaders[key] = p.leader
                    else:
                        self.leaders.pop(key, None)
            if self.leaders.get(self.current[1].key or "") is None:
                # nobody leads it yet: give up on this operation definitely (nothing was sent)
                cur = self.current[1]
                self._complete("fail", cur.value, node_name, "leader-not-available")
                return
            self._dispatch()
            return
        if op.f == "send":
            part = response.partitions[0]
            error = int(part.error)
            outcome = produce_outcome(error)
            if error in REFRESH:
                self.leaders.pop(op.key or "", None)
            value = [part.base_offset, op.value] if outcome == "ok" else op.value
            if outcome == "ok":
                self.sim.note_ack(op.key, part.base_offset)
            self._complete(outcome, value, node_name, None if error == 0 else part.error.name.lower())
            return
        part = response.partitions[0]
        error = int(part.error)
        if error != 0:
            if error in REFRESH:
                self.leaders.pop(op.key or "", None)
            if error == 1:  # offset out of range: the log was truncated below our position
                self.positions[op.key or ""] = 0
            self._complete("fail", None, node_name, part.error.name.lower())
            return
        start = self.positions.get(op.key or "", 0)
        pairs = []
        for batch in part.batches:
            # single-record batches from our producers; the offset is the batch's base offset
            if batch.base_offset >= start:
                pairs.append([batch.base_offset, decode_value(batch.data)])
        if pairs:
            self.positions[op.key or ""] = pairs[-1][0] + 1
        if self.sim.phase == "final" and op.key is not None:
            self.final_polled.add(op.key)
        self._complete("ok", pairs, node_name, None)

    def timeout(self, request_id: int) -> None:
        if self.current is None or self.current_id != request_id:
            return
        _, op = self.current
        self.pending = None
        # a poll that timed out changed nothing; a send may still happen
        typ = "info" if op.f == "send" else "fail"
        self._complete(typ, op.value, None, "timeout")

    def _complete(self, typ: str, value: Any, node: str | None, error: str | None) -> None:
        assert self.current is not None
        _, op = self.current
        self.current = None
        self.sim.recorder.record(self.process, typ, op.f, value, key=op.key, node=node, error=error)
        if typ == "info":
            self.process += self.sim.opts.concurrency
            self.leaders.clear()
            self.assigned = []
            self.positions = {}
        self._later()

    def closed(self, request_id: int) -> None:
        """The node closed our connection (an acks=0 produce failed): nothing to answer."""
        if self.pending is not None and self.pending[0] == request_id:
            self.pending = None
