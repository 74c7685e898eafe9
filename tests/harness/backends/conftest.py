"""Fixtures for the backend tests."""

from tests.harness.backends.clusters import node_image  # noqa: F401 - re-exported fixture
