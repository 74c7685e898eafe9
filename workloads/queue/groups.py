"""The queue's consumer group (``--sub-via subscribe``, Jepsen's ``:sub-via #{:subscribe}``): a
subscribed process's membership, polls of every partition the group gives it, and commits.

A process ``subscribe``s instead of assigning: it joins the consumer group ``kraftwerk-queue`` (the
coordinator and a client-side range assignor choose its partitions, rebalancing as members come,
leave and crash), its polls read every assigned partition (``{key: [[offset, value], ...]}``), and
``commit`` ops commit its positions with its generation (``{"generation": g, "offsets": {key: offset}}``;
a commit that ends ``info`` carries the same value: what it tried to commit). The completion of a poll
that joined the group (JoinGroup, SyncGroup, OffsetFetch) also records the assignment it began,
``"assigned": {"generation": g, "start": {key: s}, "committed": {key: c}}``: the position each assigned
partition starts from and the committed offset OffsetFetch answered (-1: none; the start is then 0), so
the checker can tell a start past the group's commits (``start-past-commit``). Processes also subscribe
again now and then (a rebalance), sometimes take long to process what they polled before committing it
(the group may rebalance without them meanwhile), and ``crash`` (an ``info``: a fresh client takes over
and the old member's session expires). The final drain still assigns.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from workloads import generator as gen
from workloads.protocol import Failure, Reply, Step
from workloads.queue.bodies import (
    CommitOffsets,
    FetchOffsets,
    FindCoordinator,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    Metadata,
    SyncGroup,
)
from workloads.queue.consumer import ConsumingClient
from workloads.queue.errors import COORDINATOR_ERRORS
from workloads.queue.state import QueueState
from workloads.queue.topic import TOPIC, partition_of

GROUP = "kraftwerk-queue"  # the consumer group of --sub-via subscribe
SESSION_TIMEOUT_MS = 4000
REBALANCE_TIMEOUT_MS = 1500
HEARTBEAT_INTERVAL_S = 1.0  # a subscribed poll sends a Heartbeat first when the last one is older
MAX_JOINS = 3  # JoinGroup attempts within one op
UNKNOWN_MEMBER_ID = 25
REBALANCE_ERRORS = frozenset({22, 27})  # ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: join again
MEMBER_ID_REQUIRED = 79


def range_assignment(members: Sequence[str], all_keys: Sequence[str]) -> dict[str, list[str]]:
    """The group leader's assignment: Kafka's range assignor over the members in id order."""
    ordered = sorted(members)
    per, extra = divmod(len(all_keys), len(ordered)) if ordered else (0, 0)
    out, start = {}, 0
    for i, member in enumerate(ordered):
        n = per + (1 if i < extra else 0)
        out[member] = list(all_keys[start : start + n])
        start += n
    return out


class GroupClient(ConsumingClient):
    """The client's group paths. A subscribed process is a member of GROUP: its polls (no key) join the
    group when needed (FindCoordinator, JoinGroup, SyncGroup with the leader's range assignment, then the
    committed offsets as positions), heartbeat when the last heartbeat is older than HEARTBEAT_INTERVAL_S,
    and fetch every assigned partition; a poll's value is {key: [[offset, value], ...]}. `commit` commits
    the positions of the assigned partitions with the member's generation (and does not heartbeat first:
    a member that missed a rebalance commits with its old generation, which the coordinator must refuse);
    its value is {"generation": g, "offsets": {key: offset}}."""

    def __init__(self, workload: QueueState, process: int, rng: random.Random, thread: int | None = None) -> None:
        super().__init__(workload, process, rng, thread)
        # a subscribed poll's progress: join attempts, keys still to fetch, what was read, errors
        self.joins = 0
        self.gkeys: list[str] = []
        self.gread: dict[str, list] = {}
        self.gerrors: list[str] = []
        self.committing: dict[str, Any] = {}  # the outstanding commit: {"generation": g, "offsets": {key: offset}}

    def _subscribe(self, value: Any) -> Step:
        c = self.consumer
        if c.subscribed and c.member_id and c.coordinator is not None:
            return self._request("g-leave", c.coordinator, LeaveGroup(GROUP, c.member_id))
        c.subscribe()
        c.member_id, c.generation = "", -1
        return self._done("ok", list(value))

    def _group_poll(self) -> Step:
        if not self.consumer.subscribed:
            return self._done("fail", None, "not-subscribed")
        self.joins, self.gkeys, self.gread, self.gerrors = 0, [], {}, []
        return self._ensure_member()

    def _now(self) -> int:
        return int(self.op.get("time") or 0)

    def _ensure_member(self) -> Step:
        c = self.consumer
        if c.coordinator is None:
            return self._request("g-find", self._random_node(), FindCoordinator(GROUP))
        if not c.joined:
            self.joins += 1
            if self.joins > MAX_JOINS:
                return self._done("fail", None, "rebalancing")
            body = JoinGroup(GROUP, c.member_id, SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS, TOPIC.encode())
            return self._request("g-join", c.coordinator, body, REBALANCE_TIMEOUT_MS / 1000 + self.workload.timeout_s)
        if self._now() - c.last_heartbeat >= int(HEARTBEAT_INTERVAL_S * gen.SECOND):
            return self._request("g-heartbeat", c.coordinator, Heartbeat(GROUP, c.generation, c.member_id))
        self.gkeys = list(c.assigned)
        return self._next_fetch()

    def _next_fetch(self) -> Step:
        c = self.consumer
        while self.gkeys:
            key = self.gkeys[0]
            leader = self._fetch_leader(key)
            if leader is None:
                return self._request("g-metadata", self._random_node(), Metadata(TOPIC))
            return self._request("g-fetch", leader, self._fetch(key))
        if self.gerrors and not self.gread:
            return self._done("fail", None, self.gerrors[0])
        if any(self.gread.values()):
            c.commit_due = True
        return self._done("ok", dict(self.gread), self.gerrors[0] if self.gerrors else None)

    def _commit(self) -> Step:
        c = self.consumer
        c.commit_due = False
        if not c.subscribed or not c.joined or c.coordinator is None:
            return self._done("fail", None, "not-a-member")
        offsets = tuple((partition_of(k), c.positions.get(k, 0)) for k in c.assigned)
        if not offsets:
            return self._done("ok", {"generation": c.generation, "offsets": {}})
        self.committing = {"generation": c.generation, "offsets": {k: c.positions.get(k, 0) for k in c.assigned}}
        epochs = tuple((partition_of(k), c.epochs.get(k, -1)) for k in c.assigned)
        body = CommitOffsets(GROUP, c.generation, c.member_id, TOPIC, offsets, epochs)
        return self._request("g-commit", c.coordinator, body)

    def _group_answer(self, answer: Reply | Failure) -> Step:
        c, stage = self.consumer, self.stage
        if stage == "g-leave":
            c.subscribe()
            c.member_id, c.generation = "", -1
            return self._done("ok", list(self.op.get("value") or ()))
        if stage in ("g-fetch", "g-metadata"):
            return self._group_fetched(answer)
        if isinstance(answer, Failure):
            c.coordinator = None
            if stage == "g-commit":  # it may have been applied: say what it tried to commit
                return self._done("info", self.committing, answer.reason)
            return self._done("fail", None, answer.reason)
        body = answer.body
        error = body.error
        if stage == "g-commit":
            if error == 0:
                return self._done("ok", self.committing)
            if error in REBALANCE_ERRORS or error == UNKNOWN_MEMBER_ID:
                c.rejoin(forget_member=error == UNKNOWN_MEMBER_ID)
                return self._done("fail", None, body.error_name)
            if error in COORDINATOR_ERRORS:
                c.coordinator = None
                if error != 14:  # not coordinator / not available: the append may have happened
                    return self._done("info", self.committing, body.error_name)
            return self._done("fail", None, body.error_name)
        if error in COORDINATOR_ERRORS:
            c.coordinator = None
            if stage == "g-find":
                return self._done("fail", None, body.error_name)
            return self._ensure_member()
        if stage == "g-find":
            c.coordinator = self._found(body, error)
            if c.coordinator is None:
                return self._done("fail", None, body.error_name if error else "unknown-coordinator")
            return self._ensure_member()
        if error == UNKNOWN_MEMBER_ID:
            c.rejoin(forget_member=True)
            return self._ensure_member()
        if error in REBALANCE_ERRORS:
            c.rejoin()
            return self._ensure_member()
        if stage == "g-join":
            if error == MEMBER_ID_REQUIRED:
                c.member_id = body.member_id
                return self._ensure_member()
            if error != 0:
                return self._done("fail", None, body.error_name)
            c.member_id, c.generation = body.member_id, body.generation
            assignments: tuple[tuple[str, bytes], ...] = ()
            if body.leader == body.member_id:
                plan = range_assignment([m for m, _ in body.members], self.workload.all_keys())
                assignments = tuple((m, json.dumps(ks).encode()) for m, ks in sorted(plan.items()))
            return self._request("g-sync", c.coordinator, SyncGroup(GROUP, c.generation, c.member_id, assignments))
        if stage == "g-sync":
            if error != 0:
                return self._done("fail", None, body.error_name)
            try:
                assigned = [str(k) for k in json.loads(body.assignment or b"[]")]
            except ValueError:
                return self._done("fail", None, "bad-assignment")
            c.assigned = assigned
            partitions = tuple(partition_of(k) for k in assigned)
            return self._request("g-offsets", c.coordinator, FetchOffsets(GROUP, TOPIC, partitions))
        if stage == "g-offsets":
            if error != 0:
                return self._done("fail", None, body.error_name)
            committed = {f"{TOPIC}-{p}": o for p, o in body.offsets}
            c.positions = {k: max(0, committed.get(k, -1)) for k in c.assigned}
            # the committed leader epoch: no fetch of a key goes to a leader older than the one it was read at
            epochs = {f"{TOPIC}-{p}": e for p, e in body.leader_epochs}
            c.epochs = {k: epochs[k] for k in c.assigned if committed.get(k, -1) >= 0 and epochs.get(k, -1) >= 0}
            # where each newly assigned partition starts, and the committed offset (-1: none) it came from
            self.gassigned = {
                "generation": c.generation,
                "start": dict(c.positions),
                "committed": {k: committed.get(k, -1) for k in c.assigned},
            }
            c.polled, c.at_end = set(), set()
            c.joined = True
            c.last_heartbeat = self._now()
            return self._ensure_member()
        # g-heartbeat
        if error != 0:
            return self._done("fail", None, body.error_name)
        c.last_heartbeat = self._now()
        return self._ensure_member()

    def _group_fetched(self, answer: Reply | Failure) -> Step:
        key = self.gkeys[0]
        if isinstance(answer, Failure):
            self.leaders.pop(key, None)
            self.gerrors.append(answer.reason)
            self.gkeys.pop(0)
            return self._next_fetch()
        body = answer.body
        if self.stage == "g-metadata":
            self._learn(body)
            if self._fetch_leader(key) is None:
                self.gerrors.append(self._no_leader(key))
                self.gkeys.pop(0)
            return self._next_fetch()
        self.gkeys.pop(0)
        if body.error != 0:
            self._fetch_failed(key, body)
            self.gerrors.append(body.error_name)
            return self._next_fetch()
        self.gread[key] = self._consume(key, body)
        self._read_at(key)
        return self._next_fetch()
