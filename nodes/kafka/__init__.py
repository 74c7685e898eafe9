"""Kafka wire protocol for the broker: CRC-32C, record batch v2, request/response codecs.

Standard library only. `crc32c` and `records` handle record batches; `protocol` holds the
request and response dataclasses with their per-version codecs; `errors` the error codes;
`versions` the supported API version ranges and header versions.
"""
