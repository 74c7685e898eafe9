"""Kafka API requests on a broker node's client listener: decode, call the core, encode.

:class:`KafkaService` is the driver's helper for every request whose api key is a Kafka one
(the KV keys 1000-1011 stay with the driver). Per request:

* ApiVersions: the supported ranges; an unsupported version gets the v0-format
  UNSUPPORTED_VERSION reply (KIP-511) so clients retry lower;
* an API or version we do not serve, or a body that does not decode: the connection is closed
  (as Kafka does), logged with the client's address; other connections are untouched;
* Produce, Fetch, ListOffsets, Metadata, CreateTopics, InitProducerId, OffsetForLeaderEpoch:
  mapped with ``kafkaapi.py`` and handed to :class:`~nodes.broker.BrokerNode` with a fresh
  request id; the core's ``ClientResponse``
  resolves the request's future (maybe later: a parked fetch or an acks=all produce), which the
  server writes back in request order. acks=0 produce answers nothing; a
  ``CloseClientConnection`` (an acks=0 produce that failed) closes that connection;
* the group coordinator's APIs (``groupapi.py``) go to ``BrokerNode.group_call``; the
  transaction APIs (``txnapi.py``) to ``txn_call`` (TxnOffsetCommit to ``group_call``,
  WriteTxnMarkers to ``write_txn_markers``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..kafka import protocol as kp
from ..kafka.versions import ApiKey, is_supported
from ..runtime.primitives import DecodeError
from . import groupapi, txnapi
from . import kafkaapi as ka
from .groupapi import GROUP_API_KEYS
from .server import CloseConnection, Request
from .txnapi import TXN_API_KEYS

if TYPE_CHECKING:
    from .driver import NodeDriver

__all__ = ["KAFKA_API_KEYS", "KafkaService"]

KAFKA_API_KEYS = frozenset(int(k) for k in kp.REQUEST_TYPES)

Builder = Callable[[Any], bytes]


class KafkaService:
    """Serves Kafka requests for one :class:`~nodes.runtime.driver.NodeDriver` running a
    BrokerNode. ``handle`` is the client listener's handler for Kafka api keys; the driver
    passes the core's ``ClientResponse``/``CloseClientConnection`` effects to ``resolve``/``close``."""

    def __init__(self, driver: NodeDriver) -> None:
        self.driver = driver
        self.log = logging.getLogger(f"nodes.{driver.name}.kafka")
        self._ids = itertools.count()
        self._pending: dict[int, tuple[asyncio.Future[bytes], Builder]] = {}
        self.requests = dict.fromkeys(
            (
                "produce",
                "fetch",
                "list_offsets",
                "metadata",
                "create_topics",
                "init_producer_id",
                "offset_for_leader_epoch",
                "group_call",
                "txn_call",
                "write_txn_markers",
            ),
            0,
        )

    @property
    def pending(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ requests

    def handle(self, request: Request) -> bytes | None | asyncio.Future[bytes]:
        key, version = request.api_key, request.api_version
        if key == ApiKey.API_VERSIONS:
            return self._api_versions(request)
        if not is_supported(key, version):
            self.log.info("%s: %s v%d is not supported, closing", request.peer, _name(key), version)
            raise CloseConnection
        try:
            message = kp.decode_request(key, version, request.body)
        except (DecodeError, ValueError) as exc:
            self.log.info("%s: malformed %s v%d, closing: %s", request.peer, _name(key), version, exc)
            raise CloseConnection from None
        if self.driver.core is None or self.driver.closing:
            raise CloseConnection
        if key == ApiKey.PRODUCE:
            return self._produce(request, message, version)
        if key == ApiKey.FETCH:
            error = ka.fetch_session_error(message, version)
            if error is not None:
                return error.encode(version)
            return self._submit(
                "fetch", ka.fetch_request(message), lambda r: ka.fetch_response(message, r, version).encode(version)
            )
        if key == ApiKey.LIST_OFFSETS:
            return self._submit(
                "list_offsets",
                ka.list_offsets_request(message),
                lambda r: ka.list_offsets_response(message, r).encode(version),
            )
        if key == ApiKey.METADATA:
            return self._submit(
                "metadata",
                ka.metadata_request(message),
                lambda r: ka.metadata_response(r, self.driver.config.raft.cluster_id).encode(version),
            )
        if key == ApiKey.CREATE_TOPICS:
            return self._create_topics(message, version)
        if key in GROUP_API_KEYS:
            return self._group_call(request, message, version)
        if key in TXN_API_KEYS:
            return self._submit(
                txnapi.CORE_METHOD[key],
                txnapi.core_request(key, message),
                lambda r: txnapi.kafka_response(key, message, version, r).encode(version),
            )
        if key == ApiKey.INIT_PRODUCER_ID:
            return self._submit(
                "init_producer_id",
                ka.init_producer_id_request(message),
                lambda r: ka.init_producer_id_response(r, version).encode(version),
            )
        if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            return self._submit(
                "offset_for_leader_epoch",
                ka.offset_for_leader_epoch_request(message),
                lambda r: ka.offset_for_leader_epoch_response(message, r).encode(version),
            )
        raise CloseConnection  # pragma: no cover - every supported key is handled above

    def _api_versions(self, request: Request) -> bytes:
        version = request.api_version
        if not is_supported(ApiKey.API_VERSIONS, version):
            return kp.unsupported_version_response()
        try:
            kp.ApiVersionsRequest.decode(request.body, version)
        except (DecodeError, ValueError) as exc:
            self.log.info("%s: malformed ApiVersions v%d: %s", request.peer, version, exc)
            return kp.ApiVersionsResponse(error_code=kp.ErrorCode.INVALID_REQUEST).encode(version)
        return kp.api_versions_response().encode(version)

    def _produce(
        self, request: Request, message: kp.ProduceRequest, version: int
    ) -> bytes | None | asyncio.Future[bytes]:
        plan = ka.produce_plan(message)
        if plan.errors:
            first = next(iter(plan.errors.items()))
            self.log.info("%s: produce refused for %d partition(s), e.g. %s", request.peer, len(plan.errors), first)
        if message.acks == 0:
            if plan.errors:
                raise CloseConnection  # Kafka closes the connection when an acks=0 produce fails
            if plan.needs_core:
                request_id, future = self._call("produce", plan.request, lambda r: b"")
                self._pending.pop(request_id, None)
                if future.done() and future.exception() is not None:
                    raise CloseConnection
            return None
        if not plan.needs_core:
            return ka.produce_response(message, plan, None).encode(version)
        return self._submit("produce", plan.request, lambda r: ka.produce_response(message, plan, r).encode(version))

    def _group_call(self, request: Request, message: Any, version: int) -> bytes | asyncio.Future[bytes]:
        host = request.peer[0] if isinstance(request.peer, tuple) and request.peer else ""
        key = request.api_key
        core_request = groupapi.core_request(key, message, version, request.client_id, f"/{host}")
        return self._submit(
            "group_call",
            core_request,
            lambda r: groupapi.kafka_response(key, message, version, r).encode(version),
        )

    def _create_topics(self, message: kp.CreateTopicsRequest, version: int) -> bytes | asyncio.Future[bytes]:
        core_request, refused = ka.create_topics_request(message)
        if not core_request.topics:
            return ka.create_topics_response(message, refused, None).encode(version)

        def topic_id(name: str) -> str | None:
            core = self.driver.core
            topic = core.image.topics.get(name) if core is not None else None  # type: ignore[union-attr]
            return topic.topic_id if topic is not None else None

        return self._submit(
            "create_topics",
            core_request,
            lambda r: ka.create_topics_response(message, refused, r, topic_id).encode(version),
        )

    def _call(self, method: str, core_request: Any, build: Builder) -> tuple[int, asyncio.Future[bytes]]:
        """Call ``core.<method>(now, request_id, core_request)``; its ClientResponse (maybe
        emitted within this very call) resolves the future with ``build(response)``."""
        core = self.driver.core
        if core is None:
            raise CloseConnection
        self.requests[method] += 1
        request_id = next(self._ids)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, build)
        self.driver.call_core(getattr(core, method), request_id, core_request)
        return request_id, future

    def _submit(self, method: str, core_request: Any, build: Builder) -> bytes | asyncio.Future[bytes]:
        """:meth:`_call`, returning the bytes at once when the answer is already there."""
        _, future = self._call(method, core_request, build)
        if future.done() and future.exception() is None:
            return future.result()
        return future

    # ------------------------------------------------------------------ effects

    def resolve(self, request_id: Any, response: Any) -> None:
        """A ClientResponse from the core."""
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return
        future, build = entry
        if future.done():
            return
        try:
            future.set_result(build(response))
        except Exception as exc:  # an answer we cannot encode: close that connection only
            self.log.error("cannot encode the answer to request %s: %r", request_id, exc)
            future.set_exception(CloseConnection())

    def close(self, request_id: Any, reason: str) -> None:
        """A CloseClientConnection from the core."""
        entry = self._pending.pop(request_id, None)
        self.log.info("closing a client connection: %s", reason)
        if entry is not None and not entry[0].done():
            entry[0].set_exception(CloseConnection())

    def fail_all(self) -> None:
        """Shutting down: every waiting request's connection is closed."""
        pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(CloseConnection())


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
