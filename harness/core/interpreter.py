"""The interpreter's core, sans-IO: steps a generator, keeps threads and processes, records the history.

As Jepsen's interpreter: `concurrency` client threads (0…P-1) and one nemesis thread, each
running one operation at a time. A client operation that completes `info` retires its
process: the thread continues as process + P. Invocations and completions are recorded as
they happen; a nemesis event is recorded as one `info` op with the value actually applied.
Everything done is also kept as a realised schedule (`ops`, `nemesis_log`), the shape of
schedule.json.

The core never waits: a driver asks `poll()` for the operations to start now, tells
`complete()` how each ended, and waits `wake_in()` nanoseconds (or for a completion). Two
drivers run it: asyncio on real clusters (`harness.real.interpreter`) and the simulator's
scheduler in virtual time (`harness.sim.interpreter`).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from harness.core.recorder import Recorder
from harness.nemesis.interpreter import Applied
from workloads import generator as gen
from workloads.generator import NEMESIS, PENDING, Context, Generator
from workloads.protocol import Completion, Workload

POLL_NS = 20_000_000  # how often a pending generator is asked again
RATE = 100.0  # client operations per second, all threads together (Jepsen's stagger)


Listener = Callable[[dict[str, Any]], None]


def client_phase(workload: Workload, time_limit_s: float, rate: float = RATE) -> Generator:
    """The main phase's client operations, on every runtime: the workload's generator at `rate` ops/s."""
    return gen.clients(gen.time_limit(time_limit_s, gen.stagger(1.0 / rate, workload.generator())))


class Core:
    """The interpreter's state; `ops_origin` is subtracted from the invoke times kept in `ops`."""

    def __init__(
        self,
        concurrency: int,
        recorder: Recorder,
        clock: Callable[[], int],
        *,
        rng: random.Random | None = None,
        listener: Listener | None = None,
        log: Callable[[str], None] | None = None,
        nemesis: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.recorder = recorder
        self.clock = clock
        self.rng = rng or random.Random(0)
        self.listener = listener
        self.log = log or (lambda msg: None)
        self.workers: dict[Any, Any] = {t: t for t in range(concurrency)}
        if nemesis:  # the nemesis thread (a runtime that injects faults by itself needs none)
            self.workers[NEMESIS] = NEMESIS
        self.free: set[Any] = set(self.workers)
        self._order = tuple(sorted(self.workers, key=gen.thread_order))  # the threads never change
        self._threads = {p: t for t, p in self.workers.items()}  # process -> thread
        self.ops: list[dict[str, Any]] = []  # realised client operations (schedule.json "ops")
        self.nemesis_log: list[dict[str, Any]] = []  # realised nemesis events
        self.ops_origin = 0
        self.gen: Generator | None = None
        self.pending = False
        self._waiting: list[tuple[int, int, dict[str, Any]]] = []  # (time, seq, op): emitted, not yet due
        self._reserved: set[Any] = set()  # the threads of the waiting ops
        self._seq = 0

    def context(self, reserved: frozenset[Any] = frozenset()) -> Context:
        """The generator's view: threads reserved by ops waiting for their time count as busy."""
        return Context(self.clock(), dict(self.workers), frozenset(self.free - reserved), self.rng, self._order)

    @property
    def busy(self) -> bool:
        return len(self.free) < len(self.workers)

    @property
    def finished(self) -> bool:
        """The generator is exhausted and every operation it started has completed."""
        return self.gen is None and not self._waiting and not self.busy

    def thread_of(self, process: Any) -> Any:
        return self._threads.get(process)

    def start(self, generator: Generator | None) -> None:
        """Run `generator` next (the previous one is dropped with the ops it had not started)."""
        self.gen = generator
        self._waiting = []
        self._reserved = set()
        self.pending = False

    def poll(self) -> list[tuple[Any, dict[str, Any]]]:
        """The (thread, op) pairs to start now, invocations recorded.

        An op the generator emits is committed: if its time is in the future it waits (its thread
        reserved) while the generator is asked for more — so a fault scheduled for later never
        holds up client operations due now.
        """
        started = []
        self.pending = False
        while True:
            while self._waiting and self._waiting[0][0] <= self.clock():
                op = heapq.heappop(self._waiting)[2]
                self._reserved.discard(self._threads.get(op["process"]))
                started.append(self._dispatch(op))
            if self.gen is None:
                return started
            if self.free <= self._reserved:
                return started  # no thread to run an op on: only a completion can change that
            r = self.gen.op(self.context(frozenset(self._reserved)))
            if r is None:
                self.gen = None
                return started
            op, self.gen = r
            if op is PENDING:
                self.pending = True
                return started
            if op.get("type") == "log":
                self.log(str(op.get("value")))
                continue
            heapq.heappush(self._waiting, (op["time"], self._seq, op))
            self._reserved.add(self._threads.get(op["process"]))
            self._seq += 1

    def wake_in(self) -> int | None:
        """Nanoseconds until `poll` has something new without a completion (None: only a completion will)."""
        due = max(0, self._waiting[0][0] - self.clock()) if self._waiting else None
        if self.pending:
            due = POLL_NS if due is None else min(due, POLL_NS)
        return due

    def _dispatch(self, op: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        ctx = None if gen.ignores_events(self.gen) else self.context()
        thread = self._threads.get(op["process"])
        if thread is None or thread not in self.free:
            raise RuntimeError(f"generator emitted {op!r} for a busy or unknown process")
        self.free.discard(thread)
        event = dict(op)
        if thread != NEMESIS:
            rec = self.recorder.record(op["process"], "invoke", op["f"], op.get("value"), key=op.get("key"))
            op["invoked"] = rec.time
            event["time"] = rec.time
            self._notify(event)
        else:
            op["invoked"] = self.clock()
        if ctx is not None and self.gen is not None:
            self.gen = self.gen.update(ctx, event)
        return thread, op

    def complete(self, thread: Any, op: dict[str, Any], result: Completion | Applied) -> None:
        """Record how `op` (started on `thread`) ended: a client's Completion or a nemesis event's Applied."""
        # before the process changes: generators look the event's process up (none needed if they ignore events)
        ctx = None if gen.ignores_events(self.gen) else self.context()
        process = op["process"]
        if isinstance(result, Applied):
            rec = self.recorder.record(NEMESIS, "info", op["f"], result.recorded, error=result.error)
            entry = {"at": op["invoked"], "f": op["f"], "value": result.realised}
            if op.get("package"):
                entry = {"at": op["invoked"], "planned-at": op.get("at"), "package": op["package"], **entry}
            if result.error:
                entry["error"] = result.error
            self.nemesis_log.append(entry)
            event = {"type": "info", "process": NEMESIS, "f": op["f"], "value": result.recorded, "time": rec.time}
            if result.error:
                event["error"] = result.error
        else:
            c = result
            rec = self.recorder.record(
                process, c.type, op["f"], c.value, key=op.get("key"), node=c.node, error=c.error, extra=c.extra
            )
            self.ops.append(
                {
                    "at": op["invoked"] - self.ops_origin,
                    "client": thread,
                    "f": op["f"],
                    "key": op.get("key"),
                    "value": op.get("value"),
                    "node": c.node,
                }
            )
            event = {
                "type": c.type,
                "process": process,
                "f": op["f"],
                "key": op.get("key"),
                "value": c.value,
                "node": c.node,
                "error": c.error,
                "time": rec.time,
            }
            if c.type == "info":  # a crashed process never comes back
                self.workers[thread] = process + self.concurrency
                del self._threads[process]
                self._threads[process + self.concurrency] = thread
        self.free.add(thread)
        self._notify(event)
        if ctx is not None and self.gen is not None:
            self.gen = self.gen.update(ctx, event)

    def _notify(self, event: dict[str, Any]) -> None:
        if self.listener is not None:
            self.listener(event)
