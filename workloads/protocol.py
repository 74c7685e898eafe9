"""The workload protocols: what a workload gives a runtime, and how a runtime drives its clients.

Interfaces only. A workload (`workloads/NAME.py`, or a package `workloads/NAME/`) is a Jepsen-style
partial test: generators for its setup, main and final phases, a sans-IO client per worker process
and the checkers it needs. A runtime (the simulator, a real cluster) steps the generators with one
interpreter, and moves a client's requests to the nodes through its transport port:

    step = client.invoke(op)
    while isinstance(step, Request):
        step = client.receive(transport(step))   # Reply(body) or Failure(reason, sent)
    completion = step

One request is outstanding per client at a time. Request and reply bodies are plain values each
workload defines; the transport translates them to the system's own protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from workloads.generator import Generator

Op = dict[str, Any]  # f, key, value, process, time; optional "node": the node a replayed op must use


@dataclass(frozen=True)
class Request:
    """Send `body` to `node`; give up after `timeout_s` seconds (then the answer is Failure("timeout")).
    `backoff_s`: wait this long before sending it (a client's retry backoff)."""

    node: str
    body: Any
    timeout_s: float
    backoff_s: float = 0.0


@dataclass(frozen=True)
class Reply:
    """The node answered."""

    body: Any


@dataclass(frozen=True)
class Failure:
    """No answer: "timeout", "refused", "closed", … `sent` is False if the request certainly never reached
    the node (so the operation certainly did not happen)."""

    reason: str
    sent: bool


@dataclass(frozen=True)
class Completion:
    """How a client operation ended, in history terms: ok | fail | info. `extra`: further fields of the
    completion's history line (optional ones a model defines, such as the queue's ``assigned``)."""

    type: str
    value: Any = None
    error: str | None = None
    node: str | None = None
    extra: dict[str, Any] | None = None


Step = Request | Completion
Answer = Reply | Failure


class Client(Protocol):
    """One worker process's client, sans-IO: an operation in, requests out, answers in, a completion out."""

    def invoke(self, op: Op) -> Step:
        """Start `op`: the first request to send, or a completion at once."""
        ...

    def receive(self, answer: Answer) -> Step:
        """The answer to the outstanding request: the next request, or the completion."""
        ...


class Workload(Protocol):
    """A partial test: what the clients do, and how their history is judged."""

    name: str
    model: str  # the checker model the history is judged by ("cas-register", "queue", …)
    api: str  # the client API its requests need from the system ("kv", "kafka"): a DB serves it or not

    def options(self) -> dict[str, Any]:
        """Its settings a DB needs to serve it (the queue's topic defaults: partitions, replication-factor,
        min-isr, unclean), by test.json's names; {} when it needs none."""
        ...

    def setup(self) -> Generator | None:
        """Operations before the main phase that are not part of the history (None: nothing to do)."""
        ...

    def generator(self) -> Generator:
        """Client operations of the main phase (unbounded: the runtime adds the time limit and the rate)."""
        ...

    def final(self, keys: Sequence[str], threads: int) -> Generator | None:
        """Operations after healing that read every key back (None: nothing to read)."""
        ...

    def client(self, thread: int, process: int) -> Client:
        """A fresh client for one worker process."""
        ...
