"""Asyncio client side of the request protocol (Kafka's NetworkClient / raft network channel).

`ClientConnection` owns one destination: at most one TCP connection at a time, correlation ids,
at most `max_in_flight` requests in flight, a per-request timeout and reconnect backoff.
`NetworkClient` keeps one `ClientConnection` per destination id (a raft voter, a broker).

Failure semantics, as in Kafka:

* a request with no response within its timeout fails with `RequestTimeoutError`; if it had
  already been written, the connection is reset (every other in-flight request on it fails
  with `DisconnectedError`), so a late response can never be matched to a later request;
* a disconnect (EOF, socket error, malformed or out-of-order response) fails every in-flight
  request with `DisconnectedError`;
* a failed connect raises `ConnectError` and puts the destination into reconnect backoff,
  `reconnect_backoff * 2**failures` capped at `reconnect_backoff_max`, with +/- `backoff_jitter`
  drawn from the injected `random.Random`. While backing off, `send` fails at once with
  `BackoffError` (carrying `retry_after`), unless `wait_for_backoff` is set.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from .framing import (
    DEFAULT_MAX_BYTES,
    FrameDecoder,
    FrameError,
    HeaderVersions,
    classic_header_versions,
    decode_response,
    peek_correlation_id,
    request_frame_parts,
)

__all__ = [
    "Backoff",
    "BackoffError",
    "ClientClosedError",
    "ClientConfig",
    "ClientConnection",
    "ConnectError",
    "DisconnectedError",
    "NetworkClient",
    "NetworkError",
    "RequestTimeoutError",
]

log = logging.getLogger(__name__)

_MAX_CORRELATION_ID = 0x7FFFFFFF


class NetworkError(Exception):
    """Base class of the client's errors."""


class DisconnectedError(NetworkError, ConnectionError):
    """The connection went away (or was reset) before the response arrived."""


class ConnectError(DisconnectedError):
    """A connection attempt failed."""


class BackoffError(DisconnectedError):
    """The destination is in reconnect backoff; retry after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RequestTimeoutError(NetworkError, TimeoutError):
    """No response within the request timeout."""


class ClientClosedError(NetworkError):
    """The client was closed."""


@dataclass(slots=True)
class ClientConfig:
    client_id: str | None = "kraftwerk"
    max_in_flight: int = 1  # raft: 1; Kafka producers: max.in.flight.requests.per.connection = 5
    request_timeout: float = 30.0  # request.timeout.ms, seconds
    connect_timeout: float = 10.0  # socket.connection.setup.timeout.ms, seconds
    reconnect_backoff: float = 0.05  # reconnect.backoff.ms, seconds
    reconnect_backoff_max: float = 1.0  # reconnect.backoff.max.ms, seconds
    backoff_jitter: float = 0.2
    wait_for_backoff: bool = False
    max_response_bytes: int | None = DEFAULT_MAX_BYTES
    header_versions: HeaderVersions = classic_header_versions
    read_chunk: int = 64 * 1024

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if not 0 <= self.backoff_jitter < 1:
            raise ValueError("backoff_jitter must be in [0, 1)")


class Backoff:
    """Exponential backoff: `initial * multiplier**attempts`, jittered by +/- `jitter`, capped at
    `maximum`. Randomness comes only from `rng`, so a seeded `random.Random` replays exactly."""

    __slots__ = ("initial", "maximum", "multiplier", "jitter", "rng")

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if initial < 0 or maximum < 0 or multiplier < 1:
            raise ValueError("backoff needs initial >= 0, maximum >= 0 and multiplier >= 1")
        self.initial = initial
        self.maximum = max(initial, maximum)
        self.multiplier = multiplier
        self.jitter = jitter
        self.rng = rng if rng is not None else random.Random()

    def delay(self, attempts: int) -> float:
        """Delay before the next attempt after `attempts` consecutive failures (0 = first)."""
        if self.initial == 0:
            return 0.0
        term = min(self.initial * self.multiplier ** min(attempts, 64), self.maximum)
        if self.jitter > 0:
            term *= self.rng.uniform(1 - self.jitter, 1 + self.jitter)
        return min(term, self.maximum)


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    future: asyncio.Future[memoryview]
    response_header_version: int


class _Link:
    """One live TCP connection."""

    __slots__ = ("reader", "writer", "inflight", "read_task", "closed")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.inflight: deque[_Pending] = deque()
        self.read_task: asyncio.Task[None] | None = None
        self.closed = False


class ClientConnection:
    """Requests to one destination over one (re)connecting TCP connection."""

    def __init__(
        self,
        host: str,
        port: int,
        config: ClientConfig | None = None,
        *,
        rng: random.Random | None = None,
        name: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.config = config or ClientConfig()
        self.name = name or f"{host}:{port}"
        cfg = self.config
        self._backoff = Backoff(cfg.reconnect_backoff, cfg.reconnect_backoff_max, jitter=cfg.backoff_jitter, rng=rng)
        self._link: _Link | None = None
        self._slots = asyncio.Semaphore(cfg.max_in_flight)
        self._connect_lock = asyncio.Lock()
        self._failures = 0
        self._last_attempt = float("-inf")
        self._backoff_until = float("-inf")
        self._next_correlation = 0
        self._closed = False
        self._stats = dict.fromkeys(
            (
                "connects",
                "connect_failures",
                "disconnects",
                "requests_sent",
                "responses_received",
                "timeouts",
            ),
            0,
        )

    # state ----------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._link is not None and not self._link.closed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._link.inflight) if self.connected and self._link is not None else 0

    def ready_in(self) -> float:
        """Seconds until a connection attempt is allowed (0 if connected or not backing off)."""
        if self.connected:
            return 0.0
        return max(0.0, self._backoff_until - asyncio.get_running_loop().time())

    def metrics(self) -> dict[str, int]:
        return {**self._stats, "connected": int(self.connected), "in_flight": self.in_flight}

    # public operations ----------------------------------------------------------------------
    async def connect(self, timeout: float | None = None) -> None:
        """Connect now if not connected (normally `send` does this on demand)."""
        if self._closed:
            raise ClientClosedError(f"connection to {self.name} is closed")
        loop = asyncio.get_running_loop()
        await self._ensure_link(loop.time() + (self.config.request_timeout if timeout is None else timeout))

    async def send(
        self,
        api_key: int,
        api_version: int,
        body: bytes | bytearray | memoryview,
        *,
        timeout: float | None = None,
        expect_response: bool = True,
    ) -> memoryview | None:
        """Send one request and return the response body (after the response header), or None
        when `expect_response` is false (e.g. acks=0 produce: returns once written)."""
        if self._closed:
            raise ClientClosedError(f"connection to {self.name} is closed")
        loop = asyncio.get_running_loop()
        timeout = self.config.request_timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        try:
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        except TimeoutError:
            self._stats["timeouts"] += 1
            raise RequestTimeoutError(f"{self.name}: no in-flight slot within {timeout}s (api {api_key})") from None
        try:
            return await self._send_on_slot(api_key, api_version, body, deadline, timeout, expect_response)
        finally:
            self._slots.release()

    async def close(self) -> None:
        """Fail in-flight requests with `ClientClosedError` and close the socket."""
        self._closed = True
        link = self._link
        if link is not None:
            self._reset(link, ClientClosedError(f"connection to {self.name} closed"), count=False)
            if link.read_task is not None:
                await asyncio.wait({link.read_task})

    # internals ------------------------------------------------------------------------------
    async def _send_on_slot(
        self,
        api_key: int,
        api_version: int,
        body: bytes | bytearray | memoryview,
        deadline: float,
        timeout: float,
        expect_response: bool,
    ) -> memoryview | None:
        cfg = self.config
        link = await self._ensure_link(deadline)
        request_hv, response_hv = cfg.header_versions(api_key, api_version)
        correlation_id = self._next_correlation
        self._next_correlation = 0 if correlation_id == _MAX_CORRELATION_ID else correlation_id + 1
        parts = request_frame_parts(
            api_key, api_version, correlation_id, body, client_id=cfg.client_id, header_version=request_hv
        )
        future: asyncio.Future[memoryview] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            link.inflight.append(_Pending(correlation_id, future, response_hv))
        # Appending to `inflight` and writing happen with no await in between, so the wire
        # order of requests is the order of `inflight`.
        link.writer.writelines(parts)
        self._stats["requests_sent"] += 1
        try:
            async with asyncio.timeout_at(deadline):
                await link.writer.drain()
                if future is None:
                    return None
                return await future
        except TimeoutError:
            self._stats["timeouts"] += 1
            self._reset(link, DisconnectedError(f"{self.name}: connection reset after a request timeout"))
            raise RequestTimeoutError(
                f"{self.name}: no response to api {api_key} v{api_version} "
                f"(correlation id {correlation_id}) within {timeout}s"
            ) from None
        except (ConnectionError, OSError) as e:
            if isinstance(e, NetworkError):
                raise
            self._reset(link, DisconnectedError(f"{self.name}: write failed: {e!r}"))
            raise DisconnectedError(f"{self.name}: write failed: {e!r}") from e

    async def _ensure_link(self, deadline: float) -> _Link:
        link = self._link
        if link is not None and not link.closed:
            return link
        async with self._connect_lock:
            link = self._link
            if link is not None and not link.closed:
                return link
            if self._closed:
                raise ClientClosedError(f"connection to {self.name} is closed")
            loop = asyncio.get_running_loop()
            wait = self._backoff_until - loop.time()
            if wait > 0:
                if not self.config.wait_for_backoff:
                    raise BackoffError(f"{self.name}: in reconnect backoff for {wait:.3f}s", wait)
                if loop.time() + wait > deadline:
                    await asyncio.sleep(max(0.0, deadline - loop.time()))
                    self._stats["timeouts"] += 1
                    raise RequestTimeoutError(f"{self.name}: still in reconnect backoff at the deadline")
                await asyncio.sleep(wait)
            return await self._open(deadline)

    async def _open(self, deadline: float) -> _Link:
        cfg = self.config
        loop = asyncio.get_running_loop()
        self._last_attempt = now = loop.time()
        limit = min(now + cfg.connect_timeout, deadline)
        try:
            async with asyncio.timeout_at(limit):
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=cfg.read_chunk)
        except TimeoutError:
            self._connect_failed()
            if limit >= deadline:
                self._stats["timeouts"] += 1
                raise RequestTimeoutError(f"{self.name}: connect did not finish before the deadline") from None
            raise ConnectError(f"{self.name}: connect timed out after {cfg.connect_timeout}s") from None
        except OSError as e:
            self._connect_failed()
            raise ConnectError(f"{self.name}: cannot connect: {e}") from e
        if self._closed:
            writer.transport.abort()
            raise ClientClosedError(f"connection to {self.name} closed while connecting")
        self._failures = 0
        self._stats["connects"] += 1
        link = _Link(reader, writer)
        link.read_task = asyncio.create_task(self._read_loop(link), name=f"client-read {self.name}")
        self._link = link
        log.debug("%s: connected", self.name)
        return link

    def _connect_failed(self) -> None:
        self._stats["connect_failures"] += 1
        self._schedule_backoff()

    def _schedule_backoff(self) -> None:
        # Measured from the last connect attempt, like Kafka: a long-lived connection that drops
        # may reconnect at once, repeated failures back off exponentially.
        self._backoff_until = self._last_attempt + self._backoff.delay(self._failures)
        self._failures += 1

    def _reset(self, link: _Link, error: BaseException, *, count: bool = True) -> None:
        if link.closed:
            return
        link.closed = True
        if self._link is link:
            self._link = None
        if count:
            self._stats["disconnects"] += 1
            self._schedule_backoff()
        link.writer.transport.abort()
        if link.read_task is not None and link.read_task is not asyncio.current_task():
            link.read_task.cancel()
        pending = list(link.inflight)
        link.inflight.clear()
        for p in pending:
            if not p.future.done():
                p.future.set_exception(error)
        log.debug("%s: connection reset: %s", self.name, error)

    async def _read_loop(self, link: _Link) -> None:
        decoder = FrameDecoder(self.config.max_response_bytes)
        error: BaseException
        try:
            while True:
                data = await link.reader.read(self.config.read_chunk)
                if not data:
                    error = DisconnectedError(f"{self.name}: connection closed by the server")
                    break
                for frame in decoder.feed(data):
                    self._complete(link, frame)
        except asyncio.CancelledError:
            raise
        except DisconnectedError as e:
            error = e
        except FrameError as e:
            error = DisconnectedError(f"{self.name}: bad response frame: {e}")
        except (ConnectionError, OSError) as e:
            error = DisconnectedError(f"{self.name}: read failed: {e!r}")
        self._reset(link, error)

    def _complete(self, link: _Link, frame: bytes) -> None:
        correlation_id = peek_correlation_id(frame)
        if not link.inflight:
            raise DisconnectedError(f"{self.name}: unexpected response (correlation id {correlation_id})")
        head = link.inflight[0]
        if head.correlation_id != correlation_id:
            raise DisconnectedError(
                f"{self.name}: correlation id {correlation_id} does not match the oldest "
                f"in-flight request ({head.correlation_id})"
            )
        link.inflight.popleft()
        _, body = decode_response(frame, head.response_header_version)
        self._stats["responses_received"] += 1
        if not head.future.done():  # the caller may have been cancelled meanwhile
            head.future.set_result(body)


class NetworkClient:
    """One `ClientConnection` per destination id, all sharing a config and an rng."""

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        addresses: Mapping[Hashable, tuple[str, int]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config or ClientConfig()
        self._rng = rng if rng is not None else random.Random()
        self._addresses: dict[Hashable, tuple[str, int]] = dict(addresses or {})
        self._conns: dict[Hashable, ClientConnection] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._closed = False

    def set_address(self, node: Hashable, host: str, port: int) -> None:
        """Add or move a destination; a connection to its old address is closed."""
        if self._addresses.get(node) == (host, port):
            return
        self._addresses[node] = (host, port)
        old = self._conns.pop(node, None)
        if old is not None:
            task = asyncio.get_running_loop().create_task(old.close())
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)

    def connection(self, node: Hashable) -> ClientConnection:
        if self._closed:
            raise ClientClosedError("network client is closed")
        conn = self._conns.get(node)
        if conn is None:
            try:
                host, port = self._addresses[node]
            except KeyError:
                raise KeyError(f"no address for destination {node!r}") from None
            conn = ClientConnection(host, port, self.config, rng=self._rng, name=str(node))
            self._conns[node] = conn
        return conn

    async def send(
        self,
        node: Hashable,
        api_key: int,
        api_version: int,
        body: bytes | bytearray | memoryview,
        *,
        timeout: float | None = None,
        expect_response: bool = True,
    ) -> memoryview | None:
        return await self.connection(node).send(
            api_key, api_version, body, timeout=timeout, expect_response=expect_response
        )

    def ready_in(self, node: Hashable) -> float:
        conn = self._conns.get(node)
        return 0.0 if conn is None else conn.ready_in()

    async def disconnect(self, node: Hashable) -> None:
        """Close the connection to `node` (it will reconnect on the next send)."""
        conn = self._conns.pop(node, None)
        if conn is not None:
            await conn.close()

    def metrics(self) -> dict[str, Any]:
        total: dict[str, int] = {}
        for conn in self._conns.values():
            for k, v in conn.metrics().items():
                total[k] = total.get(k, 0) + v
        return total

    async def close(self) -> None:
        self._closed = True
        conns = list(self._conns.values())
        self._conns.clear()
        await asyncio.gather(*(c.close() for c in conns), *self._retired, return_exceptions=True)
