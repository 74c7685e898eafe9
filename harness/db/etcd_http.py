"""A small HTTP/1.1 JSON client for etcd's v3 gateway (asyncio, keep-alive) and its status page (blocking).

etcd 3.4 serves its v3 API as JSON over HTTP next to gRPC on the client port (`POST /v3/kv/range`,
`/v3/kv/put`, `/v3/kv/txn`, `/v3/maintenance/status`, keys and values base64) and its raft status
on `GET /debug/vars`. The harness needs only requests with a JSON body and a JSON answer, one at a
time per connection, so it speaks HTTP itself: no gRPC stack and no new dependency.

`HttpConnection.post` raises `NotSent` when the request certainly never left (refused or timed-out
connect), `TimeoutError` when no answer came in time, and `ConnectionError` when the connection
broke after sending; the last two close the connection (a late answer must not answer the next
request).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
from typing import Any


class NotSent(ConnectionError):
    """The request never reached the server (no connection could be made)."""


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to host:port, one request at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self, timeout: float) -> None:
        if self._writer is not None and not self._writer.is_closing():
            return
        try:
            self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout)
        except (OSError, TimeoutError) as e:
            raise NotSent(f"connect to {self.host}:{self.port}: {e or type(e).__name__}") from None

    async def post(self, path: str, body: Any, timeout: float) -> tuple[int, Any]:
        """POST `body` as JSON to `path`; (HTTP status, decoded JSON answer)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self._connect(timeout)
        assert self._reader is not None and self._writer is not None
        data = json.dumps(body, separators=(",", ":")).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        try:
            self._writer.write(head + data)
            remaining = max(deadline - loop.time(), 0.001)
            status, raw = await asyncio.wait_for(_read_response(self._reader), remaining)
        except TimeoutError:
            await self.close()
            raise
        except (OSError, ValueError, asyncio.IncompleteReadError) as e:
            await self.close()
            raise ConnectionError(f"{type(e).__name__}: {e}") from None
        try:
            return status, json.loads(raw) if raw else {}
        except ValueError:
            await self.close()
            raise ConnectionError(f"not JSON (HTTP {status}): {raw[:120]!r}") from None

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    line = await reader.readline()
    if not line:
        raise ConnectionError("closed before an answer")
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError(f"bad status line {line[:80]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()  # the empty trailer
                return status, b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readline()
    raise ValueError("answer with neither Content-Length nor chunked encoding")


def get_json(host: str, port: int, path: str, timeout: float, headers: dict[str, str] | None = None) -> Any:
    """GET `path` and decode its JSON (blocking); OSError or ValueError when that fails. The answer's
    headers are added to `headers` if given."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        data = r.read()
        if headers is not None:
            headers.update(r.getheaders())
        if r.status != 200:
            raise ValueError(f"HTTP {r.status} from {host}:{port}{path}")
        return json.loads(data)
    except http.client.HTTPException as e:
        raise OSError(f"{type(e).__name__}: {e}") from None
    finally:
        conn.close()
