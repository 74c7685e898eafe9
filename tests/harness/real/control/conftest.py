"""Fixtures for the control-interface tests (shared helpers live in tests/harness/real/backends/clusters.py)."""

from tests.harness.real.backends.clusters import node_image  # noqa: F401 - re-exported fixture
