"""A 3-node `kraftwerk cluster up --backend local` cluster for the tests that point real Kafka
clients at our brokers, and the CLI they drive it with."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.real import cluster_local

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@contextlib.contextmanager
def local_cluster(
    parent: Path, nodes: int = 3, overrides: dict[str, str] | None = None
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Start a cluster under `parent` (node.properties ``overrides``, as `cluster up --override`); its
    directory and `cluster up`'s JSON. Always brought down."""
    directory = parent / "cluster"
    extra = [arg for key, value in (overrides or {}).items() for arg in ("--override", f"{key}={value}")]
    try:
        r = kraftwerk(
            "cluster", "up", "--backend", "local", "--nodes", str(nodes), "--dir", str(directory), *extra, timeout=180
        )
        assert r.returncode == 0, r.stderr
        yield directory, json.loads(r.stdout)
    finally:
        down = kraftwerk("cluster", "down", "--dir", str(directory), "--timeout", "10")
        if down.returncode != 0 and (directory / "cluster.json").exists():
            cluster_local.down(directory, timeout=5)


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    """Create ``name`` (replication factor 3) with kafka-python's admin client; asserts it worked."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        result = admin.create_topics([NewTopic(name, partitions, 3)])
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()
