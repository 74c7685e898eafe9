"""ApiVersions (key 18), versions 0-3, and the v0-format downgrade reply (KIP-511)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from nodes.runtime.primitives import DecodeError

from ..errors import ErrorCode
from ..versions import SUPPORTED, ApiKey
from .schema import BOOL, INT16, INT32, INT64, STRING, Array, Message, Struct, decode_message, kf

__all__ = [
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "FinalizedFeatureKey",
    "SupportedFeatureKey",
    "api_versions_response",
    "unsupported_version_response",
]


@dataclass(slots=True)
class ApiVersionsRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.API_VERSIONS
    IS_REQUEST: ClassVar[bool] = True

    client_software_name: str = kf(STRING, "3+")
    client_software_version: str = kf(STRING, "3+")


@dataclass(slots=True)
class ApiVersion(Struct):
    api_key: int = kf(INT16)
    min_version: int = kf(INT16)
    max_version: int = kf(INT16)


@dataclass(slots=True)
class SupportedFeatureKey(Struct):
    name: str = kf(STRING, "3+")
    min_version: int = kf(INT16, "3+")
    max_version: int = kf(INT16, "3+")


@dataclass(slots=True)
class FinalizedFeatureKey(Struct):
    name: str = kf(STRING, "3+")
    max_version_level: int = kf(INT16, "3+")
    min_version_level: int = kf(INT16, "3+")


@dataclass(slots=True)
class ApiVersionsResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.API_VERSIONS
    IS_REQUEST: ClassVar[bool] = False

    error_code: int = kf(INT16)
    api_keys: list[ApiVersion] = kf(Array(ApiVersion))
    throttle_time_ms: int = kf(INT32, "1+")
    supported_features: list[SupportedFeatureKey] = kf(Array(SupportedFeatureKey), "3+", tag=0)
    finalized_features_epoch: int = kf(INT64, "3+", tag=1, default=-1)
    finalized_features: list[FinalizedFeatureKey] = kf(Array(FinalizedFeatureKey), "3+", tag=2)
    zk_migration_ready: bool = kf(BOOL, "3+", tag=3)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> ApiVersionsResponse:
        """As Kafka's clients do: a broker that does not support `version` answers in v0 format
        with UNSUPPORTED_VERSION, so that error (or a body that only parses as v0) is read as v0."""
        cls.check_version(version)
        if version == 0:
            return decode_message(cls, data, 0)
        downgraded = len(data) >= 2 and int.from_bytes(data[:2], "big", signed=True) == ErrorCode.UNSUPPORTED_VERSION
        first, second = (0, version) if downgraded else (version, 0)
        try:
            return decode_message(cls, data, first)
        except DecodeError as e:
            try:
                return decode_message(cls, data, second)
            except DecodeError:
                raise e from None

    def ranges(self) -> dict[int, tuple[int, int]]:
        """{api_key: (min, max)} as advertised."""
        return {k.api_key: (k.min_version, k.max_version) for k in self.api_keys}


def api_versions_response(
    supported: Mapping[int, tuple[int, int]] | None = None, *, throttle_time_ms: int = 0
) -> ApiVersionsResponse:
    """The normal reply: every supported API with its range (default: `versions.SUPPORTED`)."""
    table = SUPPORTED if supported is None else supported
    keys = [ApiVersion(int(k), lo, hi) for k, (lo, hi) in sorted(table.items())]
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=throttle_time_ms)


def unsupported_version_response(supported: Mapping[int, tuple[int, int]] | None = None) -> bytes:
    """The body to send (always encoded as v0, header v0) when a client asks for an ApiVersions
    version we do not support: UNSUPPORTED_VERSION plus our ApiVersions range, so the client can
    retry with a version we know."""
    table = SUPPORTED if supported is None else supported
    lo, hi = table[ApiKey.API_VERSIONS]
    resp = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[ApiVersion(ApiKey.API_VERSIONS, lo, hi)]
    )
    return resp.encode(0)
