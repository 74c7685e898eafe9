"""The workloads' transport to our nodes on a real cluster: request bodies to the nodes' own protocols.

`NodesTransport(endpoints)()` opens a `Connection` for one client process; its `call` sends a
register `KvRequest` to a node's client listener (`nodes.runtime.kvapi`) and answers `Reply(KvReply)`,
or `Failure` when no answer came (`sent=False` when the request certainly never left: refused
connection, reconnect backoff). The queue workload's bodies go over the Kafka wire protocol to the
same listener (`harness.db.kafka_wire`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from harness.core.streams import stream
from harness.db.kafka_wire import KafkaWire
from nodes.runtime.client import (
    BackoffError,
    ClientClosedError,
    ClientConfig,
    ClientConnection,
    ConnectError,
    DisconnectedError,
    NetworkError,
    RequestTimeoutError,
)
from nodes.runtime.kvapi import KvWireError, decode_kv_reply, encode_kv_request
from workloads.protocol import Answer, Failure, Reply, Request
from workloads.queue.bodies import REQUESTS
from workloads.register import KvReply, KvRequest


class NodesConnection:
    """One client process's connections to the nodes (opened on first use, one per node)."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], rng: random.Random) -> None:
        self.endpoints = endpoints
        self.rng = rng
        self._conns: dict[str, ClientConnection] = {}
        self._kafka: KafkaWire | None = None

    def _conn(self, node: str, timeout_s: float) -> ClientConnection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.endpoints[node]
            config = ClientConfig(
                client_id="kraftwerk-kv",
                max_in_flight=1,
                request_timeout=timeout_s,
                connect_timeout=timeout_s,
                reconnect_backoff=0.05,
                reconnect_backoff_max=1.0,
            )
            conn = ClientConnection(host, port, config, rng=random.Random(self.rng.random()), name=f"kv {node}")
            self._conns[node] = conn
        return conn

    async def call(self, request: Request) -> Answer:
        body = request.body
        if isinstance(body, REQUESTS):
            if self._kafka is None:
                self._kafka = KafkaWire(self.endpoints, random.Random(self.rng.random()))
            return await self._kafka.call(request)
        if not isinstance(body, KvRequest):
            raise TypeError(f"our nodes cannot serve a {type(body).__name__}")
        api_key, payload = encode_kv_request(body.f, body.key, body.value)
        try:
            raw = await self._conn(request.node, request.timeout_s).send(api_key, 0, payload, timeout=request.timeout_s)
        except (BackoffError, ConnectError, ClientClosedError) as e:
            return Failure(f"connect-failed: {e}", sent=False)
        except RequestTimeoutError:
            return Failure("timeout", sent=True)
        except DisconnectedError as e:
            return Failure(f"disconnected: {e}", sent=True)
        except NetworkError as e:
            return Failure(f"network: {e}", sent=True)
        try:
            r = decode_kv_reply(raw if raw is not None else b"")
        except KvWireError as e:
            return Failure(f"bad-reply: {e}", sent=True)
        return Reply(KvReply(r.type, r.value, r.error, None if r.leader is None else f"n{r.leader}"))

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns = {}
        if self._kafka is not None:
            await self._kafka.close()


class NodesTransport:
    """Opens a `NodesConnection` per client process; `seed` makes their reconnect jitter reproducible."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], seed: int) -> None:
        self.endpoints = dict(endpoints)
        self.rng = stream("transport", seed)

    def __call__(self) -> NodesConnection:
        return NodesConnection(self.endpoints, random.Random(self.rng.random()))
