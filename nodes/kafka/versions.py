"""API keys, the version ranges this broker supports, and which versions are flexible.

The advertised ranges match one real broker release (Kafka 3.0: Produce 9, Fetch 12,
ListOffsets 7, InitProducerId 4, CreateTopics 7, OffsetForLeaderEpoch 4), except Metadata, which
goes to 12 (3.1; it only makes topic names nullable in responses). kafka-python infers the broker version from
these maxima (ListOffsets 7 → 3.0), so keep them consistent when changing one. Fetch stops at 12:
13+ names topics by id.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ApiKey",
    "FIRST_FLEXIBLE",
    "SUPPORTED",
    "header_versions",
    "is_flexible",
    "is_supported",
    "version_range",
]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


_NEVER = 1 << 15  # first flexible version of APIs that never became flexible

# First flexible version of every API (from the message schemas' "flexibleVersions"). Needed even
# for APIs we do not serve: the request header version depends on it, and we must read a header to
# answer (or log) anything.
FIRST_FLEXIBLE: dict[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 6,
    ApiKey.METADATA: 9,
    ApiKey.LEADER_AND_ISR: 4,
    ApiKey.STOP_REPLICA: 2,
    ApiKey.UPDATE_METADATA: 6,
    ApiKey.CONTROLLED_SHUTDOWN: 3,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 6,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 6,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.SYNC_GROUP: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 3,
    ApiKey.SASL_HANDSHAKE: _NEVER,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 5,
    ApiKey.DELETE_TOPICS: 4,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 2,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_ACLS: 2,
    ApiKey.CREATE_ACLS: 2,
    ApiKey.DELETE_ACLS: 2,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
    ApiKey.DESCRIBE_LOG_DIRS: 2,
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.CREATE_PARTITIONS: 2,
    ApiKey.CREATE_DELEGATION_TOKEN: 2,
    ApiKey.RENEW_DELEGATION_TOKEN: 2,
    ApiKey.EXPIRE_DELEGATION_TOKEN: 2,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: 2,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.OFFSET_DELETE: _NEVER,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_CLIENT_QUOTAS: 1,
}
# Everything from AlterPartitionReassignments (45) on is flexible from version 0, except OffsetDelete.
for _key in ApiKey:
    FIRST_FLEXIBLE.setdefault(_key, 0)

# Version ranges we decode, encode and advertise in ApiVersions (inclusive).
SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),  # 0-1 removed by KIP-896, like Produce 0-2
    # the group coordinator (Kafka 3.0's ranges)
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 8),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    # the transaction coordinator and partition leaders (Kafka 3.0's ranges)
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),  # v0 removed by KIP-896
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
}


def version_range(api_key: int) -> tuple[int, int] | None:
    """(min, max) supported versions of `api_key`, or None if we do not serve it."""
    return SUPPORTED.get(api_key)


def is_supported(api_key: int, api_version: int) -> bool:
    r = SUPPORTED.get(api_key)
    return r is not None and r[0] <= api_version <= r[1]


def is_flexible(api_key: int, api_version: int) -> bool:
    """True if (api_key, api_version) uses compact encodings and tagged fields. Unknown API keys
    are treated as never flexible."""
    return api_version >= FIRST_FLEXIBLE.get(api_key, _NEVER)


def header_versions(api_key: int, api_version: int) -> tuple[int, int]:
    """(request header version, response header version) for a request; a `HeaderVersions` hook
    for `nodes.runtime.framing`. Flexible versions use request header 2 and response header 1,
    except that ApiVersions responses always use header 0 (KIP-511). Works for any version, so an
    ApiVersions request newer than we support still parses (we answer it with a v0 error)."""
    if api_version >= FIRST_FLEXIBLE.get(api_key, _NEVER):
        return 2, 0 if api_key == ApiKey.API_VERSIONS else 1
    return 1, 0
