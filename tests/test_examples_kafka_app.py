"""examples/kafka-app: the application tests people copy run green on a local chaos cluster (kafka-python and
confluent-kafka consumers keep every acknowledged order), and the deliberately broken consumer (it commits
before processing) is caught by its test, which fails naming the orders it lost."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.needs("root")
def test_the_example_application_tests() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "examples/kafka-app"],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    out = r.stdout
    assert r.returncode == 1, out[-3000:] + r.stderr[-2000:]
    assert "PASSED examples/kafka-app/test_app.py::test_kafka_python_consumer_processes_every_order" in out
    assert "PASSED examples/kafka-app/test_app.py::test_confluent_consumer_processes_every_order" in out
    assert "FAILED examples/kafka-app/test_app.py::test_commit_before_processing_loses_orders" in out
    lost = re.search(r"(\d+) of (\d+) acknowledged orders were never processed: \[('\d+'(, )?)+", out)
    assert lost and int(lost.group(1)) > 0, out[-3000:]
    assert "1 failed, 2 passed" in out
