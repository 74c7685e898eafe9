"""Async clients of the KV service (the client listener's API, ``kvapi.py``).

:class:`KvClient` talks to one node; every operation returns a :class:`~nodes.runtime.kvapi.KvResult`
``(type, value, error, leader)`` in history terms and never raises for network trouble:

* the node's answer as is (``ok``; ``fail`` with ``not-leader``/``cas-mismatch``/``bad-request``;
  ``info`` when the node lost leadership after appending);
* ``fail`` / ``"connect-failed: …"`` when the request could not be sent (connection refused,
  reconnect backoff): it definitely did not happen;
* ``info`` / ``"timeout"`` or ``"disconnected"`` when it was sent but no answer came: it may
  have happened.

:class:`KvClusterClient` holds a :class:`KvClient` per node and follows ``not-leader`` hints;
it only retries answers that are definite failures, so an ``info`` is returned as is.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Mapping
from typing import Any

from .client import (
    BackoffError,
    ClientClosedError,
    ClientConfig,
    ClientConnection,
    ConnectError,
    DisconnectedError,
    NetworkError,
    RequestTimeoutError,
)
from .kvapi import (
    ADMIN_DESCRIBE,
    ADMIN_DUMP_LOG,
    ADMIN_DUMP_PARTITIONS,
    KvResult,
    KvWireError,
    decode_kv_reply,
    encode_kv_request,
)

__all__ = ["KvClient", "KvClusterClient", "KvResult"]

_RETRYABLE = ("not-leader", "shutting-down")


class KvClient:
    """One node's client listener. Use ``async with KvClient(host, port) as c: await c.read("k")``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 5.0,
        connect_timeout: float | None = None,
        client_id: str = "kraftwerk-kv",
        rng: random.Random | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        config = ClientConfig(
            client_id=client_id,
            max_in_flight=1,
            request_timeout=timeout,
            connect_timeout=timeout if connect_timeout is None else connect_timeout,
            reconnect_backoff=0.05,
            reconnect_backoff_max=1.0,
        )
        self._conn = ClientConnection(host, port, config, rng=rng, name=f"kv {host}:{port}")

    async def __aenter__(self) -> KvClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def read(self, key: str, *, timeout: float | None = None) -> KvResult:
        return await self.call("read", key, None, timeout=timeout)

    async def write(self, key: str, value: Any, *, timeout: float | None = None) -> KvResult:
        return await self.call("write", key, value, timeout=timeout)

    async def cas(self, key: str, expected: Any, new: Any, *, timeout: float | None = None) -> KvResult:
        return await self.call("cas", key, [expected, new], timeout=timeout)

    async def call(self, f: str, key: str, value: Any = None, *, timeout: float | None = None) -> KvResult:
        """Run ``read``/``write``/``cas`` (cas value ``[expected, new]``)."""
        api_key, body = encode_kv_request(f, key, value)
        try:
            reply = await self._conn.send(api_key, 0, body, timeout=self.timeout if timeout is None else timeout)
        except (BackoffError, ConnectError, ClientClosedError) as exc:
            return KvResult("fail", None, f"connect-failed: {exc}")
        except RequestTimeoutError:
            return KvResult("info", None, "timeout")
        except DisconnectedError as exc:
            return KvResult("info", None, f"disconnected: {exc}")
        except NetworkError as exc:
            return KvResult("info", None, f"network: {exc}")
        try:
            return decode_kv_reply(reply if reply is not None else b"")
        except KvWireError as exc:
            return KvResult("info", None, f"bad-reply: {exc}")

    async def describe(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The node's status (AdminDescribe). Raises NetworkError / ValueError on failure."""
        body = await self._conn.send(ADMIN_DESCRIBE, 0, b"", timeout=timeout)
        doc = json.loads(bytes(body or b"").decode())
        if not isinstance(doc, dict):
            raise KvWireError("status is not an object")
        return doc

    async def dump_log_text(self, *, timeout: float | None = None) -> str:
        """The committed-log dump as ``logs/<node>.jsonl`` text (AdminDumpLog)."""
        body = await self._conn.send(ADMIN_DUMP_LOG, 0, b"", timeout=timeout)
        return bytes(body or b"").decode()

    async def dump_log(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """The committed-log dump, one dict per entry."""
        return [json.loads(line) for line in (await self.dump_log_text(timeout=timeout)).splitlines() if line]

    async def dump_partitions(self, *, timeout: float | None = None) -> dict[str, list[dict[str, Any]]]:
        """A broker's committed partition batches, ``{partition: [{offset, epoch, digest}]}``
        (AdminDumpPartitions; {} from a node without the broker role)."""
        body = await self._conn.send(ADMIN_DUMP_PARTITIONS, 0, b"", timeout=timeout)
        doc = json.loads(bytes(body or b"").decode())
        if not isinstance(doc, dict):
            raise KvWireError("partition dump is not an object")
        return doc

    async def close(self) -> None:
        await self._conn.close()


class KvClusterClient:
    """Routes operations to the leader of a cluster given ``{node id: (host, port)}``.

    ``timeout`` bounds a whole call including redirects; ``last_node`` is the node that gave the
    final answer (for the history's ``node`` field).
    """

    def __init__(
        self,
        nodes: Mapping[int, tuple[str, int]],
        *,
        timeout: float = 5.0,
        retry_backoff: float = 0.05,
        rng: random.Random | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("need at least one node")
        self._rng = rng if rng is not None else random.Random()
        self._clients = {
            n: KvClient(host, port, timeout=timeout, rng=random.Random(self._rng.random()))
            for n, (host, port) in nodes.items()
        }
        self._order = sorted(self._clients)
        self.timeout = timeout
        self.retry_backoff = retry_backoff
        self.leader: int | None = None
        self.last_node: int | None = None
        self._next = self._rng.randrange(len(self._order))

    def client(self, node: int) -> KvClient:
        return self._clients[node]

    async def __aenter__(self) -> KvClusterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def read(self, key: str) -> KvResult:
        return await self.call("read", key)

    async def write(self, key: str, value: Any) -> KvResult:
        return await self.call("write", key, value)

    async def cas(self, key: str, expected: Any, new: Any) -> KvResult:
        return await self.call("cas", key, [expected, new])

    def _pick(self) -> int:
        if self.leader in self._clients:
            return self.leader
        node = self._order[self._next % len(self._order)]
        self._next += 1
        return node

    async def call(self, f: str, key: str, value: Any = None) -> KvResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        result = KvResult("fail", None, "no-attempt")
        for attempt in itertools.count():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return result
            node = self._pick()
            result = await self._clients[node].call(f, key, value, timeout=remaining)
            self.last_node = node
            retry = result.type == "fail" and (
                result.error in _RETRYABLE or (result.error or "").startswith("connect-failed")
            )
            if not retry:
                if result.type == "ok":
                    self.leader = node
                return result
            hint = result.leader if result.error == "not-leader" else None
            self.leader = hint if hint != node and hint in self._clients else None
            if self.leader is None or attempt >= len(self._order):
                await asyncio.sleep(min(self.retry_backoff, max(0.0, deadline - loop.time())))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)
