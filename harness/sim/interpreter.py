"""Drives the interpreter's core (`harness.core.interpreter`) in the simulator's virtual time.

The same generators, thread choice and history bookkeeping as on real clusters; each client
thread's sans-IO client sends its requests through the simulator's transport, on its own
network link (`c<thread>`), so one client's traffic never shifts another's timing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.interpreter import Core
from harness.sim.engine import SECOND, Scheduler
from harness.sim.transport import SimTransport
from workloads.generator import Generator
from workloads.protocol import Answer, Client, Completion, Request, Step


class SimInterpreter:
    """Runs generators against `core`'s client threads on `sched`; clients from `clients(thread, process)`."""

    def __init__(
        self, core: Core, sched: Scheduler, transport: SimTransport, clients: Callable[[int, int], Client]
    ) -> None:
        self.core = core
        self.sched = sched
        self.transport = transport
        self.client_factory = clients
        self._clients: dict[int, tuple[int, Client]] = {}
        self._wake_at: int | None = None

    def start(self, generator: Generator | None) -> None:
        """Run `generator` from now on (as far as the scheduler is run)."""
        self.core.start(generator)
        self._wake()

    def _wake(self) -> None:
        self._wake_at = None
        core = self.core
        for thread, op in core.poll():
            client = self._client(thread, op["process"])
            self._step(thread, op, client, client.invoke(op))
        delay = core.wake_in()
        if delay is not None:
            self._wake_after(delay)

    def _wake_after(self, delay: int) -> None:
        when = self.sched.now + delay
        if self._wake_at is not None and self._wake_at <= when:
            return
        self._wake_at = when
        self.sched.at(when, self._woken, when)

    def _woken(self, when: int) -> None:
        if self._wake_at == when:
            self._wake()

    def _client(self, thread: int, process: int) -> Client:
        current = self._clients.get(thread)
        if current is None or current[0] != process:
            current = self._clients[thread] = (process, self.client_factory(thread, process))
        return current[1]

    def _step(self, thread: int, op: dict[str, Any], client: Client, step: Step) -> None:
        if isinstance(step, Request):

            def answered(answer: Answer) -> None:
                self._step(thread, op, client, client.receive(answer))

            if step.backoff_s > 0:
                self.sched.after(int(step.backoff_s * SECOND), self.transport.send, f"c{thread}", step, answered)
            else:
                self.transport.send(f"c{thread}", step, answered)
            return
        assert isinstance(step, Completion)
        self.core.complete(thread, op, step)
        self._wake()
