"""Sans-IO KRaft-style quorum core: a :class:`RaftNode` takes inputs plus ``now`` (int ns) and
returns effects; drivers (the asyncio runtime, the simulator) do all IO.

Modules: ``node`` (the core), ``state`` (role transition table, start-up rules), ``leader``
(high watermark, check-quorum), ``log`` (in-memory log + epoch cache), ``messages``/``codec``
(RPCs and their binary form), ``effects``, ``records``/``quorum_state`` (durable formats),
``timing``, ``events``, ``config``, ``errors``, ``bugs``.
"""

from .bugs import ALL_BUGS, RAFT_BUGS, validate_bugs
from .codec import CodecError, decode, encode
from .config import MS, RaftConfig
from .effects import (
    AppendLog,
    Committed,
    Effect,
    Event,
    Fatal,
    Flush,
    PersistQuorumState,
    Reply,
    Send,
    TruncateLog,
)
from .errors import Error
from .messages import (
    API_KEYS,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    ReplicaState,
    VoteRequest,
    VoteResponse,
    is_request,
)
from .node import RaftNode
from .quorum_state import (
    QuorumState,
    QuorumStateError,
    VoterSetMismatch,
    check_voters,
    decode_quorum_state,
    encode_quorum_state,
    with_repair,
)
from .records import Record, RecordError, RecoveryInfo, decode_record, digest, encode_record, encode_records, recover
from .state import Role

__all__ = [
    "ALL_BUGS",
    "API_KEYS",
    "AppendLog",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "CodecError",
    "Committed",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "Effect",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Error",
    "Event",
    "Fatal",
    "FetchRequest",
    "FetchResponse",
    "Flush",
    "MS",
    "Message",
    "PersistQuorumState",
    "QuorumState",
    "QuorumStateError",
    "VoterSetMismatch",
    "RAFT_BUGS",
    "RaftConfig",
    "RaftNode",
    "Record",
    "RecordError",
    "RecoveryInfo",
    "ReplicaState",
    "Reply",
    "Role",
    "Send",
    "TruncateLog",
    "VoteRequest",
    "VoteResponse",
    "decode",
    "check_voters",
    "decode_quorum_state",
    "decode_record",
    "digest",
    "encode",
    "encode_quorum_state",
    "encode_record",
    "encode_records",
    "is_request",
    "recover",
    "with_repair",
    "validate_bugs",
]
