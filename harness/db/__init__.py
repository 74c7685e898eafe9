"""The DB protocol and its implementations: how a test installs, starts, faults and reaches a system."""
