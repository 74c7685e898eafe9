"""The asyncio driver: three NodeDrivers in one event loop on 127.0.0.1 ephemeral ports."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from checkers.epochs import check_events
from nodes.raft import (
    API_KEYS,
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    Error,
    FetchRequest,
    FetchResponse,
    RaftConfig,
    VoteRequest,
    VoteResponse,
    decode,
    encode,
)
from nodes.runtime.client import ClientConnection, DisconnectedError
from nodes.runtime.config import Endpoint, NodeConfig
from nodes.runtime.driver import EXIT_FATAL, NodeDriver, StartupError
from nodes.runtime.framing import encode_request
from nodes.runtime.kvapi import KV_WRITE
from nodes.runtime.kvclient import KvClient, KvClusterClient
from nodes.runtime.storage import LogFile

from ._support import run

HOST = "127.0.0.1"
FAST = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    election_backoff_max_ms=200,
    request_timeout_ms=150,
    fetch_max_wait_ms=75,
)


class Cluster:
    """In-process nodes; a restarted node keeps its directory and ports."""

    def __init__(
        self,
        base: Path,
        n: int = 3,
        *,
        bugs: Iterable[str] = (),
        raft: RaftConfig = FAST,
        wall_clock: Callable[[], int] | None = None,
        volatile: bool = False,
        fsync_delay_ms: int = 0,
        clock_source: str = "wall",
        connections_max_idle_ms: int | None = 600_000,
    ) -> None:
        self.base = base
        self.connections_max_idle_ms = connections_max_idle_ms
        self.clock_source = clock_source
        self.volatile = volatile
        self.fsync_delay_ms = fsync_delay_ms
        self.ids = list(range(1, n + 1))
        self.bugs = frozenset(bugs)
        self.raft = raft
        self.wall_clock = wall_clock
        self.drivers: dict[int, NodeDriver] = {}
        self.ports: dict[int, tuple[int, int]] = {}

    def config(self, node_id: int) -> NodeConfig:
        controller, client = self.ports.get(node_id, (0, 0))
        return NodeConfig(
            node_id=node_id,
            voters={i: Endpoint(HOST, self.ports.get(i, (0, 0))[0] or 1) for i in self.ids},
            controller_listener=Endpoint(HOST, controller),
            client_listener=Endpoint(HOST, client),
            log_dir=self.base / f"n{node_id}",
            raft=self.raft,
            bugs=self.bugs,
            seed=node_id,
            volatile_writes=self.volatile,
            fsync_delay_ms=self.fsync_delay_ms,
            clock_source=self.clock_source,
            connections_max_idle_ms=self.connections_max_idle_ms,
        )

    def _driver(self, node_id: int) -> NodeDriver:
        kwargs: dict[str, Any] = {}
        if self.wall_clock is not None:
            kwargs["wall_clock"] = self.wall_clock
        return NodeDriver(self.config(node_id), **kwargs)

    async def start(self) -> None:
        for i in self.ids:
            driver = self._driver(i)
            await driver.open()
            self.drivers[i] = driver
            self.ports[i] = (driver.controller_address.port, driver.client_address.port)
        for driver in self.drivers.values():
            for i, (port, _) in self.ports.items():
                driver.set_voter_address(i, HOST, port)
        for driver in self.drivers.values():
            driver.start()

    async def crash(self, node_id: int) -> None:
        await self.drivers[node_id].crash()

    async def restart(self, node_id: int) -> NodeDriver:
        assert self.drivers[node_id].stopped.is_set()
        driver = self._driver(node_id)
        await driver.open()
        for i, (port, _) in self.ports.items():
            driver.set_voter_address(i, HOST, port)
        driver.start()
        self.drivers[node_id] = driver
        return driver

    def live(self) -> list[NodeDriver]:
        return [d for d in self.drivers.values() if d.core is not None and not d.stopped.is_set()]

    async def wait_leader(self, timeout: float = 5.0, *, min_epoch: int = 0) -> NodeDriver:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            live = self.live()
            leaders = [d for d in live if d.core is not None and d.core.raft.is_leader]
            if len(leaders) == 1 and leaders[0].core is not None and leaders[0].core.raft.epoch >= min_epoch:
                leader = leaders[0]
                if all(d.core is not None and d.core.raft.leader_id == leader.node_id for d in live):
                    return leader
            await asyncio.sleep(0.01)
        raise AssertionError(f"no leader within {timeout}s: {[d.status() for d in self.live()]}")

    def kv(self, timeout: float = 3.0) -> KvClusterClient:
        return KvClusterClient({i: (HOST, client) for i, (_, client) in self.ports.items()}, timeout=timeout)

    async def close(self) -> None:
        await asyncio.gather(*(d.shutdown() for d in self.drivers.values()), return_exceptions=True)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for i in self.ids:
            path = self.base / f"n{i}" / "events.jsonl"
            out.extend(json.loads(line) for line in path.read_text().splitlines())
        return out


def with_cluster(tmp_path: Path, body: Callable[[Cluster], Any], timeout: float = 20.0, **kwargs: Any) -> Any:
    async def main() -> Any:
        cluster = Cluster(tmp_path, **kwargs)
        try:
            await cluster.start()
            return await body(cluster)
        finally:
            await cluster.close()

    return run(main(), timeout)


def dumps_agree(dumps: dict[str, list[dict[str, Any]]]) -> None:
    by_offset: dict[int, dict[str, Any]] = {}
    for entries in dumps.values():
        for entry in entries:
            assert by_offset.setdefault(entry["offset"], entry) == entry


# ---------------------------------------------------------------------------------------------


def test_elects_a_leader_and_serves_kv(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        async with c.kv() as kv:
            assert await kv.read("r") == ("ok", None, None, leader.node_id)
            assert await kv.write("r", {"v": 1}) == ("ok", {"v": 1}, None, leader.node_id)
            assert (await kv.cas("r", {"v": 1}, 2)).type == "ok"
            result = await kv.cas("r", {"v": 1}, 3)
            assert (result.type, result.error) == ("fail", "cas-mismatch")
            assert (await kv.read("r")).value == 2
            assert kv.last_node == leader.node_id
        # every node applied the same commands; followers catch up within a fetch round
        await asyncio.sleep(0.3)
        assert {d.core.machine.registers["r"] for d in c.live() if d.core is not None} == {2}
        dumps_agree({d.name: json_lines(d.dump()) for d in c.live()})

    with_cluster(tmp_path, body)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_non_leader_names_the_leader_and_admin_api(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        await asyncio.sleep(0.2)
        follower = next(d for d in c.live() if d is not leader)
        async with KvClient(HOST, follower.client_address.port, timeout=2) as client:
            result = await client.write("k", 1)
            assert (result.type, result.error, result.leader) == ("fail", "not-leader", leader.node_id)
            status = await client.describe()
            assert (
                status["role"] == "follower"
                and status["leader"] == leader.node_id
                and status["node"] == follower.node_id
            )
        async with KvClient(HOST, leader.client_address.port, timeout=2) as client:
            assert (await client.write("k", 1)).type == "ok"
            status = await client.describe()
            assert status["role"] == "leader" and {r["replica_id"] for r in status["replicas"]} == {1, 2, 3}
            dump = await client.dump_log()
            assert dump == json_lines(leader.dump()) and dump[-1]["offset"] == status["high_watermark"] - 1

    with_cluster(tmp_path, body)


def test_bad_frames_close_only_that_connection(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()

        async def closed_after(port: int, data: bytes) -> bool:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(data)
            await writer.drain()
            try:
                return await asyncio.wait_for(reader.read(), 10) == b""
            finally:
                writer.close()

        client_port, controller_port = leader.client_address.port, leader.controller_address.port
        assert await closed_after(client_port, struct.pack(">i", -5))  # negative size prefix
        assert await closed_after(client_port, encode_request(4242, 0, 1, b"{}"))  # unknown api key
        assert await closed_after(controller_port, encode_request(4242, 0, 1, b""))
        assert await closed_after(controller_port, encode_request(API_KEYS[VoteRequest], 0, 1, b"\x01garbage"))
        vote_from_stranger = encode(VoteRequest(99, 42, 0, 0))
        assert await closed_after(controller_port, encode_request(API_KEYS[VoteRequest], 0, 1, vote_from_stranger))
        # a malformed KV body is answered, not fatal
        conn = ClientConnection(HOST, client_port)
        try:
            reply = json.loads(bytes(await conn.send(KV_WRITE, 0, b"[1, 2]") or b""))
            assert reply["type"] == "fail" and reply["error"].startswith("bad-request")
        finally:
            await conn.close()
        async with c.kv() as kv:
            assert (await kv.write("still", "serving")).type == "ok"
        assert leader.core is not None  # still running (leadership itself may move on a loaded machine)

    with_cluster(tmp_path, body)


@pytest.mark.parametrize("idle_ms", [300, None])
def test_connections_max_idle_ms_closes_idle_client_connections(tmp_path: Path, idle_ms: int | None) -> None:
    """``connections.max.idle.ms`` reaches the listeners: a connection that sends nothing is closed
    after it (a client then reconnects; librdkafka also re-runs its coordinator lookups on that
    state change), and never when it is None (-1)."""

    async def body(c: Cluster) -> None:
        node = c.drivers[1]
        reader, writer = await asyncio.open_connection(HOST, node.client_address.port)
        try:
            closed = await asyncio.wait_for(reader.read(), 2.0) == b""
        except TimeoutError:
            closed = False
        finally:
            writer.close()
        assert closed is (idle_ms is not None)

    with_cluster(tmp_path, body, n=1, connections_max_idle_ms=idle_ms)


def test_describe_quorum_on_the_controller_listener(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        conn = ClientConnection(HOST, leader.controller_address.port)
        try:
            raw = await conn.send(API_KEYS[DescribeQuorumRequest], 0, encode(DescribeQuorumRequest()))
        finally:
            await conn.close()
        response = decode(bytes(raw or b""))
        assert isinstance(response, DescribeQuorumResponse)
        assert response.leader_id == leader.node_id and {v.replica_id for v in response.voters} == {1, 2, 3}

    with_cluster(tmp_path, body)


def test_a_peer_of_another_cluster_is_answered_inconsistent_cluster_id(tmp_path: Path) -> None:
    """Requests carry the cluster id over the wire; a Vote of a higher epoch from a peer configured with
    another cluster id is refused and changes nothing, and the cluster keeps serving."""

    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        assert leader.core is not None
        epoch = leader.core.raft.epoch
        voter, candidate = (d for d in c.live() if d is not leader)
        assert voter.core is not None
        voted = voter.core.raft.voted_for
        foreign = VoteRequest(epoch + 5, candidate.node_id, epoch, 10**6, cluster_id="another-cluster")
        ours = DescribeQuorumRequest(cluster_id="c-27")
        conn = ClientConnection(HOST, voter.controller_address.port)
        to_leader = ClientConnection(HOST, leader.controller_address.port)
        try:
            vote = decode(bytes(await conn.send(API_KEYS[VoteRequest], 0, encode(foreign)) or b""))
            raw = await to_leader.send(API_KEYS[DescribeQuorumRequest], 0, encode(ours))
        finally:
            await conn.close()
            await to_leader.close()
        assert isinstance(vote, VoteResponse) and vote.error is Error.INCONSISTENT_CLUSTER_ID
        assert not vote.vote_granted and vote.epoch == epoch
        described = decode(bytes(raw or b""))
        assert isinstance(described, DescribeQuorumResponse) and described.error is Error.NONE
        assert (voter.core.raft.epoch, voter.core.raft.voted_for) == (epoch, voted)
        async with c.kv() as kv:
            assert (await kv.write("k", "still serving")).type == "ok"
        assert leader.core.raft.epoch == epoch and leader.core.raft.is_leader

    with_cluster(tmp_path, body, raft=RaftConfig(**{**_fields(FAST), "cluster_id": "c-27"}))


def test_fatal_stops_the_node(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        assert leader.core is not None
        epoch = leader.core.raft.epoch
        victim, other = (d for d in c.live() if d is not leader)
        # a forged BeginQuorumEpoch naming a second leader in the same epoch: a safety violation
        conn = ClientConnection(HOST, victim.controller_address.port)
        forged = encode(BeginQuorumEpochRequest(epoch, other.node_id))
        try:
            with pytest.raises(DisconnectedError):
                await conn.send(API_KEYS[BeginQuorumEpochRequest], 0, forged, timeout=2)
        finally:
            await conn.close()
        await asyncio.wait_for(victim.stopped.wait(), 3)
        assert victim.exit_code == EXIT_FATAL
        async with c.kv() as kv:
            assert (await kv.write("k", "two nodes left")).type == "ok"

    with_cluster(tmp_path, body)


def test_a_slow_fsync_opens_the_window_where_a_killed_leader_loses_what_followers_hold(tmp_path: Path) -> None:
    """kraftwerk.fsync.delay.ms with volatile writes: the followers fetch an entry at once, the leader
    holds it unsynced for the delay, so a crash then loses it on the leader only (the window the
    restart-as-leader bug needs)."""

    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        async with c.kv(timeout=8.0) as kv:
            assert (await kv.write("k", 0)).type == "ok"  # commits after the leader's delayed fsync
            before = leader.log_file.end_offset
            pending = asyncio.create_task(kv.write("k", 1))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 1.0
            follower = next(d for d in c.live() if d is not leader)
            while follower.log_file.end_offset <= before and loop.time() < deadline:
                await asyncio.sleep(0.005)
            end = leader.log_file.end_offset
            assert follower.log_file.end_offset == end > leader.log_file.written_offset
            await c.crash(leader.node_id)
            pending.cancel()
            restarted = await c.restart(leader.node_id)
            assert restarted.log_file.end_offset < end  # the unsynced tail is gone from its disk
            assert follower.log_file.end_offset == end

    slow_disk = RaftConfig(election_timeout_ms=1500, fetch_timeout_ms=4000, request_timeout_ms=1000)
    with_cluster(tmp_path, body, volatile=True, fsync_delay_ms=800, raft=slow_disk)


@pytest.mark.parametrize("volatile", [False, True], ids=["page-cache", "volatile-writes"])
def test_leader_crash_then_restart(tmp_path: Path, volatile: bool) -> None:
    """A crashed leader (with volatile writes: losing whatever it had not fsynced, as on a power
    loss) rejoins; nothing acknowledged is lost and the committed logs agree."""

    async def body(c: Cluster) -> None:
        old = await c.wait_leader()
        assert old.core is not None
        assert old.log_file.hold is volatile and old.partitions.hold is volatile
        old_epoch = old.core.raft.epoch
        async with c.kv() as kv:
            for i in range(10):
                assert (await kv.write("x", i)).type == "ok"
            await c.crash(old.node_id)
            new = await c.wait_leader(min_epoch=old_epoch + 1)
            assert new.node_id != old.node_id
            for i in range(10, 20):
                assert (await kv.write("x", i)).type == "ok"
            restarted = await c.restart(old.node_id)
            await c.wait_leader()
            assert (await kv.write("x", "after-restart")).type == "ok"
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 3
            assert new.core is not None
            while restarted.committed_end() < new.core.raft.high_watermark and loop.time() < deadline:
                await asyncio.sleep(0.02)
            assert restarted.core is not None and restarted.core.machine.registers["x"] == "after-restart"
        dumps = {d.name: json_lines(d.dump()) for d in c.live()}
        dumps_agree(dumps)
        await c.close()
        result = check_events(c.events(), dumps)
        assert result["valid"] is True, result

    with_cluster(tmp_path, body, volatile=volatile)


def test_graceful_shutdown_hands_over(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        old = await c.wait_leader()
        assert old.core is not None
        epoch = old.core.raft.epoch
        loop = asyncio.get_running_loop()
        started = loop.time()
        await old.shutdown()
        assert old.exit_code == 0
        new = await c.wait_leader(min_epoch=epoch + 1)
        # the preferred successor stands at once instead of waiting out a fetch timeout
        assert loop.time() - started < FAST.fetch_timeout_ms / 1000 + 0.5
        assert new is not old
        states = [e for e in c.events() if e["node"] == old.name and e["type"] == "state"]
        # resigned, then stayed (graceful shutdown), maybe voting, until it followed its successor
        assert "resigned" in [e["role"] for e in states]
        assert (states[-1]["role"], states[-1]["leader"]) == ("follower", new.name)
        assert old.core is not None and old.core.raft.shutdown_status == "completed"

    with_cluster(tmp_path, body)


def test_wall_clock_jumps_do_not_move_monotonic_timers(tmp_path: Path) -> None:
    """clock.source=monotonic: wall-clock steps show in the events' times and move no timer."""
    hour = 3600 * 10**9
    skew = [0]

    def wall() -> int:
        return time.time_ns() + skew[0]

    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        assert leader.core is not None
        epoch = leader.core.raft.epoch
        for jump in (-hour, 2 * hour, -2 * hour):  # ends one hour behind
            skew[0] += jump
            await asyncio.sleep(0.3)  # two election timeouts at each setting
        assert leader.core.raft.is_leader and leader.core.raft.epoch == epoch
        assert all(d.core is not None and d.core.raft.epoch == epoch for d in c.live())
        async with c.kv() as kv:
            assert (await kv.write("k", 1)).type == "ok"
        last = json.loads((leader.config.log_dir / "events.jsonl").read_text().splitlines()[-1])
        assert last["type"] == "hw" and abs(last["time"] - (time.time_ns() - hour)) < 60 * 10**9

    with_cluster(tmp_path, body, wall_clock=wall, clock_source="monotonic")


def test_a_wall_clock_jump_fires_wall_timers(tmp_path: Path) -> None:
    """clock.source=wall (the default, Kafka's Time.milliseconds()): a step back delays every timer (no
    election while the cluster is healthy), a step forward fires the followers' fetch timeouts: an election."""
    hour = 3600 * 10**9
    skew = [0]

    def wall() -> int:
        return time.time_ns() + skew[0]

    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        assert leader.core is not None
        epoch = leader.core.raft.epoch
        skew[0] -= hour
        await asyncio.sleep(0.5)
        assert all(d.core is not None and d.core.raft.epoch == epoch for d in c.live())
        skew[0] += 2 * hour  # one hour ahead: every timer armed before is long past
        new = await c.wait_leader(timeout=5.0, min_epoch=epoch + 1)
        assert new.core is not None and new.core.raft.epoch > epoch
        async with c.kv() as kv:  # every node stood at once: a write may meet one more election
            results = [(await kv.write("k", i)).type for i in range(3)]
            assert "ok" in results, results

    with_cluster(tmp_path, body, wall_clock=wall)


def test_lazy_flush_holds_appends_in_the_process(tmp_path: Path) -> None:
    raft = RaftConfig(**{**_fields(FAST), "lazy_flush_interval_ms": 60_000})

    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        async with c.kv() as kv:
            for i in range(5):
                assert (await kv.write("k", i)).type == "ok"  # acknowledged without any fsync
        assert leader.core is not None
        acknowledged = leader.core.raft.high_watermark
        await c.crash(leader.node_id)
        on_disk, _ = LogFile(leader.config.log_dir).open()
        assert len(on_disk) < acknowledged, "held appends must die with the process"

    with_cluster(tmp_path, body, bugs=["lazy-flush"], raft=raft)


def _fields(config: RaftConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_restart_recovers_a_torn_log_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        async with c.kv() as kv:
            for i in range(5):
                assert (await kv.write("k", i)).type == "ok"
        victim = next(d for d in c.live() if d is not leader)
        await c.crash(victim.node_id)
        with (victim.config.log_dir / "raft.log").open("ab") as f:
            f.write(b"\x00\x00\x01\x00torn")
        with caplog.at_level(logging.INFO):
            restarted = await c.restart(victim.node_id)
        assert "cut 8 byte(s) of torn tail" in caplog.text
        await c.wait_leader()
        async with c.kv() as kv:
            assert (await kv.write("k", "next")).type == "ok"
        await asyncio.sleep(0.3)
        assert restarted.core is not None and restarted.core.machine.registers["k"] == "next"

    with_cluster(tmp_path, body)


def test_corrupt_quorum_state_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "quorum-state").write_text("{oops")

    async def main() -> None:
        driver = NodeDriver(Cluster(tmp_path).config(1))
        with pytest.raises(StartupError, match="quorum-state is corrupt"):
            await driver.open()
        # the directory lock was released: a fixed file lets the next attempt start
        (tmp_path / "n1" / "quorum-state").unlink()
        await driver.open()
        await driver.crash()

    run(main())


def test_client_maps_network_failures(tmp_path: Path) -> None:
    async def main() -> None:
        # nothing listens: definitely not sent
        async with KvClient(HOST, _closed_port(), timeout=1) as client:
            result = await client.write("k", 1)
            assert result.type == "fail" and result.error is not None and result.error.startswith("connect-failed")

        # a server that accepts and never answers: unknown outcome
        server = await asyncio.start_server(lambda r, w: None, HOST, 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with KvClient(HOST, port, timeout=0.2) as client:
                assert await client.write("k", 1) == ("info", None, "timeout", None)
        finally:
            server.close()

        # a server that hangs up after reading: unknown outcome
        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(10)
            writer.close()

        server = await asyncio.start_server(hang_up, HOST, 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with KvClient(HOST, port, timeout=1) as client:
                result = await client.write("k", 1)
                assert result.type == "info" and (result.error or "").startswith("disconnected")
                with pytest.raises(DisconnectedError):
                    await client.describe()
        finally:
            server.close()

    run(main())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def test_a_voter_answers_an_observers_fetch_and_refuses_its_vote(tmp_path: Path) -> None:
    """Node 9 is outside the voter set (a broker-only node): the leader answers its Fetch and lists it as an
    observer; a Vote, BeginQuorumEpoch or EndQuorumEpoch naming it closes the connection and changes nothing."""

    async def body(c: Cluster) -> None:
        leader = await c.wait_leader()
        assert leader.core is not None
        epoch = leader.core.raft.epoch
        port = leader.controller_address.port
        conn = ClientConnection(HOST, port)
        try:
            fetched = decode(
                bytes(await conn.send(API_KEYS[FetchRequest], 0, encode(FetchRequest(epoch, 9, 0, 0))) or b"")
            )
            described = decode(
                bytes(await conn.send(API_KEYS[DescribeQuorumRequest], 0, encode(DescribeQuorumRequest())) or b"")
            )
        finally:
            await conn.close()
        assert isinstance(fetched, FetchResponse) and fetched.error is Error.NONE
        assert isinstance(described, DescribeQuorumResponse)
        assert [o.replica_id for o in described.observers] == [9]
        assert {v.replica_id for v in described.voters} == {1, 2, 3}
        for request in (
            VoteRequest(epoch + 5, 9, epoch, 10**6),
            BeginQuorumEpochRequest(epoch + 5, 9),
            EndQuorumEpochRequest(epoch, 9, ()),
        ):
            conn = ClientConnection(HOST, port)
            try:
                with pytest.raises(DisconnectedError):
                    await conn.send(API_KEYS[type(request)], 0, encode(request), timeout=2)
            finally:
                await conn.close()
        assert leader.core.raft.is_leader and leader.core.raft.epoch == epoch
        async with c.kv() as kv:
            assert (await kv.write("k", "still leading")).type == "ok"

    with_cluster(tmp_path, body)
