"""The request server, built as Kafka's SocketServer is: acceptor, processors, request channel, handlers.

* **Acceptor.** One task on the node's event loop accepts TCP connections on the listening socket,
  applies the connection limits (`max.connections`, `max.connections.per.ip`) and hands each
  accepted socket round-robin to a processor.
* **Processors** (`num.network.threads`). Each is a thread running its own asyncio event loop. It
  owns the sockets it was given: it reads them, splits the stream into frames with `FrameDecoder`
  (checking each size prefix against `socket_request_max_bytes` before buffering), parses the
  request header, and later writes the responses back, in request order, to the connection it owns.
* **Request channel.** One bounded queue (`queued_max_requests`) on the node's loop. A processor
  that finds it full waits before reading that socket again: asyncio then pauses the transport and
  TCP pushes back on the client. Nothing is buffered without bound.
* **Handler pool** (`num.io.threads`). `num_handlers` tasks on the node's event loop take requests
  from the channel and call the handler. They are tasks, not threads, because the node's core is a
  single-threaded sans-IO state machine driven by that loop; Kafka's handler threads likewise call
  into a ReplicaManager that serialises access. A handler returns the response *body* (the
  processor adds the size prefix and response header), None for no response (acks=0), or an
  `asyncio.Future` of the node's loop resolving to either later: that parks the request like
  Kafka's purgatory and frees the handler at once. The result goes back to the processor that owns
  the connection.
* **Ordering.** Each connection may have at most `max_in_flight_per_connection` requests between
  "read" and "response written". The default 1 is Kafka's muting: the next request is not read
  until the previous response went out, so requests are also handled in order. Above 1, requests
  are pipelined and may be handled concurrently, but responses are still written in request order.
* **Errors are per connection**: an oversized/negative size prefix, a malformed header, a handler
  exception without an `on_error` answer, `CloseConnection`, a socket error or idleness beyond
  `connections_max_idle` closes that connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
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
    num_processors: int = 3  # num.network.threads
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
        for name in (
            "num_processors",
            "num_handlers",
            "queued_max_requests",
            "max_in_flight_per_connection",
            "read_chunk",
        ):
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
    received_at: float  # monotonic event-loop time
    size: int  # frame payload bytes


_Parts = tuple[bytes, ResponseBody]
_Item = tuple["_Connection", Request, "asyncio.Future[_Parts | None]"]


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


class _RequestChannel:
    """The bounded request queue between the processors' threads and the handlers' loop.

    Processors `put` (waiting on their own loop while it is full); handlers `get` on the node's
    loop. One wake-up crosses threads per burst of requests, not one per request.
    """

    def __init__(self, capacity: int, loop: asyncio.AbstractEventLoop) -> None:
        self.capacity = capacity
        self.depth_max = 0
        self._loop = loop
        self._lock = threading.Lock()
        self._items: deque[_Item] = deque()
        self._getters: deque[asyncio.Future[None]] = deque()  # handlers waiting (node's loop)
        self._putters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._wake_pending = False

    def qsize(self) -> int:
        return len(self._items)

    async def put(self, item: _Item) -> None:
        """Called on a processor's loop."""
        while True:
            with self._lock:
                if len(self._items) < self.capacity:
                    self._items.append(item)
                    self.depth_max = max(self.depth_max, len(self._items))
                    wake = not self._wake_pending
                    self._wake_pending = True
                    break
                loop = asyncio.get_running_loop()
                waiter: asyncio.Future[None] = loop.create_future()
                self._putters.append((loop, waiter))
            await waiter
        if wake:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake_getters)

    def _wake_getters(self) -> None:
        with self._lock:
            self._wake_pending = False
            ready = len(self._items)
        while ready and self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                ready -= 1

    async def get(self) -> _Item:
        """Called on the node's loop."""
        while True:
            with self._lock:
                if self._items:
                    item = self._items.popleft()
                    putter = self._putters.popleft() if self._putters else None
                    break
                getter: asyncio.Future[None] = self._loop.create_future()
                self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                raise
        if putter is not None:
            loop, waiter = putter
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_set_if_pending, waiter)
        if self._items and self._getters:  # more work than this handler: pass the wake-up on
            self._wake_getters()
        return item


def _set_if_pending(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Connection:
    """A connection and its state, owned by one processor (touched only on its thread)."""

    __slots__ = (
        "cid",
        "processor",
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

    def __init__(self, cid: str, processor: _Processor, peer: Any, local: Any, ip: str) -> None:
        self.cid = cid
        self.processor = processor
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.peer = peer
        self.ip = ip
        self.local = local
        self.inflight: asyncio.Semaphore | None = None
        # response slots in request order; None is the "close after what is queued" marker
        self.slots: asyncio.Queue[asyncio.Future[_Parts | None] | None] | None = None
        self.pending = 0  # requests read whose response (or non-response) is not yet written
        self.last_active = 0.0
        self.closed = False  # read by the handlers' thread as a hint only
        self.reader_task: asyncio.Task[None] | None = None
        self.writer_task: asyncio.Task[None] | None = None


class _Processor:
    """One network thread: an event loop that reads, frames and writes the sockets it owns."""

    def __init__(self, server: Server, index: int) -> None:
        self.server = server
        self.index = index
        self.counters = _Counters()
        self.conns: dict[str, _Connection] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"network-processor-{index}", daemon=True)
        self._reaper: asyncio.Task[None] | None = None
        self._outbox: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._outbox_lock = threading.Lock()
        self._outbox_scheduled = False

    # thread lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        if self.server.config.connections_max_idle is not None:
            self._reaper = loop.create_task(self._idle_reaper(), name=f"idle-reaper-{self.index}")
        loop.call_soon(self._ready.set)
        try:
            loop.run_forever()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def stop(self) -> None:
        if self.loop is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.loop.stop)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on this processor's thread (one cross-thread wake-up per burst)."""
        assert self.loop is not None
        with self._outbox_lock:
            self._outbox.append((fn, args))
            if self._outbox_scheduled:
                return
            self._outbox_scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop is already closed: the server is gone
            self.loop.call_soon_threadsafe(self._run_outbox)

    def _run_outbox(self) -> None:
        with self._outbox_lock:
            calls, self._outbox = self._outbox, deque()
            self._outbox_scheduled = False
        for fn, args in calls:
            fn(*args)

    # connections ------------------------------------------------------------------------------
    def adopt(self, conn: _Connection, sock: socket.socket) -> None:
        asyncio.get_running_loop().create_task(self._open(conn, sock), name=f"open {conn.cid}")

    async def _open(self, conn: _Connection, sock: socket.socket) -> None:
        cfg = self.server.config
        try:
            reader, writer = await asyncio.open_connection(sock=sock, limit=cfg.read_chunk)
        except OSError as e:
            sock.close()
            self.server._forget(conn)
            log.debug("could not adopt %s: %r", conn.cid, e)
            return
        loop = asyncio.get_running_loop()
        conn.reader, conn.writer = reader, writer
        conn.inflight = asyncio.Semaphore(cfg.max_in_flight_per_connection)
        conn.slots = asyncio.Queue()
        conn.last_active = loop.time()
        self.conns[conn.cid] = conn
        self.counters.connections_accepted += 1
        conn.reader_task = loop.create_task(self._read_loop(conn), name=f"read {conn.cid}")
        conn.writer_task = loop.create_task(self._write_loop(conn), name=f"write {conn.cid}")
        log.debug("accepted %s on processor %d", conn.cid, self.index)

    def close_conn(self, conn: _Connection, reason: str, *, abort: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.conns.pop(conn.cid, None)
        self.server._forget(conn)
        self.counters.connections_closed += 1
        self.counters.requests_dropped += conn.pending
        log.debug("closing %s: %s", conn.cid, reason)
        if conn.writer is not None:
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
        cfg = self.server.config
        decoder = FrameDecoder(cfg.socket_request_max_bytes)
        loop = asyncio.get_running_loop()
        assert conn.reader is not None and conn.slots is not None
        try:
            while True:
                data = await conn.reader.read(cfg.read_chunk)
                if not data:
                    break
                conn.last_active = loop.time()
                self.counters.bytes_in += len(data)
                for frame in decoder.feed(data):
                    await self._dispatch(conn, frame)
            if decoder.in_frame():
                log.debug("%s: peer closed inside a frame", conn.cid)
            # Peer finished sending: answer what was already read, then close.
            conn.slots.put_nowait(None)
        except FrameError as e:
            self.counters.frame_errors += 1
            log.info("%s: bad frame, closing: %s", conn.cid, e)
            self.close_conn(conn, f"bad frame: {e}", abort=True)
        except (ConnectionError, OSError) as e:
            self.close_conn(conn, f"read failed: {e!r}", abort=True)

    async def _dispatch(self, conn: _Connection, frame: bytes) -> None:
        assert conn.inflight is not None and conn.slots is not None
        await conn.inflight.acquire()
        if conn.closed:
            conn.inflight.release()
            return
        hv = self.server.config.header_versions
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
        self.counters.requests_received += 1
        try:
            await self.server._enqueue(conn, request, slot)
        except asyncio.CancelledError:
            if not slot.done():
                slot.set_result(None)
            raise

    async def _write_loop(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        assert conn.slots is not None and conn.writer is not None and conn.inflight is not None
        try:
            while True:
                slot = await conn.slots.get()
                if slot is None:
                    break
                parts = await slot
                if parts is not None:
                    # counted before the write: a client that has its response sees it counted
                    self.counters.bytes_out += len(parts[0]) + len(parts[1])
                    self.counters.responses_sent += 1
                    conn.writer.writelines(parts)
                    await conn.writer.drain()
                    conn.last_active = loop.time()
                else:
                    self.counters.requests_without_response += 1
                conn.pending -= 1
                conn.inflight.release()
            self.close_conn(conn, "peer finished")
        except (ConnectionError, OSError) as e:
            self.close_conn(conn, f"write failed: {e!r}", abort=True)

    # results from the handlers (called on this thread) ----------------------------------------
    def respond(self, conn: _Connection, request: Request, slot: asyncio.Future[_Parts | None], body: object) -> None:
        if slot.done():
            return
        if body is None:
            slot.set_result(None)
            return
        slot.set_result(
            response_frame_parts(request.correlation_id, body, header_version=request.response_header_version)
        )

    # shutdown (called on this thread) ---------------------------------------------------------
    async def drain_and_close(self, timeout: float) -> None:
        """Stop reading; let requests already read be answered (up to `timeout`); close every socket."""
        conns = list(self.conns.values())
        readers = [c.reader_task for c in conns if c.reader_task is not None]
        for task in readers:
            task.cancel()
        if readers:
            await asyncio.gather(*readers, return_exceptions=True)
        writers = []
        for conn in conns:
            if not conn.closed and conn.slots is not None:
                conn.slots.put_nowait(None)
                if conn.writer_task is not None:
                    writers.append(conn.writer_task)
        if writers:
            await asyncio.wait(writers, timeout=timeout)
        for conn in list(self.conns.values()):
            self.close_conn(conn, "server shutdown", abort=True)
        leftovers = [t for c in conns for t in (c.reader_task, c.writer_task) if t is not None]
        if self._reaper is not None:
            self._reaper.cancel()
            leftovers.append(self._reaper)
        await asyncio.gather(*leftovers, return_exceptions=True)

    async def _idle_reaper(self) -> None:
        idle = self.server.config.connections_max_idle
        assert idle is not None
        interval = max(0.005, min(idle / 4, 1.0))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self.conns.values()):
                if conn.pending == 0 and now - conn.last_active > idle:
                    self.counters.connections_idle_closed += 1
                    self.close_conn(conn, f"idle for more than {idle}s")


class Server:
    """`Server(handler, config, on_error=None)`; `await start()`, `port`, `metrics()`, `await close()`.

    Start and close it from the node's event loop: the acceptor and the handlers run there, the
    processors on their own threads. `on_error(request, exc)` is called on the node's loop when
    the handler raises; bytes it returns are sent as the response body, None closes the connection.
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: socket.socket | None = None
        self._channel: _RequestChannel | None = None
        self._processors: list[_Processor] = []
        self._next_processor = itertools.cycle([0])
        self._lock = threading.Lock()  # guards the connection counts shared by acceptor and processors
        self._active = 0
        self._per_ip: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._next_conn = 0
        self._counters = _Counters()  # acceptor and handler side
        self._closing = False
        self._closed = asyncio.Event()

    # lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._loop is not None:
            raise RuntimeError("server already started")
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self._channel = _RequestChannel(cfg.queued_max_requests, self._loop)
        listener = socket.create_server((cfg.host, cfg.port), backlog=cfg.backlog, reuse_port=False)
        listener.setblocking(False)
        self._listener = listener
        self._processors = [_Processor(self, i) for i in range(cfg.num_processors)]
        for processor in self._processors:
            await asyncio.to_thread(processor.start)
        self._next_processor = itertools.cycle(range(cfg.num_processors))
        self._tasks.append(asyncio.create_task(self._acceptor(), name="acceptor"))
        for i in range(cfg.num_handlers):
            self._tasks.append(asyncio.create_task(self._handler_loop(), name=f"request-handler-{i}"))
        log.info("listening on %s with %d processor(s)", self.addresses, cfg.num_processors)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        if self._listener is None or self._listener.fileno() < 0:
            return []
        return [self._listener.getsockname()[:2]]

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
        written (up to `timeout` seconds); then close every connection and stop the threads."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        for task in self._tasks[:1]:  # the acceptor
            task.cancel()
        if self._listener is not None:
            self._listener.close()
        drains = []
        for processor in self._processors:
            if processor.loop is not None and processor.loop.is_running():
                future = asyncio.run_coroutine_threadsafe(processor.drain_and_close(timeout), processor.loop)
                drains.append(asyncio.wrap_future(future))
        if drains:
            await asyncio.wait(drains, timeout=timeout + 1.0)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for processor in self._processors:
            processor.stop()
        for processor in self._processors:
            await asyncio.to_thread(processor.join, 2.0)
        self._closed.set()
        log.info("server closed")

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # metrics --------------------------------------------------------------------------------
    def metrics(self) -> dict[str, int]:
        totals = _Counters()
        for counters in [self._counters, *(p.counters for p in self._processors)]:
            for f in fields(_Counters):
                setattr(totals, f.name, getattr(totals, f.name) + getattr(counters, f.name))
        in_flight = sum(conn.pending for p in self._processors for conn in list(p.conns.values()))
        return {
            "connections_active": self._active,
            "connections_accepted": totals.connections_accepted,
            "connections_closed": totals.connections_closed,
            "connections_rejected": totals.connections_rejected,
            "connections_idle_closed": totals.connections_idle_closed,
            "requests_received": totals.requests_received,
            "responses_sent": totals.responses_sent,
            "requests_without_response": totals.requests_without_response,
            "requests_dropped": totals.requests_dropped,
            "request_errors": totals.request_errors,
            "frame_errors": totals.frame_errors,
            "requests_in_flight": in_flight,
            "queue_depth": self._channel.qsize() if self._channel is not None else 0,
            "queue_capacity": self.config.queued_max_requests,
            "queue_depth_max": self._channel.depth_max if self._channel is not None else 0,
            "bytes_in": totals.bytes_in,
            "bytes_out": totals.bytes_out,
            "processors": len(self._processors),
        }

    # acceptor -------------------------------------------------------------------------------
    async def _acceptor(self) -> None:
        loop = asyncio.get_running_loop()
        listener = self._listener
        assert listener is not None
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except OSError as e:
                if self._closing:
                    return
                log.warning("accept failed: %r", e)
                await asyncio.sleep(0.01)
                continue
            self._hand_off(sock, peer)

    def _hand_off(self, sock: socket.socket, peer: Any) -> None:
        cfg = self.config
        local = sock.getsockname()
        ip = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        with self._lock:
            too_many = cfg.max_connections is not None and self._active >= cfg.max_connections
            cap = cfg.max_connections_per_ip
            too_many_ip = cap is not None and self._per_ip.get(ip, 0) >= cap
            refuse = self._closing or too_many or too_many_ip
            if not refuse:
                self._active += 1
                self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        if refuse:
            self._counters.connections_rejected += 1
            log.info("rejecting connection from %s (%s)", peer, "closing" if self._closing else "limit")
            sock.close()
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_conn += 1
        processor = self._processors[next(self._next_processor)]
        conn = _Connection(f"{_fmt(local)}-{_fmt(peer)}-{self._next_conn}", processor, peer, local, ip)
        processor.call(processor.adopt, conn, sock)

    def _forget(self, conn: _Connection) -> None:
        """Release a connection's place in the limits (called from its processor)."""
        with self._lock:
            self._active -= 1
            left = self._per_ip.get(conn.ip, 1) - 1
            if left > 0:
                self._per_ip[conn.ip] = left
            else:
                self._per_ip.pop(conn.ip, None)

    # request channel ------------------------------------------------------------------------
    async def _enqueue(self, conn: _Connection, request: Request, slot: asyncio.Future[_Parts | None]) -> None:
        """Called on a processor's loop: put the request on the channel, waiting while it is full."""
        assert self._channel is not None
        await self._channel.put((conn, request, slot))

    # handlers -------------------------------------------------------------------------------
    async def _handler_loop(self) -> None:
        channel = self._channel
        assert channel is not None
        while True:
            conn, request, slot = await channel.get()
            if conn.closed:
                continue
            try:
                result = await self._handler(request)
            except CloseConnection:
                self._close(conn, "closed by handler")
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
            self._close(conn, "closed by handler")
        elif exc is not None:
            self._fail(conn, request, slot, exc)
        else:
            self._resolve(conn, request, slot, fut.result())

    def _resolve(self, conn: _Connection, request: Request, slot: asyncio.Future[_Parts | None], body: object) -> None:
        if body is not None and not isinstance(body, bytes | bytearray | memoryview):
            self._fail(conn, request, slot, TypeError(f"handler returned {type(body).__name__}, not bytes"))
            return
        conn.processor.call(conn.processor.respond, conn, request, slot, body)

    def _close(self, conn: _Connection, reason: str) -> None:
        conn.processor.call(conn.processor.close_conn, conn, reason)

    def _fail(
        self, conn: _Connection, request: Request, slot: asyncio.Future[_Parts | None], exc: BaseException
    ) -> None:
        self._counters.request_errors += 1
        if conn.closed:
            return
        body = None
        if self._on_error is not None:
            try:
                body = self._on_error(request, exc)
            except Exception:
                log.exception("%s: on_error hook failed", conn.cid)
                body = None
        what = f"{conn.cid}: api {request.api_key} v{request.api_version} corr {request.correlation_id} failed"
        if isinstance(body, bytes | bytearray | memoryview):
            log.info("%s, answering with an error: %r", what, exc)
            self._resolve(conn, request, slot, body)
        else:
            log.info("%s, closing: %r", what, exc)
            self._close(conn, f"handler failed: {exc!r}")


def _fmt(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)
