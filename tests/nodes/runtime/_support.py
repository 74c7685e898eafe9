"""Shared helpers for the runtime network tests: bounded asyncio runs and a raw framed client."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Coroutine
from typing import Any, TypeVar

from nodes.runtime.framing import decode_response, encode_request
from nodes.runtime.server import Request

T = TypeVar("T")

HOST = "127.0.0.1"

ECHO = 0  # answer the body
SLEEP = 1  # body = int32 milliseconds, then answer the body
FAIL = 2  # raise
SILENT = 3  # no response (acks=0)


def run(coro: Coroutine[Any, Any, T], timeout: float = 5.0) -> T:
    """Run `coro` in a fresh event loop, failing the test if it takes longer than `timeout`."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def echo_handler(req: Request) -> bytes | None:
    if req.api_key == ECHO:
        return bytes(req.body)
    if req.api_key == SLEEP:
        (ms,) = struct.unpack_from(">i", req.body, 0)
        await asyncio.sleep(ms / 1000)
        return bytes(req.body)
    if req.api_key == FAIL:
        raise RuntimeError("handler failure on purpose")
    if req.api_key == SILENT:
        return None
    raise KeyError(f"unknown api key {req.api_key}")


def sleep_body(ms: int, tag: bytes = b"") -> bytes:
    return struct.pack(">i", ms) + tag


class RawClient:
    """A bare framed client for poking at the server byte by byte."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer)

    def send(self, api_key: int, correlation_id: int, body: bytes = b"", api_version: int = 0) -> None:
        self.writer.write(encode_request(api_key, api_version, correlation_id, body, client_id="raw"))

    async def recv(self, timeout: float = 2.0) -> tuple[int, bytes]:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))[0]
        frame = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        header, body = decode_response(frame)
        return header.correlation_id, bytes(body)

    async def call(self, api_key: int, correlation_id: int, body: bytes = b"") -> bytes:
        self.send(api_key, correlation_id, body)
        corr, out = await self.recv()
        assert corr == correlation_id
        return out

    async def closed_by_peer(self, timeout: float = 2.0) -> bool:
        """True if the server closes the connection within `timeout` (EOF or reset)."""
        try:
            while True:
                data = await asyncio.wait_for(self.reader.read(65536), timeout)
                if not data:
                    return True
        except (ConnectionError, OSError):
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
