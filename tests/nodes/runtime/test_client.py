"""The asyncio client: correlation, in-flight limit, timeouts, disconnects, reconnect backoff."""

from __future__ import annotations

import asyncio
import random
import socket
import struct

import pytest

from nodes.runtime.client import (
    Backoff,
    BackoffError,
    ClientClosedError,
    ClientConfig,
    ClientConnection,
    ConnectError,
    DisconnectedError,
    NetworkClient,
    RequestTimeoutError,
)
from nodes.runtime.framing import FrameDecoder, decode_request, encode_response
from nodes.runtime.server import Request, Server, ServerConfig

from ._support import ECHO, HOST, SILENT, SLEEP, echo_handler, run, sleep_body


def _server(handler=echo_handler, **kw) -> Server:
    return Server(handler, ServerConfig(host=HOST, port=0, **kw))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def test_backoff_grows_exponentially_with_seeded_jitter_and_a_cap() -> None:
    a = Backoff(0.05, 1.0, jitter=0.2, rng=random.Random(7))
    b = Backoff(0.05, 1.0, jitter=0.2, rng=random.Random(7))
    delays = [a.delay(n) for n in range(10)]
    assert delays == [b.delay(n) for n in range(10)]  # replayable from the seed
    for n, d in enumerate(delays):
        base = min(0.05 * 2**n, 1.0)
        assert base * 0.8 <= d <= min(base * 1.2, 1.0)
    assert max(delays) <= 1.0 and delays[-1] >= 0.8
    assert Backoff(0.05, 1.0, jitter=0, rng=random.Random()).delay(3) == 0.4
    assert Backoff(0.0, 1.0).delay(5) == 0.0
    assert Backoff(0.05, 1.0).delay(10_000) <= 1.0


def test_echo_through_network_client_with_pipelining() -> None:
    async def scenario() -> None:
        async with _server(max_in_flight_per_connection=5) as s1, _server() as s2:
            client = NetworkClient(ClientConfig(max_in_flight=5), addresses={1: (HOST, s1.port), 2: (HOST, s2.port)})
            bodies = [b"m%d" % i for i in range(40)]
            got = await asyncio.gather(*(client.send(1 + i % 2, ECHO, 0, b) for i, b in enumerate(bodies)))
            assert [bytes(g) for g in got] == bodies
            assert s1.metrics()["requests_received"] == 20 and s2.metrics()["requests_received"] == 20
            m = client.metrics()
            assert m["connects"] == 2 and m["responses_received"] == 40 and m["connected"] == 2
            await client.close()
            with pytest.raises(ClientClosedError):
                await client.send(1, ECHO, 0, b"late")

    run(scenario())


def test_max_in_flight_is_respected() -> None:
    active = 0
    peak = 0

    async def handler(req: Request) -> bytes:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return bytes(req.body)

    async def scenario() -> None:
        async with _server(handler, max_in_flight_per_connection=100, num_handlers=20) as server:
            conn = ClientConnection(HOST, server.port, ClientConfig(max_in_flight=3))
            got = await asyncio.gather(*(conn.send(ECHO, 0, b"%d" % i) for i in range(12)))
            assert [bytes(g) for g in got] == [b"%d" % i for i in range(12)]
            assert peak == 3
            await conn.close()

    run(scenario())


def test_timeout_resets_the_connection_so_late_responses_are_not_mismatched() -> None:
    async def scenario() -> None:
        async with _server() as server:
            conn = ClientConnection(HOST, server.port, ClientConfig(request_timeout=0.15))
            assert bytes(await conn.send(ECHO, 0, b"warm")) == b"warm"
            with pytest.raises(RequestTimeoutError) as info:
                await conn.send(SLEEP, 0, sleep_body(300, b"late"))
            assert isinstance(info.value, TimeoutError)
            assert not conn.connected
            # The late response would arrive on the old socket; the new request gets its own.
            assert bytes(await conn.send(ECHO, 0, b"fresh")) == b"fresh"
            await asyncio.sleep(0.3)
            assert bytes(await conn.send(ECHO, 0, b"fresh again")) == b"fresh again"
            m = conn.metrics()
            assert m["timeouts"] == 1 and m["disconnects"] == 1 and m["connects"] == 2
            await conn.close()

    run(scenario())


def test_per_request_timeout_override_and_timeout_waiting_for_a_slot() -> None:
    async def scenario() -> None:
        async with _server() as server:
            conn = ClientConnection(HOST, server.port, ClientConfig(max_in_flight=1, request_timeout=5))
            slow = asyncio.create_task(conn.send(SLEEP, 0, sleep_body(200)))
            await asyncio.sleep(0.02)
            with pytest.raises(RequestTimeoutError, match="in-flight slot"):
                await conn.send(ECHO, 0, b"queued", timeout=0.05)
            # nothing was written for the queued request, so the connection survives
            assert bytes(await slow) == sleep_body(200)
            assert conn.metrics()["disconnects"] == 0
            await conn.close()

    run(scenario())


async def _stub_server(on_request) -> tuple[asyncio.base_events.Server, int]:
    """A hand-rolled peer for misbehaviours the real server never shows."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    header, body = decode_request(frame)
                    await on_request(header, body, writer)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, HOST, 0)
    return srv, srv.sockets[0].getsockname()[1]


def test_disconnect_fails_every_in_flight_request() -> None:
    seen = 0

    async def on_request(header, body, writer) -> None:
        nonlocal seen
        seen += 1
        if seen == 3:
            writer.transport.abort()

    async def scenario() -> None:
        srv, port = await _stub_server(on_request)
        conn = ClientConnection(HOST, port, ClientConfig(max_in_flight=3))
        results = await asyncio.gather(*(conn.send(ECHO, 0, b"x") for _ in range(3)), return_exceptions=True)
        assert all(isinstance(r, DisconnectedError) for r in results), results
        assert conn.metrics()["disconnects"] == 1
        await conn.close()
        srv.close()

    run(scenario())


def test_mismatched_correlation_id_resets_the_connection() -> None:
    async def on_request(header, body, writer) -> None:
        writer.write(encode_response(header.correlation_id + 1000, b"wrong"))

    async def scenario() -> None:
        srv, port = await _stub_server(on_request)
        conn = ClientConnection(HOST, port)
        with pytest.raises(DisconnectedError, match="correlation id"):
            await conn.send(ECHO, 0, b"x")
        assert not conn.connected
        await conn.close()
        srv.close()

    run(scenario())


def test_oversized_response_is_refused() -> None:
    async def on_request(header, body, writer) -> None:
        writer.write(struct.pack(">i", 10_000_000) + struct.pack(">i", header.correlation_id))

    async def scenario() -> None:
        srv, port = await _stub_server(on_request)
        conn = ClientConnection(HOST, port, ClientConfig(max_response_bytes=1024))
        with pytest.raises(DisconnectedError, match="larger than the maximum"):
            await conn.send(ECHO, 0, b"x")
        await conn.close()
        srv.close()

    run(scenario())


def test_connect_failures_back_off_exponentially_then_recover() -> None:
    async def scenario() -> None:
        port = _free_port()
        cfg = ClientConfig(reconnect_backoff=0.05, reconnect_backoff_max=0.2, backoff_jitter=0.2)
        conn = ClientConnection(HOST, port, cfg, rng=random.Random(1))
        waits = []
        for _ in range(4):
            with pytest.raises(ConnectError):
                await conn.send(ECHO, 0, b"x")
            with pytest.raises(BackoffError) as info:
                await conn.send(ECHO, 0, b"x")  # fails fast while backing off
            waits.append(info.value.retry_after)
            assert abs(conn.ready_in() - info.value.retry_after) < 0.02
            await asyncio.sleep(info.value.retry_after + 0.005)
        # 0.05, 0.1, 0.2 (capped), 0.2 (capped), each +/-20%, minus the time the failed connect took
        assert 0.02 < waits[0] <= 0.06 and 0.05 < waits[1] <= 0.12 and 0.1 < waits[2] <= 0.2
        assert waits[0] < waits[1] < waits[2] and waits[3] <= 0.2
        async with Server(echo_handler, ServerConfig(host=HOST, port=port)):
            assert bytes(await conn.send(ECHO, 0, b"back")) == b"back"
            m = conn.metrics()
            assert m["connect_failures"] == 4 and m["connects"] == 1
        await conn.close()

    run(scenario())


def test_wait_for_backoff_and_server_restart() -> None:
    async def scenario() -> None:
        server = Server(echo_handler, ServerConfig(host=HOST, port=0))
        await server.start()
        port = server.port
        cfg = ClientConfig(reconnect_backoff=0.1, reconnect_backoff_max=0.1, wait_for_backoff=True)
        conn = ClientConnection(HOST, port, cfg, rng=random.Random(2))
        assert bytes(await conn.send(ECHO, 0, b"one")) == b"one"
        await server.close()
        with pytest.raises(DisconnectedError):
            await conn.send(ECHO, 0, b"lost")  # the old socket is dead or refused
        with pytest.raises(ConnectError):
            await conn.send(ECHO, 0, b"refused")
        async with Server(echo_handler, ServerConfig(host=HOST, port=port)):
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            assert bytes(await conn.send(ECHO, 0, b"two")) == b"two"  # waited out the backoff
            assert loop.time() - t0 >= 0.05
        await conn.close()

    run(scenario())


def test_requests_without_response_and_close_fails_in_flight() -> None:
    async def scenario() -> None:
        async with _server(max_in_flight_per_connection=4) as server:
            conn = ClientConnection(HOST, server.port, ClientConfig(max_in_flight=4))
            assert await conn.send(SILENT, 0, b"acks=0", expect_response=False) is None
            assert bytes(await conn.send(ECHO, 0, b"after")) == b"after"
            pending = asyncio.create_task(conn.send(SLEEP, 0, sleep_body(250)))
            await asyncio.sleep(0.05)
            await conn.close()
            with pytest.raises(ClientClosedError):
                await pending
            with pytest.raises(ClientClosedError):
                await conn.send(ECHO, 0, b"x")

    run(scenario())


def test_cancelled_caller_does_not_desynchronise_the_connection() -> None:
    async def scenario() -> None:
        async with _server(max_in_flight_per_connection=4) as server:
            conn = ClientConnection(HOST, server.port, ClientConfig(max_in_flight=4))
            slow = asyncio.create_task(conn.send(SLEEP, 0, sleep_body(100, b"slow")))
            await asyncio.sleep(0.02)
            slow.cancel()
            assert bytes(await conn.send(ECHO, 0, b"next")) == b"next"
            assert conn.metrics()["disconnects"] == 0
            await conn.close()

    run(scenario())


def test_set_address_moves_a_destination() -> None:
    async def scenario() -> None:
        async with _server() as a, _server() as b:
            client = NetworkClient(addresses={"n1": (HOST, a.port)}, rng=random.Random(3))
            assert bytes(await client.send("n1", ECHO, 0, b"a")) == b"a"
            client.set_address("n1", HOST, b.port)
            assert bytes(await client.send("n1", ECHO, 0, b"b")) == b"b"
            assert b.metrics()["requests_received"] == 1
            with pytest.raises(KeyError, match="no address"):
                await client.send("n9", ECHO, 0, b"?")
            await client.close()

    run(scenario())
