"""The one Spark session of a test session (tests/conftest.py makes it a fixture for every test)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.requirements import need


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A quiet local[1] session: UI off, 2 shuffle partitions, executors on this interpreter."""
    need("java")
    from checkers.pipeline.job import spark_session

    session = spark_session(
        "local[1]",
        app="kraftwerk-tests",
        shuffle_partitions=2,
        conf={"spark.rdd.compress": "false", "spark.shuffle.compress": "false"},
    )
    yield session
    session.stop()
