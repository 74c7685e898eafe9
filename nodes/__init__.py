"""The system under test: a KRaft-style quorum and Kafka-style broker (standard library only)."""
