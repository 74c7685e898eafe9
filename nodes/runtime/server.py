"""Asyncio request server in the shape of Kafka's SocketServer + RequestChannel.

* The acceptor (`asyncio.start_server`) takes connections; each connection gets a reader task
  (Kafka's processor role for that socket) and a writer task.
* The reader splits the stream into frames with `FrameDecoder`, checking each size prefix
  against `socket_request_max_bytes` before buffering, parses the request header and puts the
  request on ONE bounded queue (`queued_max_requests`) shared by `num_handlers` handler tasks.
  When the queue is full the reader blocks on it and stops reading its socket: asyncio then
  pauses the transport and TCP pushes back on the client. Nothing is buffered without bound.
* Ordering: each connection may have at most `max_in_flight_per_connection` requests between
  "read" and "response written". The default 1 is Kafka's muting: the next request is not even
  read until the previous response went out, so requests are also *handled* in order. Above 1,
  requests are pipelined and may be handled concurrently, but responses are still written in
  request order: the writer task awaits per-request slots in arrival order.
* A handler returns the response *body* (the server adds the size prefix and response header),
  or None for no response (acks=0), or an `asyncio.Future` resolving to either later: that
  parks the request like Kafka's purgatory and frees the handler task at once.
* Errors are per connection: an oversized/negative size prefix, a malformed header, a handler
  exception without an `on_error` answer, `CloseConnection`, a socket error or idleness beyond
  `connections_max_idle` closes that connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from .framing import (
    DEFAULT_MAX_BYTES,
    FrameDecoder,
    FrameError,
    HeaderVersions,
    RequestHeader,
    classic_header_versions,
    decode_request,
    response_frame_parts,
)

__all__ = [
    "CloseConnection",
    "ErrorHook",
    "Handler",
    "Request",
    "ResponseBody",
    "Server",
    "ServerConfig",
]

log = logging.getLogger(__name__)

ResponseBody = bytes | bytearray | memoryview
Handler = Callable[["Request"], Awaitable["ResponseBody | None | asyncio.Future[ResponseBody | None]"]]
ErrorHook = Callable[["Request", BaseException], "ResponseBody | None"]


class CloseConnection(Exception):  # noqa: N818 - it is a control signal, not an error
    """Raise from a handler to close the request's connection without answering."""


@dataclass(slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0 = ephemeral
    num_handlers: int = 8  # num.io.threads
    queued_max_requests: int = 500  # queued.max.requests
    socket_request_max_bytes: int = DEFAULT_MAX_BYTES  # socket.request.max.bytes
    max_in_flight_per_connection: int = 1  # 1 = Kafka's muting
    connections_max_idle: float | None = 600.0  # seconds (connections.max.idle.ms); None = never
    max_connections: int | None = None  # max.connections
    max_connections_per_ip: int | None = None  # max.connections.per.ip
    header_versions: HeaderVersions = classic_header_versions
    read_chunk: int = 64 * 1024
    backlog: int = 128

    def __post_init__(self) -> None:
        for name in ("num_handlers", "queued_max_requests", "max_in_flight_per_connection", "read_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.socket_request_max_bytes < 0:
            raise ValueError("socket_request_max_bytes must be >= 0")


@dataclass(slots=True, frozen=True)
class Request:
    """One decoded request. `body` is a view of the frame after the header."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: memoryview
    header: RequestHeader
    response_header_version: int
    connection_id: str
    peer: Any  # (host, port) for TCP
    local: Any
    received_at: float  # event-loop time
    size: int  # frame payload bytes


_Parts = tuple[bytes, ResponseBody]


class _Connection:
    __slots__ = (
        "cid",
        "reader",
        "writer",
        "peer",
        "ip",
        "local",
        "inflight",
        "slots",
        "pending",
        "last_active",
        "closed",
        "reader_task",
        "writer_task",
    )

    def __init__(
        self,
        cid: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: Any,
        local: Any,
        max_in_flight: int,
        now: float,
    ) -> None:
        self.cid = cid
        self.reader = reader
        self.writer = writer
        self.peer = peer
        self.ip = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        self.local = local
        self.inflight = asyncio.Semaphore(max_in_flight)
        # response slots in request order; None is the "close after what is queued" marker
        self.slots: asyncio.Queue[asyncio.Future[_Parts | None] | None] = asyncio.Queue()
        self.pending = 0  # requests read whose response (or non-response) is not yet written
        self.last_active = now
        self.closed = False
        self.reader_task: asyncio.Task[None] | None = None
        self.writer_task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _Counters:
    connections_accepted: int = 0
    connections_closed: int = 0
    connections_rejected: int = 0
    connections_idle_closed: int = 0
    requests_received: int = 0
    responses_sent: int = 0
    requests_without_response: int = 0
    requests_dropped: int = 0  # connection gone before the response could be written
    request_errors: int = 0  # handler raised (or its deferred future failed)
    frame_errors: int = 0  # bad size prefix / malformed header
    bytes_in: int = 0
    bytes_out: int = 0
    queue_depth_max: int = 0


class Server:
    """`Server(handler, config, on_error=None)`; `await start()`, `port`, `metrics()`, `await close()`.

    `on_error(request, exc)` is called (synchronously) when the handler raises; bytes it returns
    are sent as the response body, None closes the connection.
    """

    def __init__(
        self,
        handler: Handler,
        config: ServerConfig | None = None,
        *,
        on_error: ErrorHook | None = None,
    ) -> None:
        self.config = config or ServerConfig()
        self._handler = handler
        self._on_error = on_error
        self._server: asyncio.base_events.Server | None = None
        self._queue: asyncio.Queue[tuple[_Connection, Request, asyncio.Future[_Parts | None]]] | None = None
        self._conns: dict[str, _Connection] = {}
        self._per_ip: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._next_conn = 0
        self._counters = _Counters()
        self._closing = False
        self._closed = asyncio.Event()

    # lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("server already started")
        cfg = self.config
        self._queue = asyncio.Queue(cfg.queued_max_requests)
        self._server = await asyncio.start_server(
            self._accept, cfg.host, cfg.port, limit=cfg.read_chunk, backlog=cfg.backlog
        )
        for i in range(cfg.num_handlers):
            self._tasks.append(asyncio.create_task(self._handler_loop(), name=f"request-handler-{i}"))
        if cfg.connections_max_idle is not None:
            self._tasks.append(asyncio.create_task(self._idle_reaper(), name="idle-reaper"))
        log.info("listening on %s", self.addresses)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        if self._server is None:
            return []
        return [s.getsockname()[:2] for s in self._server.sockets]

    @property
    def port(self) -> int:
        """The bound port (useful with port=0)."""
        if not self.addresses:
            raise RuntimeError("server not started")
        return self.addresses[0][1]

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float = 5.0) -> None:
        """Stop accepting and reading; let requests already read finish and their responses be
        written (up to `timeout` seconds); then close every connection and stop the handlers."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        if self._server is not None:
            self._server.close()
        conns = list(self._conns.values())
        for conn in conns:
            if conn.reader_task is not None:
                conn.reader_task.cancel()
        readers = [c.reader_task for c in conns if c.reader_task is not None]
        if readers:
            await asyncio.gather(*readers, return_exceptions=True)
        writers = []
        for conn in conns:
            if not conn.closed:
                conn.slots.put_nowait(None)
                if conn.writer_task is not None:
                    writers.append(conn.writer_task)
        if writers:
            await asyncio.wait(writers, timeout=timeout)
        for conn in list(self._conns.values()):
            self._close_conn(conn, "server shutdown", abort=True)
        for task in self._tasks:
            task.cancel()
        leftovers = [t for c in conns for t in (c.reader_task, c.writer_task) if t is not None]
        await asyncio.gather(*self._tasks, *leftovers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        self._closed.set()
        log.info("server closed")

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # metrics --------------------------------------------------------------------------------
    def metrics(self) -> dict[str, int]:
        c = self._counters
        out = {
            "connections_active": len(self._conns),
            "connections_accepted": c.connections_accepted,
            "connections_closed": c.connections_closed,
            "connections_rejected": c.connections_rejected,
            "connections_idle_closed": c.connections_idle_closed,
            "requests_received": c.requests_received,
            "responses_sent": c.responses_sent,
            "requests_without_response": c.requests_without_response,
            "requests_dropped": c.requests_dropped,
            "request_errors": c.request_errors,
            "frame_errors": c.frame_errors,
            "requests_in_flight": sum(conn.pending for conn in self._conns.values()),
            "queue_depth": self._queue.qsize() if self._queue is not None else 0,
            "queue_capacity": self.config.queued_max_requests,
            "queue_depth_max": c.queue_depth_max,
            "bytes_in": c.bytes_in,
            "bytes_out": c.bytes_out,
        }
        return out

    # connections ----------------------------------------------------------------------------
    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cfg = self.config
        peer = writer.get_extra_info("peername")
        local = writer.get_extra_info("sockname")
        ip = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        too_many = cfg.max_connections is not None and len(self._conns) >= cfg.max_connections
        per_ip_cap = cfg.max_connections_per_ip
        too_many_ip = per_ip_cap is not None and self._per_ip.get(ip, 0) >= per_ip_cap
        if self._closing or too_many or too_many_ip:
            self._counters.connections_rejected += 1
            log.info("rejecting connection from %s (%s)", peer, "closing" if self._closing else "limit")
            writer.close()
            return
        self._next_conn += 1
        cid = f"{_fmt(local)}-{_fmt(peer)}-{self._next_conn}"
        loop = asyncio.get_running_loop()
        conn = _Connection(cid, reader, writer, peer, local, cfg.max_in_flight_per_connection, loop.time())
        self._conns[cid] = conn
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        self._counters.connections_accepted += 1
        conn.reader_task = asyncio.create_task(self._read_loop(conn), name=f"read {cid}")
        conn.writer_task = asyncio.create_task(self._write_loop(conn), name=f"write {cid}")
        log.debug("accepted %s", cid)

    def _close_conn(self, conn: _Connection, reason: str, *, abort: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.pop(conn.cid, None)
        left = self._per_ip.get(conn.ip, 1) - 1
        if left > 0:
            self._per_ip[conn.ip] = left
        else:
            self._per_ip.pop(conn.ip, None)
        self._counters.connections_closed += 1
        self._counters.requests_dropped += conn.pending
        log.debug("closing %s: %s", conn.cid, reason)
        transport = conn.writer.transport
        if abort:
            transport.abort()
        else:
            transport.close()
        current = asyncio.current_task()
        for task in (conn.reader_task, conn.writer_task):
            if task is not None and task is not current:
                task.cancel()

    async def _read_loop(self, conn: _Connection) -> None:
        cfg = self.config
        decoder = FrameDecoder(cfg.socket_request_max_bytes)
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await conn.reader.read(cfg.read_chunk)
                if not data:
                    break
                conn.last_active = loop.time()
                self._counters.bytes_in += len(data)
                for frame in decoder.feed(data):
                    await self._dispatch(conn, frame)
            if decoder.in_frame():
                log.debug("%s: peer closed inside a frame", conn.cid)
            # Peer finished sending: answer what was already read, then close.
            conn.slots.put_nowait(None)
        except FrameError as e:
            self._counters.frame_errors += 1
            log.info("%s: bad frame, closing: %s", conn.cid, e)
            self._close_conn(conn, f"bad frame: {e}", abort=True)
        except (ConnectionError, OSError) as e:
            self._close_conn(conn, f"read failed: {e!r}", abort=True)

    async def _dispatch(self, conn: _Connection, frame: bytes) -> None:
        await conn.inflight.acquire()
        if conn.closed:
            conn.inflight.release()
            return
        hv = self.config.header_versions
        response_hv = 0

        def versions(api_key: int, api_version: int) -> tuple[int, int]:
            nonlocal response_hv
            req_v, response_hv = hv(api_key, api_version)
            return req_v, response_hv

        try:
            header, body = decode_request(frame, versions)
        except FrameError:
            conn.inflight.release()
            raise
        except Exception as e:  # the header_versions hook rejected the api key/version
            conn.inflight.release()
            raise FrameError(f"unsupported request header: {e!r}") from e
        loop = asyncio.get_running_loop()
        request = Request(
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            body,
            header,
            response_hv,
            conn.cid,
            conn.peer,
            conn.local,
            loop.time(),
            len(frame),
        )
        slot: asyncio.Future[_Parts | None] = loop.create_future()
        conn.slots.put_nowait(slot)
        conn.pending += 1
        self._counters.requests_received += 1
        queue = self._queue
        assert queue is not None
        try:
            await queue.put((conn, request, slot))
        except asyncio.CancelledError:
            if not slot.done():
                slot.set_result(None)
            raise
        depth = queue.qsize()
        if depth > self._counters.queue_depth_max:
            self._counters.queue_depth_max = depth

    async def _write_loop(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                slot = await conn.slots.get()
                if slot is None:
                    break
                parts = await slot
                if parts is not None:
                    conn.writer.writelines(parts)
                    self._counters.bytes_out += len(parts[0]) + len(parts[1])
                    self._counters.responses_sent += 1
                    await conn.writer.drain()
                    conn.last_active = loop.time()
                else:
                    self._counters.requests_without_response += 1
                conn.pending -= 1
                conn.inflight.release()
            self._close_conn(conn, "peer finished")
        except (ConnectionError, OSError) as e:
            self._close_conn(conn, f"write failed: {e!r}", abort=True)

    # handlers -------------------------------------------------------------------------------
    async def _handler_loop(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            conn, request, slot = await queue.get()
            try:
                if conn.closed or slot.done():
                    continue
                try:
                    result = await self._handler(request)
                except CloseConnection:
                    self._close_conn(conn, "closed by handler")
                    continue
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self._fail(conn, request, slot, e)
                    continue
                if isinstance(result, asyncio.Future):
                    result.add_done_callback(partial(self._deferred_done, conn, request, slot))
                else:
                    self._resolve(conn, request, slot, result)
            finally:
                queue.task_done()

    def _deferred_done(
        self,
        conn: _Connection,
        request: Request,
        slot: asyncio.Future[_Parts | None],
        fut: asyncio.Future[Any],
    ) -> None:
        if fut.cancelled():
            self._fail(conn, request, slot, asyncio.CancelledError("deferred response cancelled"))
            return
        exc = fut.exception()
        if isinstance(exc, CloseConnection):
            self._close_conn(conn, "closed by handler")
        elif exc is not None:
            self._fail(conn, request, slot, exc)
        else:
            self._resolve(conn, request, slot, fut.result())

    def _resolve(self, conn: _Connection, request: Request, slot: asyncio.Future[_Parts | None], body: object) -> None:
        if slot.done():
            return
        if body is None:
            slot.set_result(None)
            return
        if not isinstance(body, bytes | bytearray | memoryview):
            self._fail(conn, request, slot, TypeError(f"handler returned {type(body).__name__}, not bytes"))
            return
        slot.set_result(
            response_frame_parts(request.correlation_id, body, header_version=request.response_header_version)
        )

    def _fail(
        self, conn: _Connection, request: Request, slot: asyncio.Future[_Parts | None], exc: BaseException
    ) -> None:
        self._counters.request_errors += 1
        if conn.closed or slot.done():
            return
        body = None
        if self._on_error is not None:
            try:
                body = self._on_error(request, exc)
            except Exception:
                log.exception("%s: on_error hook failed", conn.cid)
                body = None
        if isinstance(body, bytes | bytearray | memoryview):
            log.info(
                "%s: api %d v%d corr %d failed, answering with an error: %r",
                conn.cid,
                request.api_key,
                request.api_version,
                request.correlation_id,
                exc,
            )
            self._resolve(conn, request, slot, body)
        else:
            log.info(
                "%s: api %d v%d corr %d failed, closing: %r",
                conn.cid,
                request.api_key,
                request.api_version,
                request.correlation_id,
                exc,
            )
            self._close_conn(conn, f"handler failed: {exc!r}")

    # idle connections -----------------------------------------------------------------------
    async def _idle_reaper(self) -> None:
        idle = self.config.connections_max_idle
        assert idle is not None
        interval = max(0.005, min(idle / 4, 1.0))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self._conns.values()):
                if conn.pending == 0 and now - conn.last_active > idle:
                    self._counters.connections_idle_closed += 1
                    self._close_conn(conn, f"idle for more than {idle}s")


def _fmt(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)
