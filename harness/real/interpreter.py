"""Drives the interpreter's core (`harness.core.interpreter`) in real time with asyncio.

One worker task per thread runs that thread's operations one at a time: a sans-IO client's
requests go through a `Connection` of the runtime's transport (one per process, closed when the
process retires); a nemesis event goes to the nemesis handler. A client call that outlives its
request's timeout by GUARD_S is abandoned as `info`.

Clients still written as async objects (`invoke(op) -> Completion` coroutine, `close()`) are
driven as they are, until every workload is a sans-IO `workloads.protocol.Client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from harness.core.interpreter import Applied, Core, Listener
from harness.core.recorder import Recorder
from workloads.generator import NEMESIS, Context, Generator
from workloads.protocol import Answer, Completion, Failure, Request

__all__ = ["Applied", "Completion", "Connection", "Interpreter", "cancel_and_wait", "close_loop", "monotonic_clock"]

GUARD_S = 5.0  # a client call that outlives its own timeout by this much is abandoned as info


class Connection(Protocol):
    """One client process's link to the nodes: carries its requests, one at a time."""

    async def call(self, request: Request) -> Answer: ...

    async def close(self) -> None: ...


ClientFactory = Callable[[int, int], Any]  # (thread, process) -> a sans-IO client (or a legacy async one)
Transport = Callable[[], Connection]  # a fresh connection for a new process
NemesisHandler = Callable[[dict[str, Any]], Awaitable[Applied]]


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
        transport: Transport | None = None,
        rng: random.Random | None = None,
        listener: Listener | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.core = Core(concurrency, recorder, clock, rng=rng, listener=listener, log=log)
        self.client_factory = clients
        self.transport = transport
        self.nemesis_handler = nemesis
        self.recorder = recorder
        self.clock = clock
        self._clients: dict[int, tuple[Any, Any, Connection | None]] = {}  # thread -> (process, client, conn)
        self._inbox: dict[Any, asyncio.Queue[dict[str, Any]]] = {}
        self._done: asyncio.Queue[tuple[Any, dict[str, Any], Any]] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def ops(self) -> list[dict[str, Any]]:
        return self.core.ops

    @property
    def nemesis_log(self) -> list[dict[str, Any]]:
        return self.core.nemesis_log

    @property
    def workers(self) -> dict[Any, Any]:
        return self.core.workers

    def context(self) -> Context:
        return self.core.context()

    def _start_workers(self) -> None:
        if self._tasks:
            return
        self._done = asyncio.Queue()
        for t in self.core.workers:
            self._inbox[t] = asyncio.Queue()
            worker = self._nemesis_worker if t == NEMESIS else self._client_worker
            self._tasks.append(asyncio.create_task(worker(t), name=f"worker-{t}"))

    async def run(self, gen: Generator | None) -> None:
        """Run `gen` until it is exhausted and every operation it started has completed."""
        self._start_workers()
        assert self._done is not None
        core = self.core
        core.start(gen)
        while True:
            while not self._done.empty():
                core.complete(*self._done.get_nowait())
            for thread, op in core.poll():
                self._inbox[thread].put_nowait(op)
            if core.finished:
                return
            wake = core.wake_in()
            item = await self._wait(None if wake is None else wake / 1e9)
            if item is not None:
                core.complete(*item)
            _raise_if_cancelled()

    async def _wait(self, seconds: float | None) -> tuple[Any, dict[str, Any], Any] | None:
        """The next completion, or None if `seconds` pass first."""
        assert self._done is not None
        try:
            return await asyncio.wait_for(self._done.get(), timeout=seconds)
        except TimeoutError:
            return None

    # ------------------------------------------------------------------ workers
    async def _client_for(self, thread: int, process: int) -> tuple[Any, Connection | None]:
        current = self._clients.get(thread)
        if current is not None and current[0] == process:
            return current[1], current[2]
        if current is not None:
            await _close(current[1], current[2])
        client = self.client_factory(thread, process)
        conn = None
        if hasattr(client, "receive"):  # sans-IO
            if self.transport is None:
                raise ValueError("a sans-IO client needs the interpreter's transport")
            conn = self.transport()
        self._clients[thread] = (process, client, conn)
        return client, conn

    async def _client_worker(self, thread: int) -> None:
        assert self._done is not None
        inbox = self._inbox[thread]
        while True:
            _raise_if_cancelled()  # a cancel swallowed anywhere inside the last invoke ends the worker here
            op = await inbox.get()
            try:
                client, conn = await self._client_for(thread, op["process"])
            except Exception as e:  # noqa: BLE001 - cannot open: the op did not happen (Jepsen's no-client)
                result = Completion("fail", op.get("value"), f"no-client: {e}", op.get("node"))
            else:
                try:
                    result = await (_legacy(client, op) if conn is None else _drive(client, conn, op))
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
        for _, client, conn in self._clients.values():
            await _close(client, conn)
        self._clients = {}


async def _drive(client: Any, conn: Connection, op: dict[str, Any]) -> Completion:
    """A sans-IO client's operation: its requests through `conn`, one at a time, to the completion."""
    step = client.invoke(op)
    while isinstance(step, Request):
        if step.backoff_s > 0:
            await asyncio.sleep(step.backoff_s)
        try:
            answer = await asyncio.wait_for(conn.call(step), timeout=step.timeout_s + GUARD_S)
        except TimeoutError:
            answer = Failure("timeout (client hung)", sent=True)
        step = client.receive(answer)
    return step


async def _legacy(client: Any, op: dict[str, Any]) -> Completion:
    try:
        return await asyncio.wait_for(client.invoke(op), timeout=client.timeout + GUARD_S)
    except TimeoutError:
        return Completion("info", op.get("value"), "timeout (client hung)", op.get("node"))


async def _close(client: Any, conn: Connection | None) -> None:
    with contextlib.suppress(Exception):
        if conn is not None:
            await conn.close()
        elif hasattr(client, "close"):
            await client.close()


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
