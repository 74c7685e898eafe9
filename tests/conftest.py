"""Shared pytest fixtures and paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.requirements import need
from tests.spark_fixture import spark  # noqa: F401 - the one session-scoped Spark session, for every test

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = ROOT / "tests" / "data" / "histories"  # the reference corpus (README.md there: sources, licences)

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def histories_dir() -> Path:
    if not HISTORIES.exists():
        pytest.fail(f"the reference histories are missing from {HISTORIES}")
    return HISTORIES


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.needs("docker", …)`: the components a test cannot run without (tests/requirements.py:
    missing, it is skipped, or under CI=true it fails)."""
    for mark in item.iter_markers("needs"):
        need(*mark.args)
