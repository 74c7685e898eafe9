"""InitProducerId (key 22), versions 0-4: hands idempotent producers their (producer id, epoch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..versions import ApiKey
from .schema import INT16, INT32, INT64, STRING, Message, kf

__all__ = ["InitProducerIdRequest", "InitProducerIdResponse"]


@dataclass(slots=True)
class InitProducerIdRequest(Message):
    API_KEY: ClassVar[int] = ApiKey.INIT_PRODUCER_ID
    IS_REQUEST: ClassVar[bool] = True

    transactional_id: str | None = kf(STRING, nullable="0+", default=None)
    transaction_timeout_ms: int = kf(INT32)
    producer_id: int = kf(INT64, "3+", default=-1)
    producer_epoch: int = kf(INT16, "3+", default=-1)


@dataclass(slots=True)
class InitProducerIdResponse(Message):
    API_KEY: ClassVar[int] = ApiKey.INIT_PRODUCER_ID
    IS_REQUEST: ClassVar[bool] = False

    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    producer_id: int = kf(INT64, default=-1)
    producer_epoch: int = kf(INT16, default=-1)
