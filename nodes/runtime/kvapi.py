"""The client listener's wire API: private Kafka api keys with compact JSON bodies.

Requests and responses use Kafka framing (request header v1, response header v0, api_version 0).

=====  ==================  ==========================================  ===============================
key    name                request body (UTF-8 JSON)                   response body
=====  ==================  ==========================================  ===============================
1000   KvRead              ``{"key": k}``                              KV reply
1001   KvWrite             ``{"key": k, "value": v}``                  KV reply
1002   KvCas               ``{"key": k, "value": [expected, new]}``    KV reply
1010   AdminDescribe       empty (or ``{}``)                           status object (JSON)
1011   AdminDumpLog        empty (or ``{}``)                           ``logs/<node>.jsonl`` text
=====  ==================  ==========================================  ===============================

A KV reply is ``{"type": "ok"|"fail"|"info", "value": …, "error": str|null, "leader": id|null,
"node": "n<id>"}`` in history terms (docs/formats.md "Register ops"): ``fail`` with ``error`` ``"not-leader"`` names
the leader the node knows; ``"bad-request"`` means the body was malformed. Any other api key
closes the connection.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

__all__ = [
    "ADMIN_DESCRIBE",
    "ADMIN_DUMP_LOG",
    "ADMIN_DUMP_PARTITIONS",
    "CLIENT_API_KEYS",
    "KV_CAS",
    "KV_READ",
    "KV_WRITE",
    "KvResult",
    "KvWireError",
    "OP_BY_KEY",
    "KEY_BY_OP",
    "decode_kv_reply",
    "decode_kv_request",
    "encode_json",
    "encode_kv_reply",
    "encode_kv_request",
]

KV_READ = 1000
KV_WRITE = 1001
KV_CAS = 1002
ADMIN_DESCRIBE = 1010
ADMIN_DUMP_LOG = 1011
ADMIN_DUMP_PARTITIONS = 1012  # a broker's committed partition batches, JSON {partition: [entries]}

OP_BY_KEY = {KV_READ: "read", KV_WRITE: "write", KV_CAS: "cas"}
KEY_BY_OP = {op: key for key, op in OP_BY_KEY.items()}
CLIENT_API_KEYS = frozenset({*OP_BY_KEY, ADMIN_DESCRIBE, ADMIN_DUMP_LOG, ADMIN_DUMP_PARTITIONS})
TYPES = ("ok", "fail", "info")


class KvWireError(ValueError):
    """A KV request or reply body is malformed."""


class KvResult(NamedTuple):
    """An operation's completion: ``(type, value, error, leader)``; unpacks as a 4-tuple."""

    type: str
    value: Any = None
    error: str | None = None
    leader: int | None = None


def encode_json(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _load(body: bytes | bytearray | memoryview) -> Any:
    try:
        return json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise KvWireError(f"body is not JSON: {exc}") from None


def encode_kv_request(f: str, key: str, value: Any = None) -> tuple[int, bytes]:
    """(api key, body) for ``read``/``write``/``cas``; cas takes ``value=[expected, new]``."""
    if f not in KEY_BY_OP:
        raise KvWireError(f"unknown op {f!r}")
    doc: dict[str, Any] = {"key": key}
    if f != "read":
        doc["value"] = list(value) if f == "cas" else value
    try:
        return KEY_BY_OP[f], encode_json(doc)
    except (TypeError, ValueError) as exc:
        raise KvWireError(f"value is not JSON-serialisable: {exc}") from None


def decode_kv_request(api_key: int, body: bytes | bytearray | memoryview) -> tuple[str, str, Any]:
    """(f, key, value) of a KV request; :class:`KvWireError` if malformed."""
    f = OP_BY_KEY.get(api_key)
    if f is None:
        raise KvWireError(f"api key {api_key} is not a KV operation")
    doc = _load(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("key"), str):
        raise KvWireError('expected an object with a string "key"')
    value = doc.get("value")
    if f == "cas" and (not isinstance(value, list) or len(value) != 2):
        raise KvWireError('cas needs "value": [expected, new]')
    return f, doc["key"], value


def encode_kv_reply(
    type_: str, value: Any = None, error: str | None = None, leader: int | None = None, node: str | None = None
) -> bytes:
    return encode_json({"type": type_, "value": value, "error": error, "leader": leader, "node": node})


def decode_kv_reply(body: bytes | bytearray | memoryview) -> KvResult:
    doc = _load(body)
    if not isinstance(doc, dict) or doc.get("type") not in TYPES:
        raise KvWireError(f"not a KV reply: {str(doc)[:80]}")
    leader = doc.get("leader")
    if leader is not None and (not isinstance(leader, int) or isinstance(leader, bool)):
        raise KvWireError(f"bad leader {leader!r}")
    error = doc.get("error")
    return KvResult(doc["type"], doc.get("value"), None if error is None else str(error), leader)
