"""Workloads for real clusters: a client factory, a generator, a final generator and a checker model.

A workload plugs into the runner through `Workload`: `generator()` is the main phase's
client operations (the runner adds the time limit, the nemesis and the rate), `final(keys,
threads)` reads everything back after the cluster has healed, `client(thread, process)`
opens a client for one worker process, and `model` names what `check_run` checks the
history against; `setup(timeout)` runs once the cluster is ready, before the main phase.
The register workload is here; the queue workload (Kafka clients) is in
`harness.runner.queue_workload`.
"""

from __future__ import annotations

import argparse
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from harness.runner.interpreter import Client, Completion
from nodes.runtime.kvclient import KvClient
from workloads import generator as gen
from workloads.register import MODEL, RegisterGenerator


class Workload(ABC):
    """What the clients do on a real cluster."""

    name: str
    model: str  # checker model for harness.test_command.check_run ("cas-register", "queue", …)

    @abstractmethod
    def generator(self) -> gen.Generator:
        """Client operations of the main phase (unbounded: the runner adds the time limit)."""

    @abstractmethod
    def final(self, keys: Sequence[Any], threads: int) -> gen.Generator | None:
        """Operations after healing that read every key back."""

    @abstractmethod
    def client(self, thread: int, process: int) -> Client:
        """A fresh client for one worker process."""

    async def setup(self, timeout: float) -> float:
        """Prepare the cluster for the main phase (the queue workload creates its topic); seconds taken."""
        return 0.0


class RegisterClient:
    """One worker's KV client: sends each op to one node, as the simulator's clients do.

    The node is the op's `node` if given (replays), else the leader last heard of (9 times in
    10) or a random node. Definite errors (`not-leader`, refused connections) are `fail`;
    timeouts and lost connections are `info`.
    """

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], rng: random.Random, timeout: float) -> None:
        self.endpoints = dict(endpoints)
        self.names = sorted(self.endpoints, key=lambda n: (len(n), n))
        self.rng = rng
        self.timeout = timeout
        self.leader: str | None = None
        self._conns: dict[str, KvClient] = {}

    def choose(self) -> str:
        if self.leader is not None and self.rng.random() < 0.9:
            return self.leader
        return self.names[self.rng.randrange(len(self.names))]

    def _conn(self, node: str) -> KvClient:
        c = self._conns.get(node)
        if c is None:
            host, port = self.endpoints[node]
            c = KvClient(host, port, timeout=self.timeout, rng=random.Random(self.rng.random()))
            self._conns[node] = c
        return c

    async def invoke(self, op: dict[str, Any]) -> Completion:
        node = op.get("node") or self.choose()
        r = await self._conn(node).call(op["f"], op["key"], op.get("value"))
        if r.leader is not None:
            hint = f"n{r.leader}"
            self.leader = hint if hint in self.endpoints else None
        elif r.type == "fail" and r.error == "not-leader":
            self.leader = None
        if r.type == "info":
            self.leader = None
        value = r.value if (r.type == "ok" and op["f"] == "read") else op.get("value")
        return Completion(r.type, value, r.error, node)

    async def close(self) -> None:
        for c in self._conns.values():
            await c.close()
        self._conns = {}


class RegisterWorkload(Workload):
    """Linearizable registers (cas-register per key): read / write / cas with small values.

    Operations come from `workloads.register.RegisterGenerator` seeded as in the simulator,
    so the same seed draws the same operation stream on every backend.
    """

    name = "register"
    model = MODEL

    def __init__(
        self,
        endpoints: Mapping[str, tuple[str, int]],
        seed: int,
        *,
        timeout: float = 2.0,
        keys: int = 4,
        ops_per_key: int = 120,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.seed = seed
        self.timeout = timeout
        self.ops = RegisterGenerator(random.Random(f"workload-{seed}"), keys, ops_per_key)

    def _next(self, ctx: gen.Context) -> dict[str, Any]:
        op = self.ops.next()
        return {"f": op.f, "key": op.key, "value": op.value}

    def generator(self) -> gen.Generator:
        return gen.Fn(self._next)

    def final(self, keys: Sequence[Any], threads: int) -> gen.Generator | None:
        """Each key read until a read succeeds; keys dealt round-robin to the client threads."""
        if not keys:
            return None
        per_thread = []
        for t in range(min(threads, len(keys))):
            reads = [
                gen.until_ok(gen.delay(0.1, gen.repeat({"f": "read", "key": k, "value": None})))
                for k in keys[t::threads]
            ]
            per_thread.append(gen.on_threads(lambda x, t=t: x == t, reads))
        return gen.any_of(*per_thread)

    def client(self, thread: int, process: int) -> Client:
        rng = random.Random(f"client-{self.seed}-{thread}-{process}")
        return RegisterClient(self.endpoints, rng, self.timeout)


def make_workload(
    name: str,
    endpoints: Mapping[str, tuple[str, int]],
    seed: int,
    *,
    options: argparse.Namespace | None = None,
    **kwargs: Any,
) -> Workload:
    """The workload called `name` for these client endpoints ({node: (host, port)}); `options`
    (`kraftwerk test`'s arguments) carry the queue workload's --acks, --partitions, …"""
    if name == "register":
        return RegisterWorkload(endpoints, seed, **kwargs)
    if name == "queue":
        from harness.runner.queue_workload import QueueWorkload

        if options is None:
            return QueueWorkload(endpoints, seed, **kwargs)
        return QueueWorkload.from_options(endpoints, seed, options, **kwargs)
    raise ValueError(f"workload {name!r} is not available on real clusters (available: register, queue)")
