"""One simulated node: a KVNode core driven by the simulator, with its own clock and disk.

The driver applies the core's effects in order: sends go through the simulated
network, the quorum state is written durably at once, log writes land in the
page cache and become durable when a flush completes. Crashes drop the page
cache; pauses queue every input until resume. The node's wall clock may be offset
and drift (the clock faults): it stamps the node's events and, with the node setting
`clock.source=wall` (the default, as the runtime driver reads `time.time_ns()`, which
libfaketime moves), the core's timers follow it; with `clock.source=monotonic` the core runs on
the true time, as the runtime driver on `time.monotonic_ns()`, which libfaketime leaves alone.
Runs stored with `"clocks": "timers"` ran the core on the skewed clock too; runs stored with
`"clocks": "wall"` and no `"clock-source"` ran it on the true time; both replay so.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.sim.disk import BatchDisk, Disk
from harness.sim.engine import MS, Scheduler
from nodes.broker.effects import (
    AppendPartitionLog,
    ClientResponse,
    CloseClientConnection,
    FlushPartition,
    TruncatePartitionLog,
)
from nodes.effects import Dispatcher
from nodes.kv.effects import ClientReply
from nodes.raft import (
    AppendLog,
    Committed,
    Event,
    Fatal,
    Flush,
    PersistQuorumState,
    Reply,
    Send,
    TruncateLog,
    with_repair,
)
from nodes.raft.bugs import SKIP_CRC
from nodes.runtime.partition_store import PARTITIONS_DIR, partition_file_name
from nodes.runtime.storage import LOG_FILE

if TYPE_CHECKING:
    from nodes.kv.node import KVNode


class SimNode:
    def __init__(
        self,
        sim: Any,
        node_id: int,
        make_core: Callable[[], KVNode],
        rng: random.Random,
        disk_latency_ms: tuple[float, float] = (1.0, 10.0),
        timers_follow_clock: bool = False,
    ) -> None:
        self.sim = sim
        self.sched: Scheduler = sim.sched
        self.id = node_id
        self.name = f"n{node_id}"
        self.make_core = make_core
        self.rng = rng
        self.disk = Disk()
        self.partitions: dict[Any, BatchDisk] = {}  # a broker's partition logs
        self.disk_latency = (int(disk_latency_ms[0] * MS), int(disk_latency_ms[1] * MS))
        self.core: KVNode | None = None
        self.alive = False
        self.paused = False
        self.generation = 0
        self.inbox: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.clock_offset = 0  # ns added to the true time
        self.drift_ppm = 0  # parts per million the clock runs fast (+) or slow (-)
        self._timer_at: int | None = None
        self._timer_token = 0
        self.fatal: list[str] = []
        self.restarts = 0
        self.timers_follow_clock = timers_follow_clock  # clock faults move the core's timers too (old runs)
        self._dispatch = Dispatcher(self)

    # ------------------------------------------------------------------ clock
    def local_now(self) -> int:
        """The node's wall clock (offset and drift applied)."""
        now = self.sched.now
        return now + self.clock_offset + (now * self.drift_ppm) // 1_000_000

    def core_now(self) -> int:
        """The time the core's timers run on: the wall clock (clock.source=wall, or runs stored with "clocks":
        "timers"), or the true time."""
        return self.local_now() if self.timers_follow_clock else self.sched.now

    def to_global(self, local: int) -> int:
        t = ((local - self.clock_offset) * 1_000_000) // (1_000_000 + self.drift_ppm)
        while self._local_at(t) < local:
            t += 1
        return t

    def _local_at(self, t: int) -> int:
        return t + self.clock_offset + (t * self.drift_ppm) // 1_000_000

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.core = self.make_core()
        self.alive = True
        self.paused = False
        self.generation += 1
        self._timer_at = None
        now = self.core_now()
        check_crc = SKIP_CRC not in self.sim.spec.bugs
        log, seen_end = self.disk.recover(check_crc)
        # records lost inside the log: the node may not vote until it has them again (as the runtime driver)
        persisted = with_repair(self.disk.quorum_state, *(seen_end or (None, 0)))
        if persisted is not self.disk.quorum_state:
            self.disk.persist_quorum_state(persisted)
        if self.partitions:
            recovered = {tp: d.recover(check_crc) for tp, d in self.partitions.items()}
            logs = {tp: batches for tp, (batches, _) in recovered.items()}
            # partition logs that lost a range: reported with the registration (as the runtime driver)
            damaged = sorted(tp for tp, (_, repair_to) in recovered.items() if repair_to is not None)
            start = self.core.start
            self.apply(start(now, persisted, log, logs, mono=self.sched.now, damaged=damaged))  # type: ignore[call-arg]
        else:
            self.apply(self.core.start(now, persisted, log, mono=self.sched.now))

    def log_files(self) -> list[tuple[str, Disk]]:
        """The node's log files by their names in a real data directory: the raft log, then partition logs."""
        parts = sorted((f"{PARTITIONS_DIR}/{partition_file_name(tp)}", d) for tp, d in self.partitions.items())
        return [(LOG_FILE, self.disk), *parts]

    def crash(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.paused = False
        self.generation += 1
        self.core = None
        self.inbox.clear()
        self.sim.net.reset(self.name)
        self.disk.crash()
        for d in self.partitions.values():
            d.crash()
        self._timer_at = None

    def restart(self) -> None:
        if self.alive:
            return
        self.restarts += 1
        self.start()

    def pause(self) -> None:
        if self.alive:
            self.paused = True

    def resume(self) -> None:
        if not self.alive or not self.paused:
            return
        self.paused = False
        inbox, self.inbox = self.inbox, []
        for fn, args in inbox:
            if not self.alive or self.paused:
                self.inbox.append((fn, args))
                continue
            fn(*args)
        self._schedule_timer(force=True)

    # ------------------------------------------------------------------ inputs
    def _ready(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
        """Can the process act now? Queue the input while paused; drop it while down."""
        if not self.alive:
            return False
        if self.paused:
            self.inbox.append((fn, args))
            return False
        return True

    def deliver(self, src: int, message: Any, reply_ctx: Any, generation: int) -> None:
        if generation != self.generation:
            return  # sent to a process that has since crashed: its connections died with it
        if not self._ready(self.deliver, (src, message, reply_ctx, generation)):
            return
        assert self.core is not None
        self.apply(self.core.handle(self.core_now(), src, message, reply_ctx, mono=self.sched.now))

    def client_request(self, client: Any, request_id: Any, f: str, key: str, value: Any) -> None:
        if not self._ready(self.client_request, (client, request_id, f, key, value)):
            return
        assert self.core is not None
        self.apply(self.core.submit(self.core_now(), request_id, f, key, value, mono=self.sched.now))

    def client_call(self, client: Any, request_id: Any, method: str, request: Any) -> None:
        """A broker client request: `method` is produce, fetch, metadata, create_topics or list_offsets."""
        if not self._ready(self.client_call, (client, request_id, method, request)):
            return
        assert self.core is not None
        self.apply(getattr(self.core, method)(self.core_now(), request_id, request, mono=self.sched.now))

    def _partition_flush_done(self, generation: int, tp: Any, up_to: int) -> None:
        if generation != self.generation or not self.alive:
            return
        self.partitions[tp].flush()
        if self.paused:
            self.inbox.append((self._partition_flushed_notify, (generation, tp, up_to)))
            return
        self._partition_flushed_notify(generation, tp, up_to)

    def _partition_flushed_notify(self, generation: int, tp: Any, up_to: int) -> None:
        if generation != self.generation or self.core is None:
            return
        self.apply(self.core.partition_flushed(self.core_now(), tp, up_to, mono=self.sched.now))  # type: ignore[attr-defined]

    def _flush_done(self, generation: int, up_to: int) -> None:
        if generation != self.generation or not self.alive:
            return
        self.disk.flush()
        if self.paused:
            self.inbox.append((self._flushed_notify, (generation, up_to)))
            return
        self._flushed_notify(generation, up_to)

    def _flushed_notify(self, generation: int, up_to: int) -> None:
        if generation != self.generation or self.core is None:
            return
        self.apply(self.core.flushed(self.core_now(), up_to, mono=self.sched.now))

    def _tick(self, token: int) -> None:
        if token != self._timer_token or not self.alive:
            return
        self._timer_at = None
        if self.paused:
            return  # resume() re-arms the timer
        assert self.core is not None
        self.apply(self.core.tick(self.core_now(), mono=self.sched.now))

    # ------------------------------------------------------------------ effects
    def apply(self, effects: list[Any]) -> None:
        if effects:
            if not self._dispatch(effects):
                return  # a Fatal: the node has crashed
            self.sim.invariants.after_step(self)
        self._schedule_timer()

    def on_send(self, effect: Send) -> None:
        sim = self.sim
        dst = sim.nodes[effect.dst]
        message = effect.message
        sim.net.send(
            self.name,
            dst.name,
            dst.deliver,
            self.id,
            message,
            effect.reply_ctx,
            dst.generation,
            hold=sim.hold_ns(message),
        )

    def on_reply(self, effect: Reply | ClientReply | ClientResponse) -> None:
        self.sim.client_reply(self, effect)

    on_client_reply = on_reply
    on_client_response = on_reply

    def on_event(self, effect: Event) -> None:
        data = effect.data
        if not self.timers_follow_clock:  # stamped with the wall clock, as the runtime driver does
            data = {**data, "time": self.local_now()}
        self.sim.node_event(self, data)
        self.sim.invariants.on_event(self, data)

    def on_persist_quorum_state(self, effect: PersistQuorumState) -> None:
        self.disk.persist_quorum_state(effect.state)
        self.sim.invariants.on_persist(self, effect.state)

    def on_append_log(self, effect: AppendLog) -> None:
        self.disk.append(effect.records)
        self.sim.invariants.on_append(self, effect.records)

    def on_truncate_log(self, effect: TruncateLog) -> None:
        self.disk.truncate(effect.from_offset)

    def on_flush(self, effect: Flush) -> None:
        lo, hi = self.disk_latency
        delay = lo + int(self.rng.random() * (hi - lo))
        self.sched.after(delay, self._flush_done, self.generation, effect.up_to_offset)

    def on_committed(self, effect: Committed) -> None:
        self.sim.invariants.on_committed(self, effect)

    def on_append_partition_log(self, effect: AppendPartitionLog) -> None:
        disk = self.partitions.get(effect.partition)
        if disk is None:
            disk = self.partitions[effect.partition] = BatchDisk()
        disk.append(effect.batches)

    def on_truncate_partition_log(self, effect: TruncatePartitionLog) -> None:
        self.partitions[effect.partition].truncate_offset(effect.from_offset)

    def on_flush_partition(self, effect: FlushPartition) -> None:
        lo, hi = self.disk_latency
        delay = lo + int(self.rng.random() * (hi - lo))
        self.sched.after(delay, self._partition_flush_done, self.generation, effect.partition, effect.up_to_offset)

    def on_close_client_connection(self, effect: CloseClientConnection) -> None:
        self.sim.client_closed(self, effect)

    def on_fatal(self, effect: Fatal) -> None:
        self.fatal.append(effect.reason)
        self.sim.node_fatal(self, effect.reason)
        self.crash()

    def _schedule_timer(self, force: bool = False) -> None:
        if not self.alive or self.core is None:
            return
        deadline = self.core.next_deadline()
        if deadline is None:
            return
        when = self.to_global(deadline) if self.timers_follow_clock else deadline
        if when < self.sched.now:
            when = self.sched.now
        if not force and self._timer_at is not None and self._timer_at <= when:
            return
        self._timer_token += 1
        self._timer_at = when
        self.sched.at(when, self._tick, self._timer_token)

    def clock_changed(self) -> None:
        """The clock moved: timers now fall due at other true times (only when they follow the wall clock)."""
        if self.timers_follow_clock and self.alive and not self.paused:
            self._schedule_timer(force=True)
