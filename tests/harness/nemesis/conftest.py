"""Fixtures for the nemesis tests."""

from tests.harness.real.backends.clusters import node_image  # noqa: F401 - re-exported fixture
