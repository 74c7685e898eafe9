"""Fixtures for the control-interface tests (shared helpers live in tests/harness/backends/clusters.py)."""

from tests.harness.backends.clusters import node_image  # noqa: F401 - re-exported fixture
