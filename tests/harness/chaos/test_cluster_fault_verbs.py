"""`kraftwerk cluster pause|resume|partition|heal|clock|packet|status` on a cluster `cluster up` left running,
on local and docker: each verb is a separate process, the fault outlives it (held by the cluster's fault
keeper), `status` shows it, and a kafka-python producer feels it: a paused partition leader or a cut network
times a produce out, a packet delay slows every acks=all produce, and each recovers after `resume`/`heal`.
`down` heals and ends the keeper. Bad requests exit 254 naming what is wrong."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.chaos import keeper

if TYPE_CHECKING:
    from kafka import KafkaProducer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
BACKENDS = [
    pytest.param("local", marks=pytest.mark.needs("root")),  # partitions, clocks and packets on lo need root
    pytest.param("docker", marks=pytest.mark.needs("docker")),
]
EVERYONE_ALONE = {"n1": ["n2", "n3"], "n2": ["n1", "n3"], "n3": ["n1", "n2"]}


def kraftwerk(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def verb(directory: Path, *args: str) -> dict:
    done = kraftwerk("cluster", *args, "--dir", str(directory))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    directory = tmp_path / "cluster"
    up = kraftwerk("cluster", "up", "--backend", request.param, "--dir", str(directory), "--timeout", "60")
    assert up.returncode == 0, up.stderr
    try:
        yield directory, json.loads(up.stdout)["bootstrap"]
    finally:
        down = kraftwerk("cluster", "down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
        assert not keeper.running(directory)


def producer(bootstrap: str) -> KafkaProducer:
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=3000, retries=0)


def send_seconds(client: KafkaProducer, value: bytes) -> float | None:
    """Seconds one acks=all produce took, or None if it failed or timed out."""
    from kafka.errors import KafkaError

    started = time.monotonic()
    try:
        client.send("t", value).get(timeout=5)
    except KafkaError:
        return None
    return time.monotonic() - started


def close(client: KafkaProducer) -> None:
    from kafka.errors import KafkaError

    with contextlib.suppress(KafkaError):  # a batch still waiting on the fault
        client.close(timeout=0)


def until_produced(bootstrap: str, value: bytes, within: float = 30.0) -> float:
    """Seconds the first acks=all produce that succeeds took (a fresh producer for each try, so that no metadata
    or connection outlives a fault)."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            client = producer(bootstrap)
        except KafkaError:
            continue
        took = send_seconds(client, value)
        close(client)
        if took is not None:
            return took
    raise AssertionError(f"no produce succeeded within {within:g} s")


def ready_producer(bootstrap: str, within: float = 30.0) -> KafkaProducer:
    """A producer whose last acks=all produce succeeded. Partition leadership can still move for a while after a
    fault ends (the resumed node catches up and the controller settles), so a produce that fails here is retried
    with a fresh producer rather than taken as a fault."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        client = producer(bootstrap)
        if send_seconds(client, b"ready") is not None:
            return client
        close(client)
    raise AssertionError(f"no producer was ready within {within:g} s")


@pytest.mark.parametrize("cluster", BACKENDS, indirect=True)
def test_each_fault_verb_shows_in_status_and_a_client_feels_it(cluster: tuple[Path, str]) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    directory, bootstrap = cluster
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("t", num_partitions=1, replication_factor=3)])
    admin.close()
    until_produced(bootstrap, b"before")
    status = verb(directory, "status")
    assert status["faults"] == {} and status["leader"] in ("n1", "n2", "n3")
    (t0,) = status["partitions"]["t"]
    assert sorted(t0["isr"]) == ["n1", "n2", "n3"]

    # pause: the partition's leader stops answering; the fault outlives the command
    client = ready_producer(bootstrap)
    paused = verb(directory, "pause", "--topic", "t:0")
    assert paused["result"] == [t0["leader"]] and paused["faults"] == {"paused": t0["leader"]}
    assert verb(directory, "status")["nodes"][t0["leader"]] is None  # a paused node does not answer
    assert send_seconds(client, b"paused") is None
    close(client)
    assert verb(directory, "resume")["faults"] == {}
    until_produced(bootstrap, b"resumed")

    # partition: every node alone, so no follower fetches and an acks=all produce cannot complete
    client = ready_producer(bootstrap)
    cut = verb(directory, "partition", "--grudge", json.dumps(EVERYONE_ALONE))
    assert cut["faults"] == {"partition": "n1 | n2 | n3"}
    assert verb(directory, "status")["faults"] == {"partition": "n1 | n2 | n3"}
    assert send_seconds(client, b"cut") is None
    close(client)
    assert verb(directory, "heal")["faults"] == {}
    until_produced(bootstrap, b"healed")

    # packet: 400 ms on every link between nodes; an acks=all produce waits for a follower's fetch
    verb(directory, "packet", "--delay", "400")
    assert verb(directory, "status")["faults"] == {"packet": "delay"}
    slow = until_produced(bootstrap, b"delayed")
    assert slow >= 0.4, slow
    verb(directory, "heal")
    fast = min(until_produced(bootstrap, b"fast") for _ in range(3))
    assert fast < 0.4, fast

    # clock: the node's own wall clock reads 30 s ahead, measured on its host; the cluster keeps serving
    bumped = verb(directory, "clock", "--target", "n2", "--bump", "30000")
    assert bumped["result"] == {"n2": {"offset-ms": 30000.0, "rate": 1.0}}
    status = verb(directory, "status")
    assert status["faults"] == {"clock": "n2+30.0s"}
    assert abs(status["clock-offsets-ms"]["n2"] - 30000) < 1000 and abs(status["clock-offsets-ms"]["n1"]) < 1000
    until_produced(bootstrap, b"skewed")
    assert verb(directory, "clock", "--reset")["result"] == ["n2"]
    assert verb(directory, "status")["faults"] == {}

    # down heals what is still in force and ends the keeper (the fixture checks it is gone)
    verb(directory, "pause", "--target", "n3")
    assert keeper.running(directory)


def test_bad_requests_exit_254_naming_what_is_wrong(tmp_path: Path) -> None:
    nowhere = str(tmp_path / "none")
    for args, fragment in [
        (["pause", "--dir", nowhere], "no cluster in"),
        (["packet", "--dir", nowhere], "--loss, --delay"),
        (["partition", "--dir", nowhere, "--grudge", "[1]"], "--grudge"),
        (["partition", "--dir", nowhere, "--kind", "thirds"], "--kind"),
        (["clock", "--dir", nowhere], "--bump"),
        (["packet", "--dir", nowhere, "--loss", "120"], "--loss"),
    ]:
        done = kraftwerk("cluster", *args)
        assert done.returncode == 254, (args, done.stderr)
        assert fragment in done.stderr, (args, done.stderr)
    assert not (tmp_path / "none").exists()


@pytest.mark.needs("root")
def test_a_fault_the_cluster_cannot_take_and_an_unknown_node_are_refused(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    up = kraftwerk("cluster", "up", "--backend", "local", "--dir", str(directory), "--timeout", "60")
    assert up.returncode == 0, up.stderr
    try:
        done = kraftwerk("cluster", "pause", "--dir", str(directory), "--target", "n9")
        assert done.returncode == 254 and "unknown node" in done.stderr and "n9" in done.stderr
        done = kraftwerk("cluster", "pause", "--dir", str(directory), "--topic", "missing:0")
        assert done.returncode == 254 and "missing" in done.stderr
        assert verb(directory, "status")["faults"] == {}  # the keeper kept serving
    finally:
        assert kraftwerk("cluster", "down", "--dir", str(directory)).returncode == 0
    assert not keeper.running(directory)
