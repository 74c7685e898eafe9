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

from harness import cluster_local

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
