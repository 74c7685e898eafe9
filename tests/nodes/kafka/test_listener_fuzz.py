"""Robustness of a node process's Kafka listener: malformed frames, oversize size prefixes, bad CRCs,
unknown api keys and versions, truncated requests. Each bad connection gets an answer or is closed;
a well-behaved client on another connection keeps being served; the node's memory stays bounded."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.real.cluster_local import LOCAL_DEFAULTS, LocalCluster
from nodes.kafka import protocol as kp
from nodes.kafka.records import build_batch, encode_batch
from nodes.runtime import framing

TOPIC = "fuzz"
MAX_REQUEST = 1 << 20  # socket.request.max.bytes of the node under test


class Conn:
    """A blocking Kafka connection (our codecs) for the well-behaved client."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.correlation = 0

    def call(self, message: kp.Message, version: int) -> kp.Message:
        self.correlation += 1
        self.sock.sendall(kp.encode_request_frame(message, version, self.correlation))
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        header, body = kp.decode_response_frame(recv_exact(self.sock, size), message.API_KEY, version)
        assert header.correlation_id == self.correlation
        return body

    def close(self) -> None:
        self.sock.close()


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def records(*values: bytes) -> bytes:
    return encode_batch(build_batch([(None, v, (), 1) for v in values]))


def produce(data: bytes, acks: int = 1) -> kp.ProduceRequest:
    return kp.ProduceRequest(
        acks=acks, timeout_ms=1000, topic_data=[kp.TopicProduceData(TOPIC, [kp.PartitionProduceData(0, data)])]
    )


TEMPLATES: list[tuple[kp.Message, int]] = [
    (produce(records(b"a", b"bc")), 9),
    (produce(records(b"x")), 3),
    (produce(records(b"zero"), acks=0), 7),
    (
        kp.FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 16,
            topics=[kp.FetchTopic(TOPIC, [kp.FetchPartition(0, -1, 0, -1, -1, 1 << 16)])],
        ),
        12,
    ),
    (kp.MetadataRequest(topics=None), 12),
    (kp.MetadataRequest(topics=[kp.MetadataRequestTopic(name=TOPIC)]), 1),
    (kp.ListOffsetsRequest(topics=[kp.ListOffsetsTopic(TOPIC, [kp.ListOffsetsPartition(0, -1, -2)])]), 7),
    (kp.ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 3),
    (kp.InitProducerIdRequest(transaction_timeout_ms=100), 4),
]
FRAMES = [kp.encode_request_frame(m, v, 7) for m, v in TEMPLATES]


@st.composite
def bad_frames(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random", "sized", "header", "mutated", "oversize", "crc", "truncated"]))
    if kind == "random":
        return draw(st.binary(min_size=1, max_size=200))
    if kind == "sized":
        body = draw(st.binary(max_size=200))
        return struct.pack(">i", len(body)) + body
    if kind == "header":
        api_key = draw(st.sampled_from([0, 1, 2, 3, 18, 19, 22]) | st.integers(-(2**15), 2**15 - 1))
        version = draw(st.integers(-3, 20))
        body = draw(st.binary(max_size=120))
        hv = draw(st.sampled_from([1, 2]))
        return framing.encode_request(api_key, version, draw(st.integers(0, 2**31 - 1)), body, header_version=hv)
    if kind == "oversize":
        size = draw(st.sampled_from([MAX_REQUEST + 1, 2**31 - 1, -1, -(2**31)]))
        return struct.pack(">i", size) + draw(st.binary(max_size=64))
    frame = bytearray(draw(st.sampled_from(FRAMES)))
    if kind == "crc":  # damage the record batch of a v3 produce request (it ends the frame; the CRC covers it)
        frame = bytearray(FRAMES[1])
        frame[-1 - draw(st.integers(0, 10))] ^= draw(st.integers(1, 255))
        return bytes(frame)
    if kind == "truncated":
        return bytes(frame[: draw(st.integers(1, len(frame) - 1))])
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(4, len(frame) - 1))
        frame[i] ^= draw(st.integers(1, 255))
    return bytes(frame)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("fuzz") / "cluster"
    node = LocalCluster(directory, 1, properties={**LOCAL_DEFAULTS, "socket.request.max.bytes": str(MAX_REQUEST)})
    try:
        node.start_all()
        node.wait_ready(30)
        good = Conn(*node.addresses()[1])
        created = good.call(kp.CreateTopicsRequest(topics=[kp.CreatableTopic(TOPIC, 1, 1, [], [])]), 7)
        assert created.topics[0].error_code == 0  # type: ignore[attr-defined]
        for _ in range(100):
            if good.call(*TEMPLATES[0]).responses[0].partition_responses[0].error_code == 0:  # type: ignore[attr-defined]
                break
            time.sleep(0.05)
        good.close()
        yield node
    finally:
        node.close()


def send_and_drain(node: LocalCluster, data: bytes, *, wait: float = 2.0) -> None:
    """Send ``data`` on a fresh connection, half-close, read until the node closes it (or ``wait``)."""
    with socket.create_connection(node.addresses()[1], timeout=wait) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and sock.recv(65536):
                pass
        except (ConnectionError, TimeoutError, OSError):
            pass  # closed (reset) by the node: fine


def serves(conn: Conn) -> int:
    """The well-behaved client still gets answers; returns the offset its produce got."""
    versions = conn.call(kp.ApiVersionsRequest(), 3)
    assert versions.error_code == 0  # type: ignore[attr-defined]
    result = conn.call(produce(records(b"good")), 9).responses[0].partition_responses[0]  # type: ignore[attr-defined]
    assert result.error_code == 0, result
    return result.base_offset


@pytest.mark.slow
def test_fuzzed_frames_close_or_answer_and_the_node_keeps_serving(node: LocalCluster) -> None:
    good = Conn(*node.addresses()[1])
    last = [serves(good)]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bad_frames())
    def check(frame: bytes) -> None:
        send_and_drain(node, frame)
        offset = serves(good)
        assert offset > last[0]
        last[0] = offset

    try:
        check()
    finally:
        good.close()
    assert node.alive(1), "the node died"


@pytest.mark.slow
def test_memory_stays_bounded_across_thousands_of_bad_frames(node: LocalCluster) -> None:
    process = psutil.Process(node.pids()[1])
    crc = bytearray(FRAMES[1])  # v3 produce: the record batch ends the frame
    crc[-3] ^= 0x40
    bad = [
        bytes(crc),  # CORRUPT_MESSAGE answer
        framing.encode_request(77, 0, 1, b"\x00" * 50),  # unknown api key: closed
        framing.encode_request(1, 99, 1, b"junk"),  # unsupported version: closed
        FRAMES[3][:30],  # truncated fetch
        struct.pack(">i", 2**31 - 1) + b"x" * 100,  # oversize size prefix
        struct.pack(">i", MAX_REQUEST - 100) + b"y" * 200_000,  # a large frame that never completes
        framing.encode_request(18, 9, 1, b"\x00", header_version=2),  # ApiVersions downgrade reply
    ]
    good = Conn(*node.addresses()[1])
    try:
        for i in range(300):  # warm up allocator pools and caches
            send_and_drain(node, bad[i % len(bad)], wait=1.0)
        before = process.memory_info().rss
        start = time.monotonic()
        for i in range(3000):
            send_and_drain(node, bad[i % len(bad)], wait=1.0)
            if i % 500 == 0:
                serves(good)
        serves(good)
        growth = process.memory_info().rss - before
    finally:
        good.close()
    assert time.monotonic() - start < 90
    assert growth < 20 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB over 3000 bad frames"
    log = node.output(1)
    assert "Traceback" not in log and "internal error" not in log
