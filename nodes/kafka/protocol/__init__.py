"""Kafka request and response bodies for the APIs the broker serves, with frame helpers.

Each API has a request and a response dataclass (`ProduceRequest`, `FetchResponse`, …) with
`msg.encode(version) -> bytes` and `Cls.decode(body, version) -> Cls`. The registries below map
API keys to those classes; the `*_frame` helpers add the size prefix and the header, choosing
the header version with `header_versions` (usable as `nodes.runtime.framing`'s HeaderVersions).
"""

from __future__ import annotations

from nodes.runtime import framing
from nodes.runtime.framing import RequestHeader, ResponseHeader

from ..errors import ErrorCode
from ..versions import FIRST_FLEXIBLE, SUPPORTED, ApiKey, header_versions, is_flexible, is_supported
from .api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
    api_versions_response,
    unsupported_version_response,
)
from .create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from .fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchResponsePartition,
    FetchResponseTopic,
    FetchTopic,
    ForgottenTopic,
    LeaderIdAndEpoch,
    SnapshotId,
)
from .group import (
    Coordinator,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)
from .init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from .list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)
from .metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from .offset_for_leader_epoch import (
    EpochEndOffsetResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)
from .produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from .schema import Message, ProtocolError, Struct, UnsupportedVersionError, decode_message
from .txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopic,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnPartitionResult",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AddPartitionsToTxnTopic",
    "AddPartitionsToTxnTopicResult",
    "EndTxnRequest",
    "EndTxnResponse",
    "TXN_REQUESTS",
    "TXN_RESPONSES",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitRequestPartition",
    "TxnOffsetCommitRequestTopic",
    "TxnOffsetCommitResponse",
    "TxnOffsetCommitResponsePartition",
    "TxnOffsetCommitResponseTopic",
    "WritableTxnMarker",
    "WritableTxnMarkerPartitionResult",
    "WritableTxnMarkerResult",
    "WritableTxnMarkerTopic",
    "WritableTxnMarkerTopicResult",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "EpochEndOffsetResult",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "OffsetForLeaderPartition",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
    "Coordinator",
    "DescribedGroup",
    "DescribedGroupMember",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupRequest",
    "JoinGroupRequestProtocol",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeaveMemberResponse",
    "ListedGroup",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "MemberIdentity",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetCommitResponsePartition",
    "OffsetCommitResponseTopic",
    "OffsetFetchRequest",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequestTopic",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponsePartition",
    "OffsetFetchResponseTopic",
    "SyncGroupRequest",
    "SyncGroupRequestAssignment",
    "SyncGroupResponse",
    "GROUP_REQUESTS",
    "GROUP_RESPONSES",
    "EARLIEST_TIMESTAMP",
    "FIRST_FLEXIBLE",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "SUPPORTED",
    "AbortedTransaction",
    "ApiKey",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BatchIndexAndErrorMessage",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicConfigs",
    "CreatableTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "EpochEndOffset",
    "ErrorCode",
    "FetchPartition",
    "FetchRequest",
    "FetchResponse",
    "FetchResponsePartition",
    "FetchResponseTopic",
    "FetchTopic",
    "FinalizedFeatureKey",
    "ForgottenTopic",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LeaderIdAndEpoch",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "Message",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "PartitionProduceData",
    "PartitionProduceResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProtocolError",
    "RequestHeader",
    "ResponseHeader",
    "SnapshotId",
    "Struct",
    "SupportedFeatureKey",
    "TopicProduceData",
    "TopicProduceResponse",
    "UnsupportedVersionError",
    "api_versions_response",
    "decode_request",
    "decode_request_frame",
    "decode_response",
    "decode_response_frame",
    "encode_request_frame",
    "encode_response_frame",
    "header_versions",
    "is_flexible",
    "is_supported",
    "request_type",
    "response_type",
    "unsupported_version_frame",
    "unsupported_version_response",
]

GROUP_REQUESTS = (
    FindCoordinatorRequest,
    JoinGroupRequest,
    SyncGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ListGroupsRequest,
    DescribeGroupsRequest,
)
GROUP_RESPONSES = (
    FindCoordinatorResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    ListGroupsResponse,
    DescribeGroupsResponse,
)
TXN_REQUESTS = (
    AddPartitionsToTxnRequest,
    AddOffsetsToTxnRequest,
    EndTxnRequest,
    WriteTxnMarkersRequest,
    TxnOffsetCommitRequest,
)
TXN_RESPONSES = (
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    WriteTxnMarkersResponse,
    TxnOffsetCommitResponse,
)
REQUEST_TYPES: dict[int, type[Message]] = {
    cls.API_KEY: cls
    for cls in (
        ProduceRequest,
        FetchRequest,
        ListOffsetsRequest,
        MetadataRequest,
        ApiVersionsRequest,
        CreateTopicsRequest,
        InitProducerIdRequest,
        OffsetForLeaderEpochRequest,
        *GROUP_REQUESTS,
        *TXN_REQUESTS,
    )
}
RESPONSE_TYPES: dict[int, type[Message]] = {
    cls.API_KEY: cls
    for cls in (
        ProduceResponse,
        FetchResponse,
        ListOffsetsResponse,
        MetadataResponse,
        ApiVersionsResponse,
        CreateTopicsResponse,
        InitProducerIdResponse,
        OffsetForLeaderEpochResponse,
        *GROUP_RESPONSES,
        *TXN_RESPONSES,
    )
}


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


def request_type(api_key: int) -> type[Message]:
    """The request class for `api_key`; `UnsupportedVersionError` if we do not serve that API."""
    cls = REQUEST_TYPES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"{_name(api_key)} is not supported")
    return cls


def response_type(api_key: int) -> type[Message]:
    cls = RESPONSE_TYPES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"{_name(api_key)} is not supported")
    return cls


def decode_request(api_key: int, api_version: int, body: bytes | bytearray | memoryview) -> Message:
    """A request body for (api_key, api_version). Bytes after the body are ignored, as Kafka's broker
    ignores them (librdkafka 2.x sends 3 after an all-topics Metadata v12 request)."""
    return decode_message(request_type(api_key), body, api_version, trailing_ok=True)


def decode_response(api_key: int, api_version: int, body: bytes | bytearray | memoryview) -> Message:
    """A response body for (api_key, api_version)."""
    return response_type(api_key).decode(body, api_version)


def decode_request_frame(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Message]:
    """Header and body of one request frame (size prefix already removed, as `FrameDecoder` gives
    it). A body that cannot be decoded raises `ProtocolError` with `.header` set when the header
    itself was readable, so the caller can still answer: an unsupported ApiVersions version gets
    `unsupported_version_frame(header.correlation_id)`."""
    header, body = framing.decode_request(frame, header_versions)
    try:
        return header, decode_request(header.api_key, header.api_version, body)
    except ProtocolError as e:
        e.header = header
        raise


def decode_response_frame(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[ResponseHeader, Message]:
    """Header and body of one response frame (size prefix removed) to a request we sent at
    (api_key, api_version)."""
    header, body = framing.decode_response(frame, header_versions(api_key, api_version)[1])
    return header, decode_response(api_key, api_version, body)


def encode_request_frame(msg: Message, version: int, correlation_id: int, client_id: str | None = "kraftwerk") -> bytes:
    """A complete request frame: size prefix, header (v1 or v2) and body."""
    body = msg.encode(version)
    return framing.encode_request(
        msg.API_KEY,
        version,
        correlation_id,
        body,
        client_id=client_id,
        header_version=header_versions(msg.API_KEY, version)[0],
    )


def encode_response_frame(msg: Message, version: int, correlation_id: int) -> bytes:
    """A complete response frame: size prefix, header (v0, or v1 for flexible versions except
    ApiVersions) and body."""
    body = msg.encode(version)
    return framing.encode_response(correlation_id, body, header_version=header_versions(msg.API_KEY, version)[1])


def unsupported_version_frame(correlation_id: int) -> bytes:
    """The complete ApiVersions downgrade reply: header v0, v0 body with UNSUPPORTED_VERSION."""
    return framing.encode_response(correlation_id, unsupported_version_response(), header_version=0)
