"""Fixtures for the pipeline tests: one Spark session for the whole test session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A quiet local[1] session: UI off, 2 shuffle partitions, executors on this interpreter."""
    if shutil.which("java") is None:
        pytest.fail("Spark tests need Java 17 or 21 on PATH (apt-get install openjdk-17-jre-headless)")
    from checkers.pipeline.job import spark_session

    session = spark_session(
        "local[1]",
        app="kraftwerk-tests",
        shuffle_partitions=2,
        conf={"spark.rdd.compress": "false", "spark.shuffle.compress": "false"},
    )
    yield session
    session.stop()
