"""Tests for the register state machine (nodes/kv)."""
