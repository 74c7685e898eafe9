"""KVNode: a linearizable register service on top of :class:`~nodes.raft.RaftNode` (sans-IO).

Every operation, reads included, is appended to the log by the leader and answered after it
commits and is applied, so reads are linearizable without any clock. With leader leases
(``RaftConfig.lease_reads``, off by default) the leader answers a read from its registers at
once while its lease holds (:meth:`~nodes.raft.RaftNode.lease_holds`, measured on the driver's
monotonic clock ``mono``), and through the log otherwise. A non-leader answers
``fail``/``not-leader`` naming the leader it knows. With the ``stale-read`` bug any node answers
reads at once from its local registers; with ``lease-wall-clock`` the lease is read on ``now``.

The driver API is RaftNode's (``start``, ``handle``, ``tick``, ``flushed``, ``resign``, ``shutdown``,
``next_deadline``) plus :meth:`KVNode.submit`; effects are RaftNode's except that raft
:class:`~nodes.raft.Reply` effects are replaced by :class:`ClientReply`. ``Committed`` effects
still pass through (for ``logs/<node>.jsonl`` dumps).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from ..raft import Committed, Error, QuorumState, RaftConfig, RaftNode, Record, Reply
from ..raft.bugs import STALE_READ
from ..raft.effects import Effect
from ..raft.messages import Message
from .commands import Command, CommandError, decode_command, encode_command
from .effects import FAIL, INFO, OK, ClientReply
from .machine import Outcome, RegisterMachine

KVEffect = Effect | ClientReply


class KVNode:
    """One replica of the register service. Arguments as for RaftNode."""

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int] | Mapping[int, Any],
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        bugs: Iterable[str] = frozenset(),
    ) -> None:
        self.raft = RaftNode(node_id, voters, config, rng, bugs)
        self.machine = RegisterMachine()

    @property
    def node_id(self) -> int:
        return self.raft.node_id

    @property
    def bugs(self) -> frozenset[str]:
        return self.raft.bugs

    # -- driver inputs (delegated)

    def start(
        self, now: int, persisted: QuorumState | None = None, log: Iterable[Record] = (), *, mono: int | None = None
    ) -> list[KVEffect]:
        return self._translate(self.raft.start(now, persisted, log, mono=mono))

    def handle(
        self, now: int, src: int, message: Message, reply_ctx: Any = None, *, mono: int | None = None
    ) -> list[KVEffect]:
        return self._translate(self.raft.handle(now, src, message, reply_ctx, mono=mono))

    def tick(self, now: int, *, mono: int | None = None) -> list[KVEffect]:
        return self._translate(self.raft.tick(now, mono=mono))

    def flushed(self, now: int, offset: int, *, mono: int | None = None) -> list[KVEffect]:
        return self._translate(self.raft.flushed(now, offset, mono=mono))

    def resign(self, now: int, *, mono: int | None = None) -> list[KVEffect]:
        return self._translate(self.raft.resign(now, mono=mono))

    def shutdown(self, now: int, timeout_ms: int, *, mono: int | None = None) -> list[KVEffect]:
        return self._translate(self.raft.shutdown(now, timeout_ms, mono=mono))

    def next_deadline(self) -> int | None:
        return self.raft.next_deadline()

    # -- client operations

    def submit(
        self, now: int, request_id: Any, f: str, key: str, value: Any = None, *, mono: int | None = None
    ) -> list[KVEffect]:
        """Start ``read``/``write``/``cas`` on ``key``; a ClientReply for ``request_id`` follows.

        Raises :class:`~nodes.kv.commands.CommandError` for a malformed operation.
        """
        command = Command(f, key, value)
        if f == "read" and STALE_READ in self.bugs:
            return [ClientReply(request_id, OK, self.machine.read(key))]  # the bug: no leadership/commit check
        if f == "read" and self.raft.lease_holds(now, mono=mono):
            return [ClientReply(request_id, OK, self.machine.read(key), None, self.node_id)]
        return self._translate(self.raft.append(now, encode_command(command), request_id, mono=mono))

    # -- plumbing

    def _translate(self, effects: list[Effect]) -> list[KVEffect]:
        out: list[KVEffect] = []
        outcomes: dict[int, Outcome | None] = {}
        for effect in effects:
            kind = type(effect)  # exact types (neither is subclassed): this runs on every step
            if kind is Committed:
                for record in effect.records:
                    outcomes[record.offset] = self._apply(record)
                out.append(effect)
            elif kind is Reply:
                out.append(self._client_reply(effect, outcomes))
            else:
                out.append(effect)
        return out

    def _apply(self, record: Record) -> Outcome | None:
        if record.offset != self.machine.applied:
            return None  # already applied (or a gap, which the raft core never produces)
        self.machine.applied = record.offset + 1
        if record.control:
            return None
        try:
            command = decode_command(record.payload)
        except CommandError as exc:
            return Outcome(False, None, f"bad-command: {exc}")
        return self.machine.apply(command)

    @staticmethod
    def _client_reply(reply: Reply, outcomes: dict[int, Outcome | None]) -> ClientReply:
        if reply.error is Error.NONE:
            outcome = outcomes.get(reply.offset) if reply.offset is not None else None
            if outcome is None:
                return ClientReply(reply.request_id, INFO, None, "unknown-outcome", reply.leader_id)
            if outcome.ok:
                return ClientReply(reply.request_id, OK, outcome.value, None, reply.leader_id)
            return ClientReply(reply.request_id, FAIL, outcome.value, outcome.error, reply.leader_id)
        if reply.error is Error.NOT_LEADER_OR_FOLLOWER:
            return ClientReply(reply.request_id, FAIL, None, "not-leader", reply.leader_id)
        return ClientReply(reply.request_id, INFO, None, "leadership-lost", reply.leader_id)
