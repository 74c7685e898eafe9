"""Tests for the sans-IO raft core (nodes/raft)."""
