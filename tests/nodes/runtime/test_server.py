"""The asyncio request server over loopback TCP (127.0.0.1, ephemeral ports, bounded in time)."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodes.runtime.framing import decode_response, encode_request, flexible_header_versions
from nodes.runtime.server import CloseConnection, Request, Server, ServerConfig

from ._support import ECHO, FAIL, HOST, SILENT, SLEEP, RawClient, echo_handler, run, sleep_body


def _config(**kw) -> ServerConfig:
    kw.setdefault("host", HOST)
    kw.setdefault("port", 0)
    return ServerConfig(**kw)


def test_echo_over_loopback_and_metrics() -> None:
    async def scenario() -> None:
        async with Server(echo_handler, _config()) as server:
            client = await RawClient.open(server.port)
            for i in range(50):
                assert await client.call(ECHO, i, b"hello %d" % i) == b"hello %d" % i
            await client.close()
            m = server.metrics()
            assert m["requests_received"] == 50 and m["responses_sent"] == 50
            assert m["connections_accepted"] == 1 and m["frame_errors"] == 0
            assert m["bytes_in"] > 0 and m["bytes_out"] > 0

    run(scenario())


def test_pipelined_responses_keep_request_order_when_handlers_finish_out_of_order() -> None:
    finished: list[int] = []

    async def handler(req: Request) -> bytes:
        (ms,) = struct.unpack_from(">i", req.body)
        await asyncio.sleep(ms / 1000)
        finished.append(req.correlation_id)
        return bytes(req.body)

    async def scenario() -> None:
        cfg = _config(num_handlers=8, max_in_flight_per_connection=8)
        async with Server(handler, cfg) as server:
            client = await RawClient.open(server.port)
            n = 8
            for i in range(n):
                client.send(SLEEP, i, sleep_body(10 * (n - i)))  # the first sent finishes last
            got = [await client.recv() for _ in range(n)]
            assert [corr for corr, _ in got] == list(range(n))
            assert [body for _, body in got] == [sleep_body(10 * (n - i)) for i in range(n)]
            assert finished != sorted(finished)  # handlers really did finish out of order
            await client.close()

    run(scenario())


def test_default_mutes_the_connection_while_a_request_is_in_flight() -> None:
    active = 0
    peak = 0

    async def handler(req: Request) -> bytes:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.005)
        active -= 1
        return bytes(req.body)

    async def scenario() -> None:
        async with Server(handler, _config(num_handlers=4)) as server:
            client = await RawClient.open(server.port)
            for i in range(10):
                client.send(ECHO, i, b"%d" % i)
            assert [await client.recv() for _ in range(10)] == [(i, b"%d" % i) for i in range(10)]
            assert peak == 1
            await client.close()

    run(scenario())


def test_back_pressure_stops_reading_when_the_request_queue_is_full() -> None:
    release = asyncio.Event()

    async def handler(req: Request) -> bytes:
        await release.wait()
        return b"ok"

    async def scenario() -> None:
        cfg = _config(num_handlers=1, queued_max_requests=2, max_in_flight_per_connection=10_000)
        async with Server(handler, cfg) as server:
            client = await RawClient.open(server.port)
            n, payload = 300, b"x" * 32 * 1024  # ~10 MB, far more than the socket buffers hold
            for i in range(n):
                client.send(ECHO, i, payload)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.writer.drain(), 0.5)
            m = server.metrics()
            assert m["queue_depth"] == 2
            # one request in the handler, two queued, one held by the blocked reader
            assert m["requests_received"] <= 4
            assert m["bytes_in"] < 512 * 1024  # the server stopped reading
            assert client.writer.transport.get_write_buffer_size() > 0  # the client is pushed back
            release.set()
            for i in range(n):
                assert await client.recv(timeout=3.0) == (i, b"ok")
            assert server.metrics()["queue_depth_max"] == 2
            await client.close()

    run(scenario(), timeout=10)


def _bad_inputs() -> dict[str, bytes]:
    return {
        "oversize prefix": struct.pack(">i", 4097) + b"z" * 100,
        "negative prefix": struct.pack(">i", -5),
        "truncated header": struct.pack(">i", 3) + b"\x00\x00\x00",
        "bad client id length": struct.pack(">i", 10) + b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x09",
        "unknown api key": encode_request(77, 0, 1, b"", client_id="x"),
        "handler raises": encode_request(FAIL, 0, 1, b"", client_id="x"),
    }


@pytest.mark.parametrize("kind", sorted(_bad_inputs()))
def test_a_bad_request_closes_only_its_own_connection(kind: str) -> None:
    async def scenario() -> None:
        async with Server(echo_handler, _config(socket_request_max_bytes=4096)) as server:
            good = await RawClient.open(server.port)
            bad = await RawClient.open(server.port)
            assert await good.call(ECHO, 1, b"before") == b"before"
            bad.writer.write(_bad_inputs()[kind])
            assert await bad.closed_by_peer()
            assert await good.call(ECHO, 2, b"after") == b"after"
            other = await RawClient.open(server.port)
            assert await other.call(ECHO, 3, b"new") == b"new"
            m = server.metrics()
            assert m["frame_errors"] + m["request_errors"] == 1
            assert m["connections_active"] == 2
            for c in (good, bad, other):
                await c.close()

    run(scenario())


def test_header_hook_rejecting_an_api_closes_the_connection() -> None:
    def versions(api_key: int, api_version: int) -> tuple[int, int]:
        if api_key > 10:
            raise KeyError(api_key)
        return 1, 0

    async def scenario() -> None:
        async with Server(echo_handler, _config(header_versions=versions)) as server:
            client = await RawClient.open(server.port)
            client.send(50, 1)
            assert await client.closed_by_peer()
            assert server.metrics()["frame_errors"] == 1
            await client.close()

    run(scenario())


def test_on_error_hook_turns_failures_into_error_responses() -> None:
    seen: list[tuple[int, str]] = []

    def on_error(req: Request, exc: BaseException) -> bytes | None:
        seen.append((req.api_key, type(exc).__name__))
        return b"error:" + type(exc).__name__.encode()

    async def scenario() -> None:
        async with Server(echo_handler, _config(), on_error=on_error) as server:
            client = await RawClient.open(server.port)
            assert await client.call(FAIL, 1) == b"error:RuntimeError"
            assert await client.call(99, 2) == b"error:KeyError"
            assert await client.call(ECHO, 3, b"still open") == b"still open"
            assert seen == [(FAIL, "RuntimeError"), (99, "KeyError")]
            await client.close()

    run(scenario())


def test_close_connection_from_a_handler() -> None:
    async def handler(req: Request) -> bytes:
        if req.api_key == 5:
            raise CloseConnection
        return bytes(req.body)

    async def scenario() -> None:
        async with Server(handler, _config()) as server:
            client = await RawClient.open(server.port)
            assert await client.call(ECHO, 1, b"a") == b"a"
            client.send(5, 2)
            assert await client.closed_by_peer()
            assert server.metrics()["request_errors"] == 0
            await client.close()

    run(scenario())


def test_requests_without_response_do_not_break_ordering() -> None:
    async def scenario() -> None:
        async with Server(echo_handler, _config(max_in_flight_per_connection=4)) as server:
            client = await RawClient.open(server.port)
            client.send(SILENT, 1, b"acks=0")
            client.send(ECHO, 2, b"two")
            client.send(SILENT, 3, b"acks=0")
            client.send(ECHO, 4, b"four")
            assert await client.recv() == (2, b"two")
            assert await client.recv() == (4, b"four")
            assert server.metrics()["requests_without_response"] == 2
            await client.close()

    run(scenario())


def test_deferred_responses_free_the_handler_task() -> None:
    parked: list[asyncio.Future[bytes | None]] = []

    async def handler(req: Request) -> bytes | asyncio.Future[bytes | None]:
        if req.api_key == 7:  # a long poll: park it, like Kafka's purgatory
            fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
            parked.append(fut)
            return fut
        return bytes(req.body)

    async def scenario() -> None:
        async with Server(handler, _config(num_handlers=1)) as server:
            poller = await RawClient.open(server.port)
            other = await RawClient.open(server.port)
            poller.send(7, 1, b"wait")
            assert await other.call(ECHO, 1, b"served meanwhile") == b"served meanwhile"
            assert len(parked) == 1
            parked[0].set_result(b"long poll done")
            assert await poller.recv() == (1, b"long poll done")
            for c in (poller, other):
                await c.close()

    run(scenario())


def test_idle_connections_are_closed_but_active_ones_are_not() -> None:
    async def scenario() -> None:
        async with Server(echo_handler, _config(connections_max_idle=0.2)) as server:
            idle = await RawClient.open(server.port)
            busy = await RawClient.open(server.port)
            slow = await RawClient.open(server.port)
            slow.send(SLEEP, 1, sleep_body(400))  # in flight longer than the idle timeout
            for i in range(8):
                assert await busy.call(ECHO, i, b"ping") == b"ping"
                await asyncio.sleep(0.05)
            assert await idle.closed_by_peer(timeout=1.0)
            assert await slow.recv() == (1, sleep_body(400))
            assert await busy.call(ECHO, 99, b"alive") == b"alive"
            assert server.metrics()["connections_idle_closed"] == 1
            for c in (idle, busy, slow):
                await c.close()

    run(scenario())


def test_connection_limits_per_ip() -> None:
    async def scenario() -> None:
        async with Server(echo_handler, _config(max_connections_per_ip=2)) as server:
            a = await RawClient.open(server.port)
            b = await RawClient.open(server.port)
            c = await RawClient.open(server.port)
            assert await c.closed_by_peer()
            assert await a.call(ECHO, 1, b"a") == b"a" and await b.call(ECHO, 1, b"b") == b"b"
            await a.close()
            await asyncio.sleep(0.05)
            d = await RawClient.open(server.port)
            assert await d.call(ECHO, 1, b"d") == b"d"
            assert server.metrics()["connections_rejected"] == 1
            for x in (b, c, d):
                await x.close()

    run(scenario())


def test_half_closed_peer_still_gets_its_responses() -> None:
    async def scenario() -> None:
        async with Server(echo_handler, _config()) as server:
            client = await RawClient.open(server.port)
            client.send(SLEEP, 1, sleep_body(50))
            client.writer.write_eof()
            assert await client.recv() == (1, sleep_body(50))
            assert await client.closed_by_peer()
            await client.close()

    run(scenario())


def test_graceful_close_finishes_in_flight_requests_then_refuses() -> None:
    async def scenario() -> None:
        server = Server(echo_handler, _config(max_in_flight_per_connection=2))
        await server.start()
        port = server.port
        client = await RawClient.open(port)
        client.send(SLEEP, 1, sleep_body(100))
        client.send(ECHO, 2, b"second")
        await asyncio.sleep(0.02)
        closing = asyncio.create_task(server.close(timeout=2.0))
        assert await client.recv() == (1, sleep_body(100))
        assert await client.recv() == (2, b"second")
        assert await client.closed_by_peer()
        await closing
        with pytest.raises(OSError):
            await asyncio.open_connection(HOST, port)
        assert server.metrics()["connections_active"] == 0
        await client.close()

    run(scenario())


def test_flexible_headers_on_the_wire() -> None:
    versions = flexible_header_versions(lambda key, version: version >= 3)

    async def handler(req: Request) -> bytes:
        assert req.header.header_version == (2 if req.api_version >= 3 else 1)
        return bytes(req.body)

    async def scenario() -> None:
        async with Server(handler, _config(header_versions=versions)) as server:
            reader, writer = await asyncio.open_connection(HOST, server.port)
            writer.write(encode_request(1, 12, 5, b"flex", client_id="c", header_version=2, tagged_fields={1: b"t"}))
            writer.write(encode_request(18, 3, 6, b"apiv", client_id="c", header_version=2))
            for corr, hv, body in ((5, 1, b"flex"), (6, 0, b"apiv")):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, got = decode_response(await reader.readexactly(size), hv)
                assert (header.correlation_id, bytes(got)) == (corr, body)
            writer.close()

    run(scenario())


_fuzz_payloads = st.lists(
    st.one_of(
        st.binary(max_size=200),
        st.binary(max_size=120).map(lambda b: struct.pack(">i", len(b)) + b),
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=40)).map(
            lambda t: struct.pack(">i", t[0]) + t[1]
        ),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_fuzz_payloads)
def test_fuzz_random_bytes_never_stop_the_server(payloads: list[bytes]) -> None:
    async def scenario() -> None:
        cfg = _config(socket_request_max_bytes=1024, num_handlers=2, connections_max_idle=5.0)
        async with Server(echo_handler, cfg, on_error=lambda req, exc: b"err") as server:
            witness = await RawClient.open(server.port)
            for payload in payloads:
                reader, writer = await asyncio.open_connection(HOST, server.port)
                writer.write(payload)
                await writer.drain()
                await asyncio.sleep(0)
                writer.close()
            assert await witness.call(ECHO, 1, b"still serving") == b"still serving"
            fresh = await RawClient.open(server.port)
            assert await fresh.call(ECHO, 2, b"new connection") == b"new connection"
            for c in (witness, fresh):
                await c.close()

    run(scenario())
