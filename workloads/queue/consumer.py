"""The queue's consumer: a process's polls of one partition, the fetch rules every poll follows, and the
final drain that reads every partition to its end (the process's assigned partitions and positions are
its `workloads.queue.state.Consumer`).

As a KIP-320 consumer, a Fetch carries the leader epoch the metadata named (``current_leader_epoch``:
a node leading an older or newer epoch answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, and the
next poll asks for metadata again), and a poll never fetches from a leader whose epoch is older than
the newest one the client has seen named or the one its position was read at (or, for a group member,
committed with: commits carry it); it fails ``stale-metadata`` instead, so a stale leader's shorter log
cannot answer OFFSET_OUT_OF_RANGE and reset the position. A poll changes nothing, so a poll that failed
or timed out is `fail`, and the position only moves on an `ok` poll, whose value is
``[[offset, value], …]``. A poll of a partition the process is not assigned (a replayed plan whose
assign was shrunk away or went to a process that crashed since) fails at once with `not-assigned`, as a
consumer cannot fetch what it does not own.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from workloads import generator as gen
from workloads.protocol import Completion, Request
from workloads.queue.bodies import Fetch, Fetched
from workloads.queue.client_base import ClientBase
from workloads.queue.errors import OFFSET_OUT_OF_RANGE, REFRESH
from workloads.queue.state import QueueState
from workloads.queue.topic import TOPIC, decode_value, partition_of

END_QUIET_S = 4.0  # the final drain gives up on a partition whose end has not moved for this long
END_POLL_S = 0.05  # ... and polls a partition at its end this much apart


class ConsumingClient(ClientBase):
    """The client's polls of one assigned partition (``poll`` with a key), and what every poll (the
    group's and the transactions' too) does with a fetch's answer."""

    def __init__(self, workload: QueueState, process: int, rng: random.Random, thread: int | None = None) -> None:
        super().__init__(workload, process, rng, thread)
        self.fetch_epoch = -1  # the current_leader_epoch of the outstanding fetch

    def _fetch_leader(self, key: str) -> str | None:
        """The leader to fetch `key` from: the cached one, unless a newer leader epoch is known than the
        metadata that named it (from another answer, or the epoch the position was read at or committed
        with). As a KIP-320 consumer, never fetch from a leader older than what the position has seen."""
        leader = self.leaders.get(key)
        if leader is None:
            return None
        need = max(self.seen_epochs.get(key, -1), self.consumer.epochs.get(key, -1))
        return leader if self.leader_epochs.get(key, -1) >= need else None

    def _fetch(self, key: str) -> Fetch:
        self.fetch_epoch = self.leader_epochs.get(key, -1)
        offset = self.consumer.positions.get(key, 0)
        return Fetch(TOPIC, partition_of(key), offset, leader_epoch=self.fetch_epoch)

    def _read_at(self, key: str) -> None:
        """An ok fetch: the position is now known at the fetch's leader epoch."""
        if self.fetch_epoch > self.consumer.epochs.get(key, -1):
            self.consumer.epochs[key] = self.fetch_epoch

    def _poll(self, node: str) -> Request:
        return self._request("poll", node, self._fetch(self.op["key"]))

    def _no_leader(self, key: str) -> str:
        """Why a fetch of `key` has no leader after a metadata answer."""
        return "stale-metadata" if key in self.leaders else "leader-not-available"

    def _fetch_failed(self, key: str, fetched: Fetched) -> None:
        """A fetch of `key` answered an error: forget a leader that moved; OFFSET_OUT_OF_RANGE (the log was
        truncated below the position) sends the position back to the beginning (auto.offset.reset=earliest).
        A poll that chose its leader with `_fetch_leader` has that answer from a leader of an epoch no older
        than any the position was read at."""
        if fetched.error in REFRESH:
            self.leaders.pop(key, None)
        if fetched.error == OFFSET_OUT_OF_RANGE:
            self.consumer.positions[key] = 0

    def _consume(self, key: str, fetched: Fetched) -> list[list[Any]]:
        """The records of an ok fetch of `key` from the position on, ``[[offset, value], ...]``; the
        position moves past them."""
        start = self.consumer.positions.get(key, 0)
        pairs = [[offset, decode_value(data)] for offset, data in fetched.records if offset >= start]
        if pairs:
            self.consumer.positions[key] = pairs[-1][0] + 1
        return pairs

    def _polled(self, key: str, fetched: Fetched) -> Completion:
        consumer = self.consumer
        if fetched.error != 0:
            self._fetch_failed(key, fetched)
            return self._done("fail", None, fetched.error_name)
        pairs = self._consume(key, fetched)
        self._read_at(key)
        consumer.polled.add(key)
        if pairs:
            consumer.at_end.discard(key)
        elif consumer.positions.get(key, 0) >= fetched.high_watermark:
            consumer.at_end.add(key)
        return self._done("ok", pairs)


class Drain(gen.Generator):
    """One thread's final phase: assign its partitions (positions back to 0), then poll each to its end.

    A key is done once it has been polled ok since the assign and the process has read past the
    highest acknowledged offset, or its end (an empty poll at the high watermark) has not moved for
    END_QUIET_S, which is what a lost acknowledged tail looks like. Every key is polled ok at least
    once, so a run whose sends all failed is still observed (valid), not unknown. With --txn, a key
    whose last read_committed poll stopped at an open transaction (its last stable offset below the
    high watermark) is not done: the records after it may be committed (a transaction whose EndTxn
    ended `info`, or an `ok` one behind a transaction left open by a crash or an error), and become
    visible once the coordinator completes or times out the open one (Jepsen's final polls likewise
    go on until every known offset has been seen; the final phase's time limit bounds the wait).
    """

    def __init__(self, workload: QueueState, thread: int, keys: Sequence[str]) -> None:
        self.workload, self.thread, self.keys = workload, thread, list(keys)
        self.assigned_by: Any = None  # the process that assigned the keys (from offset 0) in this phase
        self.end_since: dict[str, int] = {}

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
                self.end_since = {}
                return gen.fill({"f": "assign", "key": None, "value": list(self.keys), "process": process}, ctx), self
            if key in consumer.at_end:
                self.end_since.setdefault(key, ctx.time)
            else:
                self.end_since.pop(key, None)
            ended = self.end_since.get(key)
            read_all = consumer.positions.get(key, 0) > self.workload.acked_max.get(key, -1)
            quiet = ended is not None and ctx.time - ended >= int(END_QUIET_S * gen.SECOND)
            if key in consumer.polled and key not in consumer.held and (read_all or quiet):
                self.keys.pop(0)
                continue
            pause = int(END_POLL_S * gen.SECOND) if ended is not None else 0
            poll = {"f": "poll", "key": key, "value": None, "process": process, "time": ctx.time + pause}
            if self.workload.txn:  # a read_committed poll of every assigned key, as the checker reads txn ops
                self.workload.draining = True
                poll = {**poll, "f": "txn", "key": None, "value": [["poll"]]}
            return gen.fill(poll, ctx), self
        return None
