"""The DB protocol and its adapters (our nodes, …)."""
