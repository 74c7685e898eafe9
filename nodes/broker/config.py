"""Broker and controller settings (Kafka's property names, milliseconds as in Kafka).

:data:`PROPERTY_KEYS` maps each honoured ``server.properties`` key to a :class:`BrokerConfig`
field; :meth:`BrokerConfig.from_properties` builds a config from such a mapping. Topic-level
overrides (``min.insync.replicas``, ``unclean.leader.election.enable``) are given in
CreateTopics ``configs`` and stored in the topic's metadata record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

PROPERTY_KEYS: dict[str, str] = {
    "min.insync.replicas": "min_insync_replicas",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "broker.session.timeout.ms": "broker_session_timeout_ms",
    "broker.heartbeat.interval.ms": "broker_heartbeat_interval_ms",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "default.replication.factor": "default_replication_factor",
    "num.partitions": "num_partitions",
    "replica.fetch.wait.max.ms": "replica_fetch_wait_max_ms",
    "replica.fetch.min.bytes": "replica_fetch_min_bytes",
    "replica.fetch.max.bytes": "replica_fetch_max_bytes",
    "replica.fetch.response.max.bytes": "replica_fetch_response_max_bytes",
    "replica.fetch.backoff.ms": "replica_fetch_backoff_ms",
    "request.timeout.ms": "request_timeout_ms",
}
"""``server.properties`` key -> :class:`BrokerConfig` field."""

TOPIC_CONFIG_KEYS = frozenset({"min.insync.replicas", "unclean.leader.election.enable"})
"""Topic-level overrides accepted by CreateTopics (anything else is INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Defaults follow Kafka except ``request_timeout_ms`` (Kafka 30000): this core learns that
    a broker-to-broker or broker-to-controller message was lost only by its timeout, so it is
    short enough for a simulated partition to heal quickly."""

    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    broker_session_timeout_ms: int = 9_000
    broker_heartbeat_interval_ms: int = 2_000
    unclean_leader_election_enable: bool = False
    default_replication_factor: int = 1
    num_partitions: int = 1
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1_000
    request_timeout_ms: int = 3_000
    producer_id_block_size: int = 1_000  # producer ids per AllocateProducerIds block (as Kafka)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "unclean_leader_election_enable":
                if not isinstance(value, bool):
                    raise ValueError(f"BrokerConfig.{f.name} must be a bool, got {value!r}")
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"BrokerConfig.{f.name} must be an int, got {value!r}")
            floor = 0 if f.name == "replica_fetch_wait_max_ms" else 1
            if value < floor:
                raise ValueError(f"BrokerConfig.{f.name} must be >= {floor}, got {value!r}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: BrokerConfig | None = None) -> BrokerConfig:
        """Read the keys of :data:`PROPERTY_KEYS` from ``props`` (other keys are ignored: the
        node process validates its whole file). Raises ValueError naming a bad key."""
        changes: dict[str, object] = {}
        for key, name in PROPERTY_KEYS.items():
            if key not in props:
                continue
            text = str(props[key]).strip()
            if name == "unclean_leader_election_enable":
                changes[name] = parse_bool(key, text)
            else:
                try:
                    changes[name] = int(text)
                except ValueError:
                    raise ValueError(f"{key}: not an integer: {text!r}") from None
        try:
            return replace(base or cls(), **changes)
        except ValueError as exc:
            name = str(exc).split()[0].removeprefix("BrokerConfig.")
            key = next((k for k, n in PROPERTY_KEYS.items() if n == name), name)
            raise ValueError(f"{key}: {exc}") from None


def parse_bool(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{key}: expected true or false, got {text!r}")
    return lowered == "true"
