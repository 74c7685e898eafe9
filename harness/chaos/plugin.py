"""The pytest plugin (entry point ``pytest11``: ``kraftwerk``): the ``kafka_chaos`` fixture.

``kafka_chaos`` is a `harness.chaos.cluster.ChaosCluster` started for the test and healed, stopped and
removed after it, whatever the test did. Its backend is ``local`` (processes on 127.0.0.x) unless
``--kafka-chaos-backend docker`` (or ``netns``) says otherwise; ``@pytest.mark.kafka_chaos(nodes=5,
bugs=["no-truncate"])`` sets a test's own. A backend or fault this machine cannot provide fails the test
with the reason (a chaos test that did not run is no pass).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.chaos.cluster import ChaosCluster

BACKENDS = ("local", "docker", "netns")
MARK = "kafka_chaos"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kraftwerk", "kraftwerk's kafka_chaos fixture")
    group.addoption(
        "--kafka-chaos-backend",
        choices=BACKENDS,
        default="local",
        help="where kafka_chaos clusters run: local processes (default), docker containers or network namespaces",
    )
    group.addoption(
        "--kafka-chaos-nodes", type=int, default=3, metavar="N", help="nodes of a kafka_chaos cluster (default 3)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}(backend=, nodes=, bugs=): this test's kafka_chaos cluster (see kraftwerk's docs)"
    )


@pytest.fixture
def kafka_chaos(request: pytest.FixtureRequest) -> Iterator[ChaosCluster]:
    """A kraftwerk Kafka cluster with faults at hand: ``bootstrap_servers``, ``kill``, ``start``, ``pause``,
    ``resume``, ``partition``, ``heal``, ``clock``, ``packet``, ``leader(topic, partition)``, ``status``."""
    from harness.chaos.cluster import ChaosCluster, ChaosError

    marker = request.node.get_closest_marker(MARK)
    options = dict(marker.kwargs) if marker is not None else {}
    backend = options.pop("backend", request.config.getoption("kafka_chaos_backend"))
    nodes = options.pop("nodes", request.config.getoption("kafka_chaos_nodes"))
    try:
        cluster = ChaosCluster(backend, nodes, **options)
        cluster.__enter__()
    except ChaosError as e:
        pytest.fail(f"kafka_chaos: {e}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.close()
