"""Nothing is left behind: after Ctrl-C in the middle of a faulted run, and after a SIGKILLed harness once
`python -m harness.real.backends down` has run — no container, namespace, iptables rule, faketime file or node
process of the cluster remains, and the history written so far is readable."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.history import read_jsonl
from tests.harness.real import realtest
from tests.harness.real.backends.clusters import need_faketime, node_image  # noqa: F401 - fixture
from tests.requirements import need

FAULTS = {"start-partition", "bump-clock"}  # iptables rules and faketime offsets in force
BACKENDS = [
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow], id="docker"),
    pytest.param("netns", marks=[pytest.mark.slow], id="netns"),
    pytest.param("local", marks=[pytest.mark.slow], id="local"),
]


def _start(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[subprocess.Popen[bytes], Path]:
    if kind in ("netns", "local"):
        need("root", "iptables")  # partitions
        need_faketime()
    else:
        request.getfixturevalue("node_image")
    log = (tmp_path / "kraftwerk.log").open("wb")
    # seed 5: the partition and the clock packages both fire within the first ~7 s
    proc = realtest.start_kraftwerk_test(
        tmp_path / "store", log, "--backend", kind, "--time-limit", "120", "--seed", "5", "--interval", "2"
    )
    return proc, tmp_path / "kraftwerk.log"


@pytest.mark.parametrize("kind", BACKENDS)
def test_ctrl_c_mid_run_heals_and_removes_everything(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    proc, log = _start(kind, tmp_path, request)
    try:
        run = realtest.wait_for_faults(tmp_path / "store", proc, FAULTS)
        _, cluster = realtest.cluster_of(run)
        assert realtest.leftovers(cluster), "the running cluster should be visible"
        code = realtest.interrupt(proc, signal.SIGINT, log=log)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130, log.read_text()[-3000:]
    assert "interrupted" in log.read_text()
    assert realtest.leftovers(cluster) == []
    history = read_jsonl(run / "history.jsonl")  # whatever was written is a valid history
    assert len(history.ops) > 20


@pytest.mark.parametrize("kind", BACKENDS)
def test_killed_harness_is_cleaned_up_by_backends_down(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    proc, log = _start(kind, tmp_path, request)
    try:
        run = realtest.wait_for_faults(tmp_path / "store", proc, FAULTS)
        _, cluster = realtest.cluster_of(run)
        code = realtest.interrupt(proc, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == -signal.SIGKILL
    assert realtest.leftovers(cluster), "a SIGKILLed harness cannot clean up after itself"
    down = subprocess.run(
        [sys.executable, "-m", "harness.real.backends", "down", "--backend", kind, "--cluster", cluster],
        cwd=realtest.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert down.returncode == 0, down.stderr
    assert cluster in down.stdout
    assert realtest.leftovers(cluster) == []
    assert len(read_jsonl(run / "history.jsonl").ops) > 20
