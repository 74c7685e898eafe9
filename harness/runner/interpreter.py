"""Drives a generator in real time (asyncio): client workers, the nemesis worker, the history.

As Jepsen's interpreter: `concurrency` client threads (0…P-1) and one nemesis thread. Each
thread runs one operation at a time. A client operation that completes `info` (timeout,
crash, unknown outcome) retires its process: the thread continues as process + P with a
fresh client. Invocations and completions are recorded as they happen (Recorder: appended
and flushed to history.jsonl); nemesis events are recorded as one `info` op each with the
value that was actually applied (resolved targets), as the simulator does.

Everything the run did is also kept as a realised schedule (`ops`, `nemesis`), the shape of
the simulator's schedule.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.nemesis.interpreter import Applied
from harness.recorder import Recorder
from harness.runner.generator import NEMESIS, PENDING, Context, Generator

POLL_S = 0.02  # how often a pending generator is asked again
GUARD_S = 5.0  # a client call that outlives its own timeout by this much is abandoned as info


@dataclass(frozen=True)
class Completion:
    """How a client operation ended, in history terms."""

    type: str  # ok | fail | info
    value: Any = None
    error: str | None = None
    node: str | None = None


class Client(Protocol):
    """One worker's connection to the system under test (one process id)."""

    timeout: float

    async def invoke(self, op: dict[str, Any]) -> Completion: ...

    async def close(self) -> None: ...


ClientFactory = Callable[[int, int], Client]  # (thread, process) -> client


NemesisHandler = Callable[[dict[str, Any]], Awaitable[Applied]]
Listener = Callable[[dict[str, Any]], None]


class Interpreter:
    """Runs generators against `concurrency` clients and a nemesis; keeps workers and processes across runs."""

    def __init__(
        self,
        concurrency: int,
        clients: ClientFactory,
        nemesis: NemesisHandler | None,
        recorder: Recorder,
        clock: Callable[[], int],
        *,
        rng: random.Random | None = None,
        listener: Listener | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.client_factory = clients
        self.nemesis_handler = nemesis
        self.recorder = recorder
        self.clock = clock
        self.rng = rng or random.Random(0)
        self.listener = listener
        self.log = log or (lambda msg: None)
        self.workers: dict[Any, Any] = {t: t for t in range(concurrency)}
        self.workers[NEMESIS] = NEMESIS
        self.free: set[Any] = set(self.workers)
        self.ops: list[dict[str, Any]] = []  # realised client operations (schedule.json "ops")
        self.nemesis_log: list[dict[str, Any]] = []  # realised nemesis events
        self._clients: dict[int, tuple[Any, Client]] = {}
        self._inbox: dict[Any, asyncio.Queue[dict[str, Any]]] = {}
        self._done: asyncio.Queue[tuple[Any, dict[str, Any], Any]] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ context
    def context(self, reserved: frozenset[Any] = frozenset()) -> Context:
        """The generator's view: threads reserved by ops waiting for their time count as busy."""
        return Context(self.clock(), dict(self.workers), frozenset(self.free - reserved), self.rng)

    @property
    def busy(self) -> bool:
        return len(self.free) < len(self.workers)

    def _start_workers(self) -> None:
        if self._tasks:
            return
        self._done = asyncio.Queue()
        for t in self.workers:
            self._inbox[t] = asyncio.Queue()
            worker = self._nemesis_worker if t == NEMESIS else self._client_worker
            self._tasks.append(asyncio.create_task(worker(t), name=f"worker-{t}"))

    # ------------------------------------------------------------------ the loop
    async def run(self, gen: Generator | None) -> None:
        """Run `gen` until it is exhausted and every operation it started has completed.

        An op the generator emits is committed: if its time is in the future it waits in a heap
        (its thread reserved) while the generator is asked for more — so a fault scheduled
        for later never holds up client operations due now.
        """
        self._start_workers()
        assert self._done is not None
        waiting: list[tuple[int, int, dict[str, Any]]] = []  # (time, seq, op)
        seq = 0
        while True:
            while not self._done.empty():
                gen = self._complete(gen, *self._done.get_nowait())
            while waiting and waiting[0][0] <= self.clock():
                gen = self._dispatch(gen, heapq.heappop(waiting)[2])
            pending = False
            if gen is not None:
                reserved = frozenset(self.thread_of(op["process"]) for _, _, op in waiting)
                ctx = self.context(reserved)
                r = gen.op(ctx)
                if r is None:
                    gen = None
                else:
                    op, gen = r
                    if op is PENDING:
                        pending = True
                    elif op.get("type") == "log":
                        self.log(str(op.get("value")))
                        continue
                    else:
                        heapq.heappush(waiting, (op["time"], seq, op))
                        seq += 1
                        continue
            if gen is None and not waiting and not self.busy:
                return
            timeout: float | None = POLL_S if pending else None
            if waiting:
                due = max(0.0, (waiting[0][0] - self.clock()) / 1e9)
                timeout = due if timeout is None else min(timeout, due)
            gen = await self._wait(gen, timeout)
            _raise_if_cancelled()

    def thread_of(self, process: Any) -> Any:
        for t, p in self.workers.items():
            if p == process:
                return t
        return None

    async def _wait(self, gen: Generator | None, seconds: float | None) -> Generator | None:
        assert self._done is not None
        try:
            item = await asyncio.wait_for(self._done.get(), timeout=None if seconds is None else max(seconds, 0.0))
        except TimeoutError:
            return gen
        return self._complete(gen, *item)

    def _dispatch(self, gen: Generator | None, op: dict[str, Any]) -> Generator | None:
        ctx = self.context()
        thread = ctx.thread_of(op["process"])
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
        self._inbox[thread].put_nowait(op)
        return gen.update(ctx, event) if gen is not None else None

    def _complete(self, gen: Generator | None, thread: Any, op: dict[str, Any], result: Any) -> Generator | None:
        ctx = self.context()  # before the process changes: generators look the event's process up
        process = op["process"]
        if thread == NEMESIS:
            applied: Applied = result
            rec = self.recorder.record(NEMESIS, "info", op["f"], applied.recorded, error=applied.error)
            entry = {"at": op["invoked"], "f": op["f"], "value": applied.realised}
            if op.get("package"):
                entry = {"at": op["invoked"], "planned-at": op.get("at"), "package": op["package"], **entry}
            if applied.error:
                entry["error"] = applied.error
            self.nemesis_log.append(entry)
            event = {"type": "info", "process": NEMESIS, "f": op["f"], "value": applied.recorded, "time": rec.time}
            if applied.error:
                event["error"] = applied.error
        else:
            c: Completion = result
            rec = self.recorder.record(process, c.type, op["f"], c.value, key=op.get("key"), node=c.node, error=c.error)
            self.ops.append(
                {
                    "at": op["invoked"],
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
            if c.type == "info":
                self.workers[thread] = process + self.concurrency  # a crashed process never comes back
        self.free.add(thread)
        self._notify(event)
        return gen.update(ctx, event) if gen is not None else None

    def _notify(self, event: dict[str, Any]) -> None:
        if self.listener is not None:
            self.listener(event)

    # ------------------------------------------------------------------ workers
    async def _client_for(self, thread: int, process: int) -> Client:
        current = self._clients.get(thread)
        if current is not None and current[0] == process:
            return current[1]
        if current is not None:
            with contextlib.suppress(Exception):
                await current[1].close()
        client = self.client_factory(thread, process)
        self._clients[thread] = (process, client)
        return client

    async def _client_worker(self, thread: int) -> None:
        assert self._done is not None
        inbox = self._inbox[thread]
        while True:
            _raise_if_cancelled()  # a cancel swallowed anywhere inside the last invoke ends the worker here
            op = await inbox.get()
            try:
                client = await self._client_for(thread, op["process"])
            except Exception as e:  # noqa: BLE001 - cannot open: the op did not happen (Jepsen's no-client)
                result = Completion("fail", op.get("value"), f"no-client: {e}", op.get("node"))
            else:
                try:
                    result = await asyncio.wait_for(client.invoke(op), timeout=client.timeout + GUARD_S)
                except TimeoutError:
                    result = Completion("info", op.get("value"), "timeout (client hung)", op.get("node"))
                except Exception as e:  # noqa: BLE001 - unknown outcome, as Jepsen's crashed client
                    result = Completion("info", op.get("value"), f"indeterminate: {e!r}", op.get("node"))
            self._done.put_nowait((thread, op, result))

    async def _nemesis_worker(self, thread: Any) -> None:
        assert self._done is not None
        inbox = self._inbox[thread]
        while True:
            _raise_if_cancelled()
            op = await inbox.get()
            if self.nemesis_handler is None:
                result = Applied(op.get("value"), op.get("value"), "no nemesis")
            else:
                try:
                    result = await self.nemesis_handler(op)
                except Exception as e:  # noqa: BLE001 - a fault that failed is recorded, the test goes on
                    result = Applied(op.get("value"), op.get("value"), f"{type(e).__name__}: {e}")
            self._done.put_nowait((thread, op, result))

    async def close(self) -> None:
        """Stop the workers and close every client."""
        await cancel_and_wait(self._tasks)
        self._tasks = []
        for _, client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.close()
        self._clients = {}


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], grace: float = 10.0) -> list[asyncio.Task[Any]]:
    """Cancel `tasks` and wait until they are done — cancelling again every 0.5 s, because on Python 3.11
    `asyncio.wait_for` can swallow a cancel, after which a task goes on to its next await. Returns the tasks
    still not done after `grace` seconds (a bug somewhere; the caller names them and moves on)."""
    pending = {t for t in tasks if not t.done()}
    deadline = time.monotonic() + grace
    while pending and time.monotonic() < deadline:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(0.5, max(0.0, deadline - time.monotonic())))
    return sorted(pending, key=lambda t: t.get_name())


def close_loop(runner: asyncio.Runner, grace: float = 10.0, log: Callable[[str], None] | None = None) -> None:
    """Close `runner` without hanging: asyncio.Runner.close() cancels each remaining task once and waits
    for all of them with no limit, so first cancel them with `cancel_and_wait`."""
    loop = runner.get_loop()
    others = [t for t in asyncio.all_tasks(loop) if not t.done()]
    stuck = loop.run_until_complete(cancel_and_wait(others, grace)) if others else []
    if not stuck:
        runner.close()
        return
    if log is not None:
        log(f"warning: {len(stuck)} task(s) ignored cancellation: {', '.join(t.get_name() for t in stuck)}")
    asyncio.set_event_loop(None)
    loop.close()  # the runner is abandoned: its close() would wait for those tasks forever


def _raise_if_cancelled() -> None:
    """Honour a cancellation that `asyncio.wait_for` swallowed (Python 3.11 returns the inner result when
    it completes in the same step as the cancel) — without this, Ctrl-C during a busy run is lost."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def monotonic_clock() -> Callable[[], int]:
    """Nanoseconds since the call, on this host's monotonic clock (the history's time base)."""
    t0 = time.monotonic_ns()
    return lambda: time.monotonic_ns() - t0
