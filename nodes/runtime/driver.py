"""The asyncio runtime driver: one node core on real sockets, files and clocks.

The core is a :class:`~nodes.broker.BrokerNode`: the quorum, the KV service and the metadata
controller, plus, when the roles include ``broker``, the Kafka-style broker. A controller-only node
(``process.roles=controller``) registers no broker, serves no Kafka clients and opens no broker lanes;
a broker-only node (``process.roles=broker``) is a raft observer outside the voter set.

:class:`NodeDriver` feeds the sans-IO core its inputs (raft requests and responses from the
network, client operations, timers, completed flushes) and applies the effects it returns **in
order** (``nodes/raft/effects.py``):

* ``PersistQuorumState`` — ``quorum-state`` is replaced durably (temp + fsync + rename) *before*
  the next effect is looked at; the write is synchronous on the event loop, like Kafka's raft
  thread;
* ``AppendLog``/``TruncateLog`` — written to ``raft.log`` at once (page cache), or held in the
  process until the next ``Flush`` with the ``lazy-flush`` bug, so a SIGKILL really loses them;
* ``Flush`` — fsync in a worker thread (after ``kraftwerk.fsync.delay.ms``), then ``core.flushed()``;
* ``Send`` — a response (it carries the ``reply_ctx`` of a request we received) completes that
  request's deferred answer; a request goes on the destination voter's queue, which one task
  drains with at most one request in flight and a request timeout; the response is handed back
  to ``core.handle``. A request lost to a timeout or disconnect is dropped: the core retries on
  its own timers;
* ``Committed`` — the register machine is already updated inside the core; the driver records the
  high watermark for the committed-log dump; ``ClientReply`` answers the client; ``Event`` is
  appended to ``events.jsonl`` with ``time`` from the wall clock (so clock faults show);
  ``Fatal`` stops the node.

Timers are poll style: after every step the driver arms one loop timer at
``core.next_deadline()`` and calls ``core.tick(now)`` when it fires. ``now`` is the clock the
node setting ``clock.source`` chooses: ``wall`` (the default, ``time.time_ns()`` as Kafka's
``Time.milliseconds()``: a wall-clock step, or libfaketime, fires elections and expires fetch and
broker sessions early, or delays them) or ``monotonic`` (``time.monotonic_ns()``). On the wall
clock the loop timer never sleeps longer than ``WALL_POLL_S``, so a step of the clock is seen
within that long (the loop's own sleeps are monotonic), and an input that finds the clock
stepped since the last one first fires the timers the step made due (``NodeDriver._clocks``).
The driver's own plumbing (stale requests on a peer's queue) always uses the monotonic clock.

Two listeners: the controller listener takes raft RPCs (Kafka-framed, api keys from
``nodes.raft.API_KEYS``, body ``nodes.raft.encode(message)``) and the node-to-node broker messages
(``brokerwire.py``: api keys 1100-1111); a broker-only node has instead an inter-broker listener,
which takes the broker messages only (replica fetches, transaction markers). Vote,
BeginQuorumEpoch and EndQuorumEpoch are taken from voters only, Fetch also from observers. The
client listener takes the KV and admin API of ``kvapi.py`` and, on a broker, the Kafka protocol
(``kafka_service.py``).
Malformed frames, unknown api keys and undecodable bodies close that connection only.

Broker effects (``nodes/broker/effects.py``):

* ``AppendPartitionLog``/``TruncatePartitionLog`` — the partition's file under
  ``<log.dirs>/partitions/`` (``partition_store.py``), written at once or, with ``lazy-flush``,
  held in the process until the next flush; ``FlushPartition`` — fsync in a worker thread, then
  ``core.partition_flushed()``;
* ``Send`` of a broker request — queued on one of three *lanes* to the destination (a
  connection each, one request in flight, stale requests dropped): ``replication`` (follower
  fetches, which park on the leader), ``control`` (registration, heartbeats, AlterPartition)
  and ``forward`` (CreateTopics forwarded to the active controller), so a parked fetch never
  delays a heartbeat; the response goes back to ``core.handle``. A broker request received
  that the core leaves unanswered is given up (its connection closed) after its timeout;
* ``ClientResponse``/``CloseClientConnection`` — answer (or close) the Kafka client request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import logging
import os
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..broker import (
    BROKER_REQUESTS,
    BROKER_RESPONSES,
    AppendPartitionLog,
    BrokerNode,
    ClientResponse,
    CloseClientConnection,
    CreateTopicsRequest,
    FetchRecordsRequest,
    FlushPartition,
    TopicPartition,
    TruncatePartitionLog,
    is_broker_request,
)
from ..effects import Dispatcher
from ..kafka.versions import header_versions as kafka_header_versions
from ..kv import ClientReply, CommandError
from ..raft import (
    API_KEYS,
    AppendLog,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CodecError,
    Committed,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Event,
    Fatal,
    FetchRequest,
    FetchResponse,
    Flush,
    Message,
    PersistQuorumState,
    Reply,
    Send,
    TruncateLog,
    VoteRequest,
    VoteResponse,
    VoterSetMismatch,
    check_voters,
    decode,
    encode,
    is_request,
    with_repair,
)
from . import brokerwire
from .client import ClientConfig, NetworkClient, NetworkError
from .config import WILDCARD_HOSTS, Endpoint, NodeConfig
from .kafka_service import KAFKA_API_KEYS, KafkaService
from .kvapi import (
    ADMIN_DESCRIBE,
    ADMIN_DUMP_LOG,
    ADMIN_DUMP_PARTITIONS,
    OP_BY_KEY,
    KvWireError,
    decode_kv_request,
    encode_json,
    encode_kv_reply,
)
from .lanes import CONTROLLER_LANES, lane_of, lane_timeout_ms
from .partition_store import PartitionStore
from .server import CloseConnection, Request, Server, ServerConfig
from .storage import DataDir, EventLog, HighWatermarkFile, LogFile, QuorumStateFile, StorageError, format_dump

__all__ = ["EXIT_FATAL", "EXIT_OK", "EXIT_STORAGE", "NodeDriver", "StartupError"]

EXIT_OK = 0
EXIT_STORAGE = 1  # cannot start or keep running: data directory, port in use, I/O error
EXIT_FATAL = 3  # the raft core stopped on an illegal state (a safety violation)
WALL_POLL_S = 0.1  # on the wall clock (clock.source=wall), the longest the timer sleeps before looking again
WALL_STEP_NS = 50_000_000  # a change of wall minus monotonic time larger than this between inputs is a step

_RESPONSE_FOR: dict[type, type] = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
    DescribeQuorumRequest: DescribeQuorumResponse,
}
_RAFT_REQUEST_KEYS = frozenset(API_KEYS[t] for t in _RESPONSE_FOR)
_PEER_QUEUE_MAX = 256
_MAX_DRAIN_S = 2.0
_SHUTDOWN_POLL_S = 0.005
_SHUTDOWN_SLACK_S = 0.5


class StartupError(Exception):
    """The node cannot start (data directory, listener address, …); the message says why."""


class _ReplySlot:
    """The ``reply_ctx`` of a request received from the network: the server's deferred answer."""

    __slots__ = ("future", "as_message")

    def __init__(self, future: asyncio.Future[Any], as_message: bool = False) -> None:
        self.future = future
        self.as_message = as_message  # resolve with the Message itself (admin), not its bytes


def _source(message: Message) -> int | None:
    if isinstance(message, VoteRequest):
        return message.candidate_id
    if isinstance(message, BeginQuorumEpochRequest | EndQuorumEpochRequest):
        return message.leader_id
    if isinstance(message, FetchRequest):
        return message.replica_id
    return None


class _Peer:
    """Raft requests to one voter: a bounded FIFO drained by one task, one request in flight.

    A request older than the request timeout when its turn comes is dropped (the core has given
    up on it already), and so is the oldest one when the queue is full.
    """

    kind = "raft"

    def __init__(
        self, driver: NodeDriver, node_id: int, network: NetworkClient, timeout_ns: int, dest: Any = None
    ) -> None:
        self.driver = driver
        self.node_id = node_id
        self.dest = node_id if dest is None else dest  # the NetworkClient destination
        self.network = network
        self.timeout_ns = timeout_ns
        self.queue: deque[tuple[int, Any]] = deque(maxlen=_PEER_QUEUE_MAX)
        self.wake = asyncio.Event()
        self.busy = False
        self.task: asyncio.Task[None] | None = None
        self.sent = 0
        self.failed = 0

    @property
    def idle(self) -> bool:
        return not self.queue and not self.busy

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"{self.kind}-peer-{self.node_id}")

    def put(self, now: int, message: Any) -> None:
        self.queue.append((now, message))
        self.wake.set()

    def encode(self, message: Any) -> tuple[int, bytes]:
        return API_KEYS[type(message)], encode(message)

    def decode(self, message: Any, api_key: int, body: memoryview) -> Any:
        """The response to ``message``, or None (logged) if it is not the right kind."""
        response = decode(bytes(body))
        if type(response) is not _RESPONSE_FOR[type(message)]:
            self.driver.log.warning(
                "n%d answered %s with %s", self.node_id, type(message).__name__, type(response).__name__
            )
            return None
        return response

    async def _run(self) -> None:
        log = self.driver.log
        while True:
            while not self.queue:
                self.wake.clear()
                await self.wake.wait()
            queued_at, message = self.queue.popleft()
            if self.driver.monotonic() - queued_at > self.timeout_ns:
                continue
            try:
                api_key, data = self.encode(message)
            except (CodecError, brokerwire.BrokerWireError) as exc:
                log.error("cannot encode %s for n%d: %s", type(message).__name__, self.node_id, exc)
                continue
            self.busy = True
            try:
                body = await self.network.send(self.dest, api_key, 0, data, timeout=self.timeout_ns / 1e9)
                self.sent += 1
            except NetworkError as exc:
                self.failed += 1
                log.debug("%s to n%d failed: %s", type(message).__name__, self.node_id, exc)
                continue
            except Exception as exc:  # keep the sender alive whatever happens to one request
                self.failed += 1
                log.warning("%s to n%d failed: %r", type(message).__name__, self.node_id, exc)
                continue
            finally:
                self.busy = False
            if body is None:
                continue
            try:
                response = self.decode(message, api_key, body)
            except (CodecError, brokerwire.BrokerWireError) as exc:
                log.warning("undecodable response from n%d to %s: %s", self.node_id, type(message).__name__, exc)
                continue
            if response is not None:
                self.driver.deliver(self.node_id, response)


class _BrokerLane(_Peer):
    """Broker requests of one lane to one node (``brokerwire`` bodies)."""

    kind = "broker"

    def encode(self, message: Any) -> tuple[int, bytes]:
        return brokerwire.encode(self.driver.node_id, message)

    def decode(self, message: Any, api_key: int, body: memoryview) -> Any:
        src, response = brokerwire.decode(api_key, body)
        if src != self.node_id or not isinstance(response, BROKER_RESPONSES):
            self.driver.log.warning("n%d answered %s with %s", self.node_id, type(message).__name__, response)
            return None
        return response


class NodeDriver:
    """Runs one node. ``await open()`` (recover storage, bind listeners), then ``start()``.

    ``wall_clock`` (ns since the epoch) stamps events; ``monotonic`` (ns) is the driver's own clock;
    ``clock`` (ns) drives the core's timers, by default the one of those two that
    ``config.clock_source`` names. All are injectable for tests. In-process tests may bind ports 0 and fix the voters'
    addresses with :meth:`set_voter_address` between ``open`` and ``start``.
    """

    def __init__(
        self,
        config: NodeConfig,
        *,
        clock: Callable[[], int] | None = None,
        monotonic: Callable[[], int] = time.monotonic_ns,
        wall_clock: Callable[[], int] = time.time_ns,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.name = config.name
        if clock is None:
            clock = wall_clock if config.clock_source == "wall" else monotonic
        self.now = clock
        self.monotonic = monotonic
        self.wall_clock = wall_clock
        self._poll_s = WALL_POLL_S if config.clock_source == "wall" else None
        self._skew: int | None = None  # wall minus monotonic at the last input (clock.source=wall)
        self.rng = rng if rng is not None else random.Random(config.seed)
        self.log = logging.getLogger(f"nodes.{self.name}")
        directory = config.log_dir
        self.data_dir = DataDir(directory, config.node_id)
        self.quorum_state = QuorumStateFile(directory)
        # appends wait in the process until their fsync: the lazy-flush bug, or a power-loss fault mode
        hold = "lazy-flush" in config.bugs or config.volatile_writes
        check_crc = "skip-crc" not in config.bugs  # the skip-crc bug: recovery trusts the log
        self.log_file = LogFile(directory, hold=hold, check_crc=check_crc)
        self._dispatch = Dispatcher(self)
        self.hw_file = HighWatermarkFile(directory)
        self.events = EventLog(directory)
        self.partitions = PartitionStore(directory, hold=hold, check_crc=check_crc)
        self.core: BrokerNode | None = None
        self.kafka: KafkaService | None = KafkaService(self) if config.is_broker else None
        self.exit_code: int | None = None
        self.stopped = asyncio.Event()
        self._recovered: tuple[Any, list[Any], dict[TopicPartition, list[Any]]] | None = None
        self._controller_server: Server | None = None
        self._client_server: Server | None = None
        timeout_s = config.raft.request_timeout_ms / 1000
        # the voters' controller listeners (set_voter_address may move them before start)
        self._voter_addresses = {v: (e.host, e.port) for v, e in config.voters.items() if v != config.node_id}
        self.network = NetworkClient(
            ClientConfig(
                client_id=f"raft-client-{config.node_id}",
                max_in_flight=1,
                request_timeout=timeout_s,
                connect_timeout=timeout_s,
                reconnect_backoff=0.05,
                reconnect_backoff_max=1.0,
            ),
            addresses=dict(self._voter_addresses),
            rng=random.Random(self.rng.random()),
        )
        self.peers: dict[int, _Peer] = {
            v: _Peer(self, v, self.network, config.raft.request_timeout_ms * 1_000_000)
            for v in sorted(config.voters)
            if v != config.node_id
        }
        broker_timeout_s = config.broker.request_timeout_ms / 1000
        self.broker_network = NetworkClient(
            ClientConfig(
                client_id=f"broker-{config.node_id}",
                max_in_flight=1,
                request_timeout=broker_timeout_s,
                connect_timeout=broker_timeout_s,
                reconnect_backoff=0.05,
                reconnect_backoff_max=1.0,
            ),
            addresses={},  # set per lane when a request goes out (_lane)
            rng=random.Random(self.rng.random()),
        )
        # (node, lane) -> its connection, made on the first request: lanes to the controller go to a voter's
        # controller listener, lanes to a broker to the inter-broker endpoint of its registration (_lane)
        self.lanes: dict[tuple[int, str], _BrokerLane] = {}
        self._started = False
        self._partition_flushes: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self._crashed = False
        self._shutdown_task: asyncio.Task[None] | None = None
        self._stopping = False  # shutdown() began (the core may still be finishing its graceful shutdown)
        self._request_ids = itertools.count()
        self._client_ops: dict[int, asyncio.Future[bytes]] = {}
        self._raft_replies: set[asyncio.Future[Any]] = set()
        self._bound: tuple[Endpoint, Endpoint] | None = None
        self._opened = False
        self._closing = False

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Take the data directory, recover the quorum state and the log, bind both listeners."""
        cfg = self.config
        try:
            self.data_dir.acquire()
            try:
                persisted = self.quorum_state.load()
                check_voters(persisted, frozenset(cfg.voters))
                records, info = self.log_file.open()
                # records lost inside the log: no voting until they are fetched back (repair_to)
                repaired = with_repair(persisted, info.seen_end, info.seen_epoch)
                if repaired is not persisted:
                    self.quorum_state.save(repaired)  # type: ignore[arg-type]
                    persisted = repaired
                self.hw_file.open()
                self.events.open()
                partition_logs = self.partitions.open() if cfg.is_broker else {}
            except BaseException:
                self._close_storage(sync=False)
                raise
        except (StorageError, OSError, VoterSetMismatch) as exc:
            raise StartupError(str(exc)) from None
        self._recovered = (persisted, records, partition_logs)
        self.log.info(
            "recovered %s: %s, %d log record(s)%s%s",
            cfg.log_dir,
            persisted or "no quorum state",
            len(records),
            f", cut {info.truncated_bytes} byte(s) of {info.reason} tail" if info.truncated_bytes else "",
            f", {len(partition_logs)} partition log(s) with {sum(map(len, partition_logs.values()))} batch(es)"
            if cfg.is_broker
            else "",
        )
        common = {
            "queued_max_requests": cfg.queued_max_requests,
            "socket_request_max_bytes": cfg.socket_request_max_bytes,
            "num_processors": cfg.num_network_threads,
            "num_handlers": cfg.num_io_threads,
            "connections_max_idle": None if cfg.connections_max_idle_ms is None else cfg.connections_max_idle_ms / 1000,
        }
        self._controller_server = Server(
            self._raft_handler,
            ServerConfig(host=cfg.node_listener.host, port=cfg.node_listener.port, **common),
        )
        self._client_server = Server(
            self._client_handler,
            ServerConfig(
                host=cfg.client_listener.host,
                port=cfg.client_listener.port,
                header_versions=kafka_header_versions,
                **common,
            ),
        )
        try:
            await self._controller_server.start()
            await self._client_server.start()
        except OSError as exc:
            await self._close_servers()
            self._close_storage(sync=False)
            raise StartupError(f"cannot bind listeners {cfg.node_listener} / {cfg.client_listener}: {exc}") from None
        (c_host, c_port), (k_host, k_port) = self._controller_server.addresses[0], self._client_server.addresses[0]
        self._bound = (Endpoint(c_host, c_port), Endpoint(k_host, k_port))
        self._opened = True

    @property
    def controller_address(self) -> Endpoint:
        """Where the node-to-node listener is bound (after :meth:`open`): the controller listener, or a
        broker-only node's inter-broker listener (``NodeConfig.node_listener``)."""
        assert self._bound is not None, "call open() first"
        return self._bound[0]

    @property
    def client_address(self) -> Endpoint:
        """Where the client listener is bound (after :meth:`open`)."""
        assert self._bound is not None, "call open() first"
        return self._bound[1]

    def set_voter_address(self, node_id: int, host: str, port: int) -> None:
        """Point raft traffic for ``node_id`` at ``host:port`` (before :meth:`start`)."""
        if node_id != self.node_id:
            self._voter_addresses[node_id] = (host, port)
            self.network.set_address(node_id, host, port)

    @property
    def closing(self) -> bool:
        """True once shutting down (or crashed): no new inputs reach the core."""
        return self._closing

    def advertised(self) -> Endpoint:
        """The client address Kafka clients are told in Metadata (after :meth:`open`)."""
        cfg = self.config
        if cfg.advertised_listener is not None:
            return cfg.advertised_listener
        bound = self.client_address
        if bound.host in WILDCARD_HOSTS:
            host = cfg.voters[self.node_id].host if cfg.is_controller else self.inter_broker_advertised().host
            return Endpoint(host, bound.port)
        return bound

    def inter_broker_advertised(self) -> Endpoint:
        """Where a broker-only node tells the controller other brokers reach it (after :meth:`open`): the
        advertised inter-broker listener, else the bound one (config requires a concrete host then)."""
        cfg = self.config
        if cfg.advertised_inter_broker is not None:
            return cfg.advertised_inter_broker
        return self.controller_address

    def start(self) -> None:
        """Build the core from the recovered state and start it."""
        if not self._opened or self._recovered is None:
            raise RuntimeError("call open() before start()")
        cfg = self.config
        persisted, records, partition_logs = self._recovered
        self._recovered = None
        advertised = self.advertised() if cfg.is_broker else Endpoint("", 0)
        # a combined node registers no inter-broker endpoint: other brokers use its voter address
        inter_broker = Endpoint("", 0) if cfg.is_controller else self.inter_broker_advertised()
        self.core = BrokerNode(
            cfg.node_id,
            cfg.voters,
            cfg.raft,
            self.rng,
            cfg.bugs,
            broker_config=cfg.broker,
            endpoint=(advertised.host, advertised.port),
            inter_broker=(inter_broker.host, inter_broker.port),
            broker=cfg.is_broker,
        )
        self._started = True
        for peer in (*self.peers.values(), *self.lanes.values()):
            peer.start()
        self.log.info(
            "starting %s: roles %s, voters %s, %s %s, client %s, bugs %s",
            self.name,
            ",".join(sorted(cfg.roles)),
            ",".join(f"{v}@{e}" for v, e in sorted(cfg.voters.items())),
            "controller" if cfg.is_controller else "inter-broker",
            self.controller_address,
            self.client_address,
            sorted(cfg.bugs) or "none",
        )
        if cfg.is_broker:
            # partition logs that lost a range: reported with the registration (controller.py)
            damaged = self.partitions.damaged()
            if damaged:
                self.log.warning(
                    "partition log(s) %s lost a range: reporting them damaged", ",".join(map(str, damaged))
                )
            start = functools.partial(self.core.start, damaged=damaged)
            self._call(start, persisted, records, partition_logs)
        else:
            self._call(self.core.start, persisted, records, {})

    def request_stop(self, graceful: bool = True) -> None:
        """Begin shutting down (e.g. from a signal handler); ``stopped`` is set when done."""
        if self._shutdown_task is None and not self._closing:
            self._shutdown_task = asyncio.get_running_loop().create_task(self.shutdown(graceful=graceful))

    async def shutdown(self, *, graceful: bool = True) -> None:
        """Graceful: run the core's graceful shutdown (``RaftNode.shutdown``, bounded by
        ``kraftwerk.shutdown.timeout.ms``) while the node keeps serving raft traffic, let the last
        requests go out, flush, close. Not graceful: close at once (a Fatal stop)."""
        if self._closing or self._stopping:
            await self.stopped.wait()
            return
        self._stopping = True
        if graceful and self.core is not None and self.core.raft.failed is None:
            await self._shutdown_core()
            if self._closing:  # crashed meanwhile
                await self.stopped.wait()
                return
            await self._drain_peers()
        self._closing = True
        await self._stop_io()
        await self._wait_flush()
        self._close_storage(sync=graceful and self.core is not None)
        if self.exit_code is None:
            self.exit_code = EXIT_OK
        self.log.info("stopped (exit code %d)", self.exit_code)
        self.stopped.set()

    async def crash(self) -> None:
        """Stop at once as a SIGKILL would: no resign, no flush; held (lazy-flush) appends are
        lost, written ones stay in the page cache. For in-process tests."""
        if self._closing:
            await self.stopped.wait()
            return
        self._closing = True
        self._crashed = True
        await self._stop_io()
        await self._wait_flush()
        self._close_storage(sync=False)
        self.exit_code = self.exit_code if self.exit_code is not None else EXIT_OK
        self.stopped.set()

    async def _shutdown_core(self) -> None:
        """Start the core's graceful shutdown and wait until it says the node may stop. Its bound is a core
        timer on the node's clock; the monotonic wait here only guards against a clock that stalls it."""
        bound = self.config.shutdown_timeout_ms
        self.log.info("shutting down gracefully (at most %d ms)", bound)
        assert self.core is not None
        self._call(self.core.shutdown, bound)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound / 1000 + _SHUTDOWN_SLACK_S
        while True:
            core = self.core
            if core is None or self._closing:
                return
            status = core.raft.shutdown_status
            if status != "running":
                self.log.info("graceful shutdown %s (role %s)", status, core.raft.role.value)
                return
            if loop.time() >= deadline:
                self.log.warning("graceful shutdown still running past its bound: stopping")
                return
            await asyncio.sleep(_SHUTDOWN_POLL_S)

    async def _drain_peers(self) -> None:
        limit = min(_MAX_DRAIN_S, self.config.raft.election_timeout_ms / 1000)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while loop.time() < deadline and not all(p.idle for p in self.peers.values()):
            await asyncio.sleep(0.01)

    async def _stop_io(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut in list(self._raft_replies):
            if not fut.done():
                fut.set_exception(CloseConnection())
        self._raft_replies.clear()
        for fut in list(self._client_ops.values()):
            if not fut.done():
                fut.set_result(encode_kv_reply("info", None, "shutting-down", None, self.name))
        self._client_ops.clear()
        if self.kafka is not None:
            self.kafka.fail_all()
        await self._close_servers()
        tasks = [p.task for p in (*self.peers.values(), *self.lanes.values()) if p.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.network.close()
        await self.broker_network.close()

    async def _close_servers(self) -> None:
        for server in (self._client_server, self._controller_server):
            if server is not None:
                with contextlib.suppress(Exception):
                    await server.close(timeout=1.0)

    async def _wait_flush(self) -> None:
        tasks = [t for t in (self._flush_task, *self._partition_flushes) if t is not None and not t.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _close_storage(self, *, sync: bool) -> None:
        try:
            self.partitions.close(sync=sync)
        except OSError as exc:
            self.log.error("closing the partition logs failed: %s", exc)
        try:
            self.log_file.close(sync=sync)
            if sync and self.core is not None:
                self.hw_file.store(self.core.raft.high_watermark)
        except OSError as exc:
            self.log.error("closing the log failed: %s", exc)
        self.hw_file.close()
        self.events.close()
        self.data_dir.release()

    def _die(self, reason: str, code: int) -> None:
        """Stop without resigning (a Fatal effect or a storage failure)."""
        if self.exit_code is None:
            self.exit_code = code
        self.log.error("%s: stopping: %s", self.name, reason)
        if self.core is not None:
            self.core = None  # no further inputs reach it
        self.request_stop(graceful=False)

    # ------------------------------------------------------------------ inputs

    def deliver(self, src: int, message: Message) -> None:
        """A raft response from ``src``."""
        if self.core is not None and not self._closing:
            self._call(self.core.handle, src, message)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if self.core is not None:
            self._call(self.core.tick)

    async def _slow_disk(self) -> bool:
        """Wait ``kraftwerk.fsync.delay.ms`` before an fsync; False if the node crashed meanwhile (the held
        appends never got written)."""
        if not self.config.fsync_delay_ms:
            return True
        await asyncio.sleep(self.config.fsync_delay_ms / 1000)
        return not self._crashed

    async def _flush(self, up_to: int) -> None:
        try:
            if not await self._slow_disk():
                return
            await self.log_file.flush()
        except (OSError, RuntimeError) as exc:
            self._die(f"flush failed: {exc}", EXIT_STORAGE)
            return
        if self.core is not None and not self._closing:
            self._call(self.core.flushed, up_to)

    async def _flush_partition(self, tp: TopicPartition, up_to: int) -> None:
        try:
            if not await self._slow_disk():
                return
            await self.partitions.flush(tp)
        except (OSError, StorageError, RuntimeError) as exc:
            self._die(f"flush of {tp} failed: {exc}", EXIT_STORAGE)
            return
        core = self.core
        if isinstance(core, BrokerNode) and not self._closing:
            self._call(core.partition_flushed, tp, up_to)

    def _broker_request(self, request: Request) -> asyncio.Future[Any]:
        """A node-to-node broker request on the controller listener."""
        core = self.core
        if not isinstance(core, BrokerNode) or self._closing or request.api_version != 0:
            raise CloseConnection
        try:
            src, message = brokerwire.decode(request.api_key, request.body)
        except brokerwire.BrokerWireError as exc:
            self.log.info("controller listener: bad broker message (api key %d), closing: %s", request.api_key, exc)
            raise CloseConnection from None
        claimed = brokerwire.source_of(message)
        if (
            not is_broker_request(message)
            or src < 0  # any other node id: broker-only nodes are not in the voter set
            or src == self.node_id
            or (claimed is not None and claimed != src)
        ):
            self.log.info("controller listener: unexpected %s from node %s, closing", type(message).__name__, src)
            raise CloseConnection
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        timeout_ms = self.config.broker.request_timeout_ms
        if isinstance(message, FetchRecordsRequest):
            timeout_ms += max(0, message.max_wait_ms)
        elif isinstance(message, CreateTopicsRequest):
            timeout_ms += max(0, message.timeout_ms)
        expiry = loop.call_later(timeout_ms / 1000, _give_up, future)
        self._raft_replies.add(future)
        future.add_done_callback(self._raft_replies.discard)
        future.add_done_callback(lambda _: expiry.cancel())
        self._call(core.handle, src, message, _ReplySlot(future))
        return future

    async def _raft_handler(self, request: Request) -> asyncio.Future[Any]:
        if request.api_key in brokerwire.BROKER_API_KEYS:
            return self._broker_request(request)
        if request.api_key not in _RAFT_REQUEST_KEYS or request.api_version != 0:
            self.log.info("controller listener: unknown api key %d v%d, closing", request.api_key, request.api_version)
            raise CloseConnection
        try:
            message = decode(bytes(request.body))
        except CodecError as exc:
            self.log.info("controller listener: bad body for api key %d, closing: %s", request.api_key, exc)
            raise CloseConnection from None
        if not is_request(message) or API_KEYS[type(message)] != request.api_key:
            self.log.info(
                "controller listener: api key %d carries %s, closing", request.api_key, type(message).__name__
            )
            raise CloseConnection
        if not self.config.is_controller:
            self.log.info("inter-broker listener: %s on a broker-only node, closing", type(message).__name__)
            raise CloseConnection
        src = _source(message)
        # observers (broker-only nodes, outside the voter set) fetch; only a voter may ask for or give votes and
        # begin or end an epoch
        from_observer_ok = isinstance(message, FetchRequest)
        if src is not None and (src == self.node_id or (src not in self.config.voters and not from_observer_ok)):
            self.log.info("controller listener: %s from non-voter %s, closing", type(message).__name__, src)
            raise CloseConnection
        core = self.core
        if core is None or self._closing:
            raise CloseConnection
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._raft_replies.add(future)
        future.add_done_callback(self._raft_replies.discard)
        self._call(core.handle, -1 if src is None else src, message, _ReplySlot(future))
        return future

    async def _client_handler(self, request: Request) -> bytes | asyncio.Future[bytes]:
        key = request.api_key
        if key in OP_BY_KEY:
            return self._kv_operation(request)
        if key == ADMIN_DESCRIBE:
            return encode_json(self.status())
        if key == ADMIN_DUMP_LOG:
            return self.dump().encode()
        if key == ADMIN_DUMP_PARTITIONS:
            return encode_json(self.partition_dump())
        if key in KAFKA_API_KEYS and self.kafka is not None:
            return self.kafka.handle(request)
        self.log.info("client listener: unknown api key %d from %s, closing", key, request.peer)
        raise CloseConnection

    def _kv_operation(self, request: Request) -> bytes | asyncio.Future[bytes]:
        core = self.core
        if request.api_version != 0:
            return encode_kv_reply("fail", None, f"bad-request: unsupported version {request.api_version}")
        try:
            f, key, value = decode_kv_request(request.api_key, request.body)
        except KvWireError as exc:
            return encode_kv_reply("fail", None, f"bad-request: {exc}", None, self.name)
        if core is None or self._closing:
            return encode_kv_reply("fail", None, "shutting-down", None, self.name)
        request_id = next(self._request_ids)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._client_ops[request_id] = future
        try:
            now, mono = self._clocks()
            effects = core.submit(now, request_id, f, key, value, mono=mono)
        except CommandError as exc:
            del self._client_ops[request_id]
            return encode_kv_reply("fail", None, f"bad-request: {exc}", None, self.name)
        except Exception as exc:
            self._internal_error(exc)
            return future  # answered "info" by the shutdown
        self._step(effects)
        return future

    # ------------------------------------------------------------------ effects

    def call_core(self, method: Callable[..., list[Any]], *args: Any) -> None:
        """Feed one input to the core (``method(now, *args)``) and apply its effects."""
        self._call(method, *args)

    def _call(self, method: Callable[..., list[Any]], *args: Any) -> None:
        """Feed one input to the core (``method(now, *args, mono=…)``) and apply what it returns."""
        try:
            now, mono = self._clocks()
            effects = method(now, *args, mono=mono)
        except Exception as exc:
            self._internal_error(exc)
            return
        self._step(effects)

    def _clocks(self) -> tuple[int, int]:
        """(now, mono) for the next input. On the wall clock, a step since the last input (the wall clock moved
        against the monotonic one by more than ``WALL_STEP_NS``) first fires the timers it made due, as the
        simulator does at the instant of a clock fault; else an input that arrives first (a fetch answer)
        could re-arm a timer the step had already expired."""
        now, mono = self.now(), self.monotonic()
        if self._poll_s is None:
            return now, mono
        skew, last = now - mono, self._skew
        self._skew = skew
        core = self.core
        if last is not None and abs(skew - last) > WALL_STEP_NS and core is not None:
            self._step(core.tick(now, mono=mono))  # an exception here is the caller's internal error
        return now, mono

    def _internal_error(self, exc: Exception) -> None:
        self.log.error("the core raised %r", exc, exc_info=exc)
        self._die(f"internal error: {exc!r}", EXIT_FATAL)

    def _step(self, effects: list[Any]) -> None:
        try:
            if not self._dispatch(effects):
                return  # a Fatal: the process is dying
        except (OSError, StorageError) as exc:
            self._die(f"storage failure: {exc}", EXIT_STORAGE)
            return
        except Exception as exc:
            self._internal_error(exc)
            return
        self._arm_timer()

    # One method per effect kind (nodes.effects.EffectHandler), called in the effects' order by _step.

    def on_send(self, effect: Send) -> None:
        self._send(effect)

    def on_persist_quorum_state(self, effect: PersistQuorumState) -> None:
        self.quorum_state.save(effect.state)

    def on_append_log(self, effect: AppendLog) -> None:
        self.log_file.append(effect.records)

    def on_truncate_log(self, effect: TruncateLog) -> None:
        self.log_file.truncate(effect.from_offset)

    def on_flush(self, effect: Flush) -> None:
        self._flush_task = asyncio.get_running_loop().create_task(self._flush(effect.up_to_offset))

    def on_committed(self, effect: Committed) -> None:
        self.hw_file.store(effect.high_watermark)

    def on_reply(self, effect: Reply) -> None:
        # only a bare RaftNode answers appends with a Reply; this driver runs BrokerNode cores
        self.log.warning("dropping a raft Reply to %r: no caller of append", effect.request_id)

    def on_client_reply(self, effect: ClientReply) -> None:
        self._reply(effect)

    def on_append_partition_log(self, effect: AppendPartitionLog) -> None:
        self.partitions.append(effect.partition, effect.batches)

    def on_truncate_partition_log(self, effect: TruncatePartitionLog) -> None:
        self.partitions.truncate(effect.partition, effect.from_offset)

    def on_flush_partition(self, effect: FlushPartition) -> None:
        task = asyncio.get_running_loop().create_task(self._flush_partition(effect.partition, effect.up_to_offset))
        self._partition_flushes.add(task)
        task.add_done_callback(self._partition_flushes.discard)

    def on_client_response(self, effect: ClientResponse) -> None:
        if self.kafka is not None:
            self.kafka.resolve(effect.request_id, effect.response)

    def on_close_client_connection(self, effect: CloseClientConnection) -> None:
        if self.kafka is not None:
            self.kafka.close(effect.request_id, effect.reason)

    def on_event(self, effect: Event) -> None:
        self.events.write({**effect.data, "time": self.wall_clock()})
        if effect.data.get("type") == "state":
            self._log_state(effect.data)

    def on_fatal(self, effect: Fatal) -> None:
        self._die(f"fatal: {effect.reason}", EXIT_FATAL)

    def _log_state(self, data: dict[str, Any]) -> None:
        self.log.info(
            "%s is %s in epoch %s (leader %s, voted for %s)",
            self.name,
            data.get("role"),
            data.get("epoch"),
            data.get("leader") or "unknown",
            data.get("voted_for") or "nobody",
        )

    def _send(self, effect: Send) -> None:
        slot = effect.reply_ctx
        message = effect.message
        if isinstance(slot, _ReplySlot):
            if not slot.future.done():
                try:
                    if slot.as_message:
                        slot.future.set_result(message)
                    elif isinstance(message, BROKER_RESPONSES):
                        slot.future.set_result(brokerwire.encode(self.node_id, message)[1])
                    else:
                        slot.future.set_result(encode(message))
                except (CodecError, brokerwire.BrokerWireError) as exc:
                    self.log.error("cannot encode %s: %s", type(message).__name__, exc)
                    slot.future.set_exception(CloseConnection())
            return
        if isinstance(message, BROKER_REQUESTS):
            lane = self._lane(effect.dst, lane_of(message))
            if lane is None:
                self.log.warning("dropping %s to node %s: no known address", type(message).__name__, effect.dst)
            else:
                lane.put(self.monotonic(), message)
            return
        if isinstance(message, BROKER_RESPONSES):
            self.log.warning("dropping %s to n%s: no request to answer", type(message).__name__, effect.dst)
            return
        peer = self.peers.get(effect.dst)
        if peer is None:
            self.log.warning("dropping %s to unknown node %s", type(effect.message).__name__, effect.dst)
            return
        peer.put(self.monotonic(), effect.message)

    def _lane(self, dst: int, lane: str) -> _BrokerLane | None:
        """The connection for broker requests of ``lane`` to ``dst``, pointed at its current address: a voter's
        controller listener for the controller lanes; for the broker lanes the inter-broker endpoint ``dst``
        registered (in this node's metadata image), else its voter address (a combined node registers none).
        None when ``dst`` has no address, or on a node without the broker role."""
        if not self.config.is_broker or dst == self.node_id:
            return None
        address = self._voter_addresses.get(dst)
        if lane not in CONTROLLER_LANES and isinstance(self.core, BrokerNode):
            reg = self.core.image.brokers.get(dst)
            if reg is not None and reg.inter_broker_host:
                address = (reg.inter_broker_host, reg.inter_broker_port)
        if address is None:
            return None
        key = (dst, lane)
        self.broker_network.set_address(key, *address)  # moves (and reconnects) only when it changed
        peer = self.lanes.get(key)
        if peer is None:
            timeout_ns = lane_timeout_ms(lane, self.config.broker) * 1_000_000
            peer = self.lanes[key] = _BrokerLane(self, dst, self.broker_network, timeout_ns, key)
            if self._started:
                peer.start()
        return peer

    def _reply(self, reply: ClientReply) -> None:
        future = self._client_ops.pop(reply.request_id, None)
        if future is not None and not future.done():
            future.set_result(encode_kv_reply(reply.type, reply.value, reply.error, reply.leader_id, self.name))

    def _arm_timer(self) -> None:
        core = self.core
        deadline = core.next_deadline() if core is not None and not self._closing else None
        if deadline == self._timer_at and (deadline is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is None:
            return
        delay = max(0.0, (deadline - self.now()) / 1e9)
        if self._poll_s is not None:
            delay = min(delay, self._poll_s)  # the wall clock may step: look again soon
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    # ------------------------------------------------------------------ views

    def committed_end(self) -> int:
        """End of the committed prefix this node reports: its high watermark, or the highest one it
        recorded before a restart (until the leader tells it again), capped at its log end."""
        if self.core is None:
            return 0
        raft = self.core.raft
        return min(max(raft.high_watermark, self.hw_file.value), raft.log_end_offset)

    def dump(self) -> str:
        """The committed-log dump (``logs/<node>.jsonl`` text)."""
        if self.core is None:
            return ""
        return format_dump(self.core.raft.log_records(0, self.committed_end()))

    def partition_dump(self) -> dict[str, list[dict[str, Any]]]:
        """A broker's committed partition batches, ``{partition: [{offset, epoch, digest}]}``: each
        replica's batches below its high watermark (the simulator's partition dumps); {} otherwise."""
        replicas = getattr(self.core, "replicas", None)
        if replicas is None:
            return {}
        return {
            str(tp): [
                {"offset": b.base_offset, "epoch": b.leader_epoch, "digest": hashlib.sha256(b.data).hexdigest()[:16]}
                for b in p.log.batches
                if b.base_offset < p.hw
            ]
            for tp, p in sorted(replicas.partitions.items())
        }

    def status(self) -> dict[str, Any]:
        """JSON-able status (AdminDescribe): role, epoch, leader, offsets; voters' progress if leader."""
        cfg = self.config
        doc: dict[str, Any] = {
            "node": self.node_id,
            "name": self.name,
            "pid": os.getpid(),
            "bugs": sorted(cfg.bugs),
            "roles": sorted(cfg.roles),
            "controller": str(self.controller_address) if self._opened and cfg.is_controller else None,
            "inter_broker": str(self.controller_address) if self._opened and not cfg.is_controller else None,
            "client": str(self.client_address) if self._opened else None,
            "voters": {str(v): str(e) for v, e in sorted(cfg.voters.items())},
        }
        core = self.core
        if core is None:
            doc.update(role=None, failed="stopped")
            return doc
        doc.update(core.raft.status())
        doc["committed_end"] = self.committed_end()
        if isinstance(core, BrokerNode) and cfg.is_broker:
            raft_keys = set(core.raft.status())
            doc["broker"] = {
                "advertised": str(self.advertised()),
                **{k: v for k, v in core.status().items() if k not in raft_keys},
            }
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # through _step: the call may also fire due timers, whose effects must not be lost
        self._call(core.handle, -1, DescribeQuorumRequest(), _ReplySlot(future, as_message=True))
        response = future.result() if future.done() and not future.exception() else None
        if isinstance(response, DescribeQuorumResponse) and response.voters:
            now = self.now()
            doc["replicas"] = [
                {
                    "replica_id": r.replica_id,
                    "log_end_offset": r.log_end_offset,
                    "last_fetch_age_ms": None if r.last_fetch_time is None else (now - r.last_fetch_time) // 1_000_000,
                }
                for r in response.voters
            ]
        return doc

    def metrics(self) -> dict[str, Any]:
        return {
            "quorum_state_writes": self.quorum_state.writes,
            "fsyncs": self.log_file.fsyncs,
            "partition_fsyncs": self.partitions.fsyncs,
            "peers": {
                str(v): {"sent": p.sent, "failed": p.failed, "queued": len(p.queue)} for v, p in self.peers.items()
            },
            "lanes": {
                f"{v}/{lane}": {"sent": p.sent, "failed": p.failed, "queued": len(p.queue)}
                for (v, lane), p in self.lanes.items()
            },
            "kafka": {"pending": self.kafka.pending, **self.kafka.requests} if self.kafka is not None else {},
            "controller_server": self._controller_server.metrics() if self._controller_server else {},
            "client_server": self._client_server.metrics() if self._client_server else {},
        }


def _give_up(future: asyncio.Future[Any]) -> None:
    """A received broker request the core never answered: close its connection."""
    if not future.done():
        future.set_exception(CloseConnection())
