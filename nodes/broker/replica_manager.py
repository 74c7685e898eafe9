"""ReplicaManager: the broker's partitions — produce (``append_records``, including transaction
markers from the coordinator origin), fetch (``fetch_messages``; read_committed up to the last
stable offset with the aborted transactions), ``list_offsets``, the leader's high watermark and
ISR rules, the delayed operations, partition-log flushing, and roles driven by the committed
metadata (docs/kraft.md §3 and §7; Kafka's ``ReplicaManager``/``Partition``). Sans-IO: everything goes
out through the :class:`~nodes.broker.host.BrokerHost`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..raft.config import MS
from ..raft.timing import next_lazy_flush
from . import bugs as B
from .batch import Batch
from .config import BrokerConfig, parse_bool
from .delayed import DelayedFetch, DelayedProduce, ProduceStatus
from .effects import AppendPartitionLog, FlushPartition, TruncatePartitionLog
from .errors import BrokerError
from .fetcher import ReplicaFetcher
from .group_messages import INTERNAL_TOPICS
from .host import BrokerHost
from .image import PartitionState
from .log import PartitionLog
from .messages import (
    COORDINATOR_ORIGIN,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterPartitionRequest,
    AlterPartitionResponse,
    EpochEndOffset,
    FetchedPartition,
    FetchPartition,
    FetchRecordsRequest,
    FetchRecordsResponse,
    ListedOffset,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProducedPartition,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)
from .partition import Partition, PendingIsr, Role
from .producer_state import Duplicate, TxnMarker, is_control, marker_of, producer_of
from .purgatory import Purgatory
from .topic_partition import TopicPartition


class ReplicaManager:
    def __init__(self, host: BrokerHost, config: BrokerConfig, bugs: frozenset[str], lazy_flush_interval_ms: int):
        self.host = host
        self.node_id = host.node_id
        self.config = config
        self.bugs = bugs
        self.lazy = B.LAZY_FLUSH in bugs
        self.lazy_interval = lazy_flush_interval_ms * MS
        self.lag_ns = config.replica_lag_time_max_ms * MS
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = Purgatory()
        self.fetch_purgatory = Purgatory()
        self.fetcher = ReplicaFetcher(self)
        self._dirty: set[TopicPartition] = set()
        # bumped whenever partitions may have been added or changed role, leader or leader epoch (only
        # load() and refresh() do that), so that views of the leadership can be cached between changes
        self.leadership_version = 0
        self._isr_check_at: int | None = None
        self._lazy_flush_at: int | None = None

    # ------------------------------------------------------------------ start-up

    def load(self, logs: Mapping[TopicPartition, Iterable[Batch]], now: int) -> None:
        """Partition logs recovered from disk (all of it counts as flushed)."""
        for tp, batches in sorted(logs.items()):
            self.partitions[tp] = self._new_partition(tp, PartitionLog(batches))
        self.leadership_version += 1
        if self.lazy:
            self._lazy_flush_at = next_lazy_flush(now, self.lazy_interval)

    # ------------------------------------------------------------------ helpers

    def _new_partition(self, tp: TopicPartition, log: PartitionLog) -> Partition:
        p = Partition(tp, self.node_id, log)
        if B.DEDUP_WINDOW_1 in self.bugs:
            p.producer_window = (1, True)
        p.epoch_fence = B.NO_EPOCH_FENCE not in self.bugs
        p.lso_ignores_open = B.LSO_IGNORES_OPEN in self.bugs
        return p

    def _min_isr(self, tp: TopicPartition) -> int:
        value = self.host.image.topic_config(tp.topic, "min.insync.replicas")
        return int(value) if value is not None else self.config.min_insync_replicas

    def unclean_allowed(self, tp: TopicPartition) -> bool:
        value = self.host.image.topic_config(tp.topic, "unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return parse_bool("unclean.leader.election.enable", value)

    def _eligible(self, broker_id: int, broker_epoch: int | None) -> bool:
        """May join the ISR / count for the HW: registered, unfenced, and (KIP-903) fetching
        with its current broker epoch."""
        reg = self.host.image.brokers.get(broker_id)
        if reg is None or reg.fenced:
            return False
        return broker_epoch is None or broker_epoch < 0 or reg.broker_epoch == broker_epoch

    def _touch(self, tp: TopicPartition) -> None:
        """Something delayed operations on ``tp`` wait for may have moved."""
        self._dirty.add(tp)

    def settle(self) -> None:
        """Retry delayed operations on every touched partition (end of each step)."""
        for _ in range(16):
            if not self._dirty:
                return
            dirty, self._dirty = sorted(self._dirty), set()
            for tp in dirty:
                self.produce_purgatory.check_and_complete(tp)
                self.fetch_purgatory.check_and_complete(tp)

    def _stale_producer(self, p: Partition) -> bool:
        """With ``stale-leader-produce``, a broker that once led ``p`` keeps acting on produce."""
        return B.STALE_LEADER_PRODUCE in self.bugs and p.led_epoch is not None

    # ------------------------------------------------------------------ roles from metadata

    def refresh(self) -> None:
        """Recompute every partition's role from the image (call after it changed)."""
        self.leadership_version += 1
        host = self.host
        image = host.image
        registered = host.broker_epoch() is not None
        may_lead = registered and image.is_eligible(self.node_id)
        seen: set[TopicPartition] = set()
        for tp, state in image.partitions():
            if self.node_id not in state.replicas and tp not in self.partitions:
                continue
            seen.add(tp)
            p = self.partitions.get(tp)
            if p is None:
                p = self.partitions[tp] = self._new_partition(tp, PartitionLog())
            self._apply_state(p, state, registered, may_lead)
        for tp, p in self.partitions.items():
            if tp not in seen and p.role is not Role.NONE:
                p.become_none(None)
                self._touch(tp)

    def _apply_state(self, p: Partition, state: PartitionState, registered: bool, may_lead: bool) -> None:
        me = self.node_id
        if not registered or me not in state.replicas:
            target = Role.NONE
        elif state.leader == me:
            target = Role.LEADER if may_lead else Role.NONE
        elif state.leader is not None:
            target = Role.FOLLOWER
        else:
            target = Role.NONE
        now = self.host.now
        if target is Role.LEADER:
            if p.role is Role.LEADER and p.leader_epoch == state.leader_epoch:
                p.set_state(state)
                p.update_replicas_for_leader()
            else:
                p.become_leader(state, now)
                self._schedule_isr_check(now)
            self._leader_progress(p)
        elif target is Role.FOLLOWER:
            if p.role is Role.FOLLOWER and p.leader == state.leader and p.leader_epoch == state.leader_epoch:
                p.set_state(state)
            else:
                p.become_follower(state)
        elif p.role is not Role.NONE or (p.leader, p.leader_epoch) != (state.leader, state.leader_epoch):
            p.become_none(state)
        else:
            p.set_state(state)
        self._touch(p.tp)

    # ------------------------------------------------------------------ leader bookkeeping

    def _leader_progress(self, p: Partition) -> None:
        """The leader's log end, durable end or ISR moved: maybe raise the HW; wake waiters."""
        if p.role is Role.LEADER:
            p.maybe_increment_hw(self.host.now, self.lag_ns, self._min_isr(p.tp), self.lazy, self._eligible)
        self._touch(p.tp)

    def _schedule_isr_check(self, now: int) -> None:
        if self._isr_check_at is None:
            self._isr_check_at = now + max(1, self.lag_ns // 2)

    def _request_isr(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        controller = self.host.controller_id()
        broker_epoch = self.host.broker_epoch()
        if controller is None or broker_epoch is None or p.pending_isr is not None:
            return
        ordered = tuple(r for r in p.replicas if r in set(new_isr))
        p.pending_isr = PendingIsr(ordered, p.partition_epoch, self.host.now, 0)
        self._send_isr_request(p, controller, broker_epoch)

    def _send_isr_request(self, p: Partition, controller: int, broker_epoch: int) -> None:
        pending = p.pending_isr
        assert pending is not None
        pending.correlation = self.host.next_correlation()
        pending.sent_at = self.host.now
        request = AlterPartitionRequest(
            self.node_id,
            broker_epoch,
            p.tp,
            p.leader_epoch,
            pending.partition_epoch,
            pending.new_isr,
            pending.correlation,
        )
        self.host.send(controller, request)

    def on_alter_partition_response(self, response: AlterPartitionResponse) -> None:
        p = self.partitions.get(response.partition)
        pending = p.pending_isr if p is not None else None
        if p is None or pending is None or pending.correlation != response.correlation:
            return
        if response.error is BrokerError.NONE and response.partition_epoch > p.partition_epoch:
            pending.acked = True  # decided; cleared when our image applies that partition epoch
        elif response.error is BrokerError.NOT_CONTROLLER and pending.is_expand(p.isr):
            pass  # maybe appended before the controller lost its role: still pending, sent again at the timeout
        else:
            p.pending_isr = None  # refused, or already applied: re-evaluate later
            self._leader_progress(p)

    def _check_isr(self, now: int) -> None:
        """Periodic (every replica.lag.time.max.ms / 2): shrink the ISR of led partitions."""
        timeout = self.config.request_timeout_ms * MS
        for p in self.partitions.values():
            if p.role is not Role.LEADER:
                continue
            pending = p.pending_isr
            if pending is not None and not pending.acked and now - pending.sent_at > timeout:
                controller, broker_epoch = self.host.controller_id(), self.host.broker_epoch()
                if pending.is_expand(p.isr) and controller is not None and broker_epoch is not None:
                    # the expansion may yet commit: the HW keeps counting the joining replica (maximal
                    # ISR) until the image decides it, so ask again rather than give up on it
                    self._send_isr_request(p, controller, broker_epoch)
                    continue
                if not pending.is_expand(p.isr):
                    p.pending_isr = None  # a shrink: dropping it keeps the old, larger ISR counting
                    self._leader_progress(p)
            if p.pending_isr is not None:
                continue
            out = p.out_of_sync(now, self.lag_ns)
            if out:
                self._request_isr(p, tuple(r for r in p.isr if r not in out))

    # ------------------------------------------------------------------ produce

    def append_records(
        self, request: ProduceRequest, respond: Callable[[ProduceResponse], None], close: Callable[[str], None]
    ) -> None:
        """Produce. ``respond`` is called once (maybe later) unless acks=0; ``close`` is called
        instead when an acks=0 produce had an error."""
        now = self.host.now
        acks = request.acks
        if acks not in (-1, 0, 1):
            respond(
                ProduceResponse(
                    tuple(
                        ProducedPartition(pp.partition, BrokerError.INVALID_REQUIRED_ACKS) for pp in request.partitions
                    )
                )
            )
            return
        statuses: dict[TopicPartition, ProduceStatus] = {}
        for pp in request.partitions:
            if pp.partition in statuses:
                continue
            error = self._produce_precheck(pp, acks)
            if pp.partition.topic in INTERNAL_TOPICS and request.origin != COORDINATOR_ORIGIN:
                error = BrokerError.INVALID_TOPIC_EXCEPTION  # clients may not write internal topics
            if error is not BrokerError.NONE:
                statuses[pp.partition] = ProduceStatus(-1, -1, error, done=True)
                continue
            p = self.partitions[pp.partition]
            if p.role is Role.LEADER:
                epoch = p.leader_epoch
            else:  # stale-leader-produce: keep appending at the epoch we last led in
                epoch = max(p.led_epoch or 0, p.log.latest_epoch or 0)
            infos = [producer_of(b) for b in pp.batches]
            verdict = p.producers.validate(infos) if any(infos) else None
            markers = self._markers(p, pp, request.origin)
            if isinstance(markers, BrokerError):
                verdict = markers
            if isinstance(verdict, BrokerError):
                statuses[pp.partition] = ProduceStatus(-1, -1, verdict, done=True)
                continue
            if isinstance(verdict, Duplicate):  # a retry: answered with the original offsets once replicated
                statuses[p.tp] = ProduceStatus(verdict.first_offset, verdict.last_offset + 1)
                continue
            batches = p.append_as_leader(pp.batches, epoch)
            for info, batch in zip(infos, batches, strict=True):
                p.producers.appended(info, batch.base_offset, batch.last_offset)
            for marker, batch in zip(markers or (), batches, strict=False):
                if marker is not None:
                    p.producers.marker_appended(marker, batch.base_offset)
            self.host.emit(AppendPartitionLog(p.tp, batches))
            self.request_flush(p)
            statuses[p.tp] = ProduceStatus(batches[0].base_offset, p.leo)
            self._leader_progress(p)
        if acks == 0:
            failed = sorted(str(tp) for tp, s in statuses.items() if s.error is not BrokerError.NONE)
            if failed:
                close(f"acks=0 produce failed for {', '.join(failed)}")
            return

        def done(result: dict[TopicPartition, ProduceStatus]) -> None:
            respond(
                ProduceResponse(
                    tuple(
                        ProducedPartition(tp, s.error, s.base_offset if s.error is BrokerError.NONE else -1, 0)
                        for tp, s in result.items()
                    )
                )
            )

        check = self._produce_check(acks)
        op = DelayedProduce(now + max(0, request.timeout_ms) * MS, statuses, check, done)
        self.produce_purgatory.try_complete_else_watch(op, [tp for tp, s in statuses.items() if not s.done])

    @staticmethod
    def _markers(p: Partition, pp: ProducePartition, origin: str) -> list[TxnMarker | None] | BrokerError | None:
        """Transaction markers among ``pp``'s batches (None if there are none): only the
        coordinator origin may write control batches (else INVALID_RECORD), and a marker older
        than its producer's epoch is INVALID_PRODUCER_EPOCH."""
        if not any(is_control(b) for b in pp.batches):
            return None
        if origin != COORDINATOR_ORIGIN:
            return BrokerError.INVALID_RECORD  # Kafka: clients may not append control batches
        markers = [marker_of(b) for b in pp.batches]
        for marker in markers:
            error = p.producers.validate_marker(marker) if marker is not None else None
            if error is not None:
                return error
        return markers

    def _produce_precheck(self, pp: ProducePartition, acks: int) -> BrokerError:
        tp = pp.partition
        if self.host.image.partition(tp) is None:
            return BrokerError.UNKNOWN_TOPIC_OR_PARTITION
        p = self.partitions.get(tp)
        if p is None or (p.role is not Role.LEADER and not self._stale_producer(p)):
            return BrokerError.NOT_LEADER_OR_FOLLOWER
        if pp.current_leader_epoch is not None and p.role is Role.LEADER:
            if pp.current_leader_epoch < p.leader_epoch:
                return BrokerError.FENCED_LEADER_EPOCH
            if pp.current_leader_epoch > p.leader_epoch:
                return BrokerError.UNKNOWN_LEADER_EPOCH
        if not pp.batches or any(b.record_count < 1 for b in pp.batches):
            return BrokerError.CORRUPT_MESSAGE
        if acks == -1 and len(p.isr) < self._min_isr(tp):
            return BrokerError.NOT_ENOUGH_REPLICAS
        return BrokerError.NONE

    def _produce_check(self, acks: int) -> Callable[[TopicPartition, ProduceStatus], BrokerError | None]:
        local_only = acks == 1 or B.HW_FROM_LEADER in self.bugs

        def check(tp: TopicPartition, status: ProduceStatus) -> BrokerError | None:
            p = self.partitions.get(tp)
            if p is None or (p.role is not Role.LEADER and not self._stale_producer(p)):
                return BrokerError.NOT_LEADER_OR_FOLLOWER
            if local_only:
                # Kafka's acks=1: answered once the records are in the leader's log (page cache), not
                # after an fsync and not after any follower has them
                return BrokerError.NONE if p.leo >= status.required_offset else None
            if p.hw < status.required_offset:
                return None
            if p.role is Role.LEADER and len(p.maximal_isr()) < self._min_isr(tp):
                return BrokerError.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return BrokerError.NONE

        return check

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, request: FetchRecordsRequest, respond: Callable[[FetchRecordsResponse], None]) -> None:
        """Answer at once when ``max_wait_ms <= 0``, there are no partitions, enough bytes are
        readable, or some partition has an error or a diverging epoch; else park a delayed fetch
        that completes when one of those becomes true (or, for followers, the HW moved), or at
        ``max_wait_ms``."""
        results = self._read(request, update=True)
        immediate = (
            request.max_wait_ms <= 0
            or not request.partitions
            or sum(sum(b.size for b in r.batches) for r in results) >= request.min_bytes
            or any(r.error is not BrokerError.NONE or r.diverging_epoch is not None for r in results)
        )
        if immediate:
            respond(FetchRecordsResponse(results, request.correlation))
            return
        hws = {r.partition: r.high_watermark for r in results}
        op = DelayedFetch(
            self.host.now + request.max_wait_ms * MS,
            lambda: self._fetch_ready(request, hws),
            lambda: respond(FetchRecordsResponse(self._read(request, update=False), request.correlation)),
        )
        self.fetch_purgatory.try_complete_else_watch(op, [fp.partition for fp in request.partitions])

    def _leader_error(self, tp: TopicPartition, epoch: int | None) -> BrokerError:
        """Common leader checks for fetch and list-offsets: partition known, led here, epoch."""
        state = self.host.image.partition(tp)
        if state is None:
            return BrokerError.UNKNOWN_TOPIC_OR_PARTITION
        p = self.partitions.get(tp)
        if p is None or p.role is not Role.LEADER:
            return BrokerError.NOT_LEADER_OR_FOLLOWER
        if epoch is not None and epoch < p.leader_epoch:
            return BrokerError.FENCED_LEADER_EPOCH
        if epoch is not None and epoch > p.leader_epoch:
            return BrokerError.UNKNOWN_LEADER_EPOCH
        return BrokerError.NONE

    def _current_leader(self, tp: TopicPartition) -> tuple[int | None, int] | None:
        state = self.host.image.partition(tp)
        return (state.leader, state.leader_epoch) if state is not None else None

    def _read(self, request: FetchRecordsRequest, update: bool) -> tuple[FetchedPartition, ...]:
        follower = request.replica_id >= 0
        budget = request.max_bytes
        out: list[FetchedPartition] = []
        for fp in request.partitions:
            result = self._read_partition(request, fp, follower, update, budget)
            budget -= sum(b.size for b in result.batches)
            out.append(result)
        return tuple(out)

    def _read_partition(
        self, request: FetchRecordsRequest, fp: FetchPartition, follower: bool, update: bool, budget: int
    ) -> FetchedPartition:
        tp = fp.partition
        error = self._leader_error(tp, fp.current_leader_epoch)
        p = self.partitions.get(tp)
        if error is BrokerError.NONE and p is not None and follower and request.replica_id not in p.remotes:
            error = BrokerError.NOT_LEADER_OR_FOLLOWER  # not a follower of this partition
        if error is not BrokerError.NONE or p is None:
            return FetchedPartition(tp, error, current_leader=self._current_leader(tp))
        leo_extra = p.leo if follower else -1
        committed = not follower and request.isolation_level == 1
        lso = p.hw if follower else p.last_stable_offset
        if fp.last_fetched_epoch is not None:
            epoch, end = p.log.end_offset_for_epoch(fp.last_fetched_epoch)
            if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
                # KIP-320 / Fetch v12; the follower's fetch state is NOT updated (KAFKA-13141)
                return FetchedPartition(tp, BrokerError.NONE, p.hw, lso, 0, (), (epoch, end), None, leo_extra)
        if fp.fetch_offset < 0 or fp.fetch_offset > p.leo:
            return FetchedPartition(tp, BrokerError.OFFSET_OUT_OF_RANGE, p.hw, lso, 0, log_end_offset=leo_extra)
        if follower and update:
            remote = p.remotes[request.replica_id]
            remote.update(fp.fetch_offset, self.host.now, p.leo, request.broker_epoch)
            if p.pending_isr is None and p.may_join_isr(request.replica_id, self._eligible):
                self._request_isr(p, (*p.isr, request.replica_id))
            self._leader_progress(p)
        limit = p.leo if follower else lso if committed else p.hw
        batches = p.log.read(fp.fetch_offset, limit, max(0, min(fp.max_bytes, budget)))
        if budget <= 0 and batches:
            batches = ()
        aborted = None
        if committed:
            end = batches[-1].next_offset if batches else fp.fetch_offset
            aborted = tuple((a.producer_id, a.first_offset) for a in p.producers.aborted_between(fp.fetch_offset, end))
        return FetchedPartition(tp, BrokerError.NONE, p.hw, lso, 0, batches, None, None, leo_extra, aborted)

    def _fetch_ready(self, request: FetchRecordsRequest, hws: Mapping[TopicPartition, int]) -> bool:
        follower = request.replica_id >= 0
        accumulated = 0
        for fp in request.partitions:
            tp = fp.partition
            if self._leader_error(tp, fp.current_leader_epoch) is not BrokerError.NONE:
                return True  # not leader any more, unknown partition, fenced epoch
            p = self.partitions[tp]
            if fp.fetch_offset > p.leo:
                return True  # the log was truncated under the fetch
            if fp.last_fetched_epoch is not None:
                epoch, end = p.log.end_offset_for_epoch(fp.last_fetched_epoch)
                if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
                    return True  # a diverging epoch appeared
            if follower and p.hw != hws.get(tp, p.hw):
                return True  # followers learn a new HW promptly
            if follower:
                limit = p.leo
            else:
                limit = p.last_stable_offset if request.isolation_level == 1 else p.hw
            accumulated += p.log.bytes_between(fp.fetch_offset, limit)
        return accumulated >= request.min_bytes

    # ------------------------------------------------------------------ list offsets

    def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        out = []
        for lp in request.partitions:
            tp = lp.partition
            error = self._leader_error(tp, lp.current_leader_epoch)
            if error is not BrokerError.NONE:
                out.append(ListedOffset(tp, error))
                continue
            p = self.partitions[tp]
            not_available = p.hw < p.epoch_start_offset
            visible = p.last_stable_offset if request.isolation_level == 1 else p.hw
            if lp.timestamp == EARLIEST_TIMESTAMP:
                out.append(ListedOffset(tp, BrokerError.NONE, -1, 0, p.log.epoch_for_offset(0) or p.leader_epoch))
            elif lp.timestamp == LATEST_TIMESTAMP:
                if not_available:
                    out.append(ListedOffset(tp, BrokerError.OFFSET_NOT_AVAILABLE))
                else:
                    out.append(ListedOffset(tp, BrokerError.NONE, -1, visible, p.leader_epoch))
            elif lp.timestamp >= 0:
                found = p.log.offset_for_timestamp(lp.timestamp, visible)
                if found is not None:
                    ts, offset = found
                    out.append(ListedOffset(tp, BrokerError.NONE, ts, offset, p.log.epoch_for_offset(offset)))
                elif not_available:
                    out.append(ListedOffset(tp, BrokerError.OFFSET_NOT_AVAILABLE))
                else:
                    out.append(ListedOffset(tp, BrokerError.NONE, -1, -1, None))
            else:
                out.append(ListedOffset(tp, BrokerError.INVALID_REQUEST))
        return ListOffsetsResponse(tuple(out))

    # ------------------------------------------------------------------ offsets for leader epochs

    def offset_for_leader_epoch(self, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
        """Per partition (led here), the largest epoch in the epoch cache at or below the one
        asked about and the offset where it ends: the next epoch's start, or the log end."""
        out = []
        for q in request.partitions:
            error = self._leader_error(q.partition, q.current_leader_epoch)
            if error is not BrokerError.NONE:
                out.append(EpochEndOffset(q.partition, error))
                continue
            epoch, end = self.partitions[q.partition].log.end_offset_for_epoch(q.leader_epoch)
            out.append(EpochEndOffset(q.partition, BrokerError.NONE, epoch, end if epoch >= 0 else -1))
        return OffsetForLeaderEpochResponse(tuple(out))

    # ------------------------------------------------------------------ follower side

    def follower_append(self, p: Partition, batches: tuple[Batch, ...]) -> None:
        accepted = p.acceptable_prefix(batches)
        if not accepted:
            return
        for batch in accepted:
            p.log.append(batch)
        self.host.emit(AppendPartitionLog(p.tp, accepted))
        self.request_flush(p)

    def follower_high_watermark(self, p: Partition, leader_hw: int) -> None:
        """Follower HW = min(leader HW, own LEO), never decreasing."""
        new = min(leader_hw, p.leo)
        if new > p.hw:
            p.hw = new

    def follower_truncate(self, p: Partition, target: int, why: str) -> None:
        """Truncate a follower's log to ``target`` (batch-aligned). Below the HW this is fatal
        unless unclean leader election is enabled for the topic (then the HW follows)."""
        if target < p.hw:
            if not self.unclean_allowed(p.tp):
                self.host.fatal(f"{p.tp}: asked to truncate to {target} ({why}), below the high watermark {p.hw}")
            p.hw = target
        old = p.leo
        end = p.truncate(target)
        if end < old:
            p.truncations += 1
            self.host.emit(TruncatePartitionLog(p.tp, end))
            self.request_flush(p)
        self._touch(p.tp)

    # ------------------------------------------------------------------ flushing

    def request_flush(self, p: Partition) -> None:
        if self.lazy or p.flush_inflight is not None:
            return  # lazy: flushed on a timer; else partition_flushed() asks again for the rest
        if p.flushed < p.leo or p.flushed_truncations < p.truncations:
            p.flush_inflight = p.leo
            p.flush_truncations = p.truncations
            self.host.emit(FlushPartition(p.tp, p.leo))

    def partition_flushed(self, tp: TopicPartition, offset: int) -> None:
        p = self.partitions.get(tp)
        if p is None:
            return
        if p.flush_inflight is not None:
            offset = min(offset, p.flush_inflight)
            p.flush_inflight = None
            p.flushed_truncations = max(p.flushed_truncations, p.flush_truncations)
        offset = min(offset, p.leo)
        if offset > p.flushed:
            p.flushed = offset
        self._leader_progress(p)
        self.request_flush(p)

    # ------------------------------------------------------------------ timers

    def poll(self, now: int) -> None:
        self.produce_purgatory.expire(now)
        self.fetch_purgatory.expire(now)
        if self._isr_check_at is not None and now >= self._isr_check_at:
            self._isr_check_at = None
            if any(p.role is Role.LEADER for p in self.partitions.values()):
                self._check_isr(now)
                self._schedule_isr_check(now)
        if self._lazy_flush_at is not None and now >= self._lazy_flush_at:
            self._lazy_flush_at = next_lazy_flush(now, self.lazy_interval)
            for p in self.partitions.values():
                if p.flush_inflight is None and (p.flushed < p.leo or p.flushed_truncations < p.truncations):
                    p.flush_inflight = p.leo
                    p.flush_truncations = p.truncations
                    self.host.emit(FlushPartition(p.tp, p.leo))
        self.fetcher.poll(now)

    def next_deadline(self) -> int | None:
        best = None
        for t in (
            self.produce_purgatory.next_deadline(),
            self.fetch_purgatory.next_deadline(),
            self._isr_check_at,
            self._lazy_flush_at,
            self.fetcher.next_deadline(),
        ):
            if t is not None and (best is None or t < best):
                best = t
        return best
