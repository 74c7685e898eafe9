"""ZooKeeper as a DB (harness.db.zookeeper): its options, the probe's reading of `srvr`, the register client
on ZooKeeper's wire protocol (against a small fake server, for the outcomes a real one gives only under
faults), and a short run against a real local ensemble."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkers.epochs import check_events
from harness.cli import build_parser
from harness.commands import test as test_command
from harness.core.spec import SpecError, TestSpec
from harness.db import registry as dbs
from harness.db import zookeeper as zk
from harness.db.base import Status
from harness.real.backends.base import Host
from tests.requirements import lacking
from workloads.protocol import Failure, Reply, Request
from workloads.register import KvRequest

# --- options ------------------------------------------------------------------------------------


def test_spec_options_round_trip_and_refusals() -> None:
    spec = TestSpec.of(backend="netns", db="zookeeper", sync_reads=True)
    doc = spec.to_json()
    assert doc["db"] == "zookeeper" and doc["zookeeper"] == {"zk-sync-reads": True}
    assert spec.name == "register-zookeeper-netns" and TestSpec.from_json(doc) == spec
    assert TestSpec.of(backend="local", db="zookeeper").db_options == zk.ZooKeeperOptions(sync_reads=False)
    for bad, words in [
        ({"backend": "sim", "db": "zookeeper"}, "--db zookeeper runs on --backend netns or local, not sim"),
        ({"backend": "docker", "db": "zookeeper"}, "--db zookeeper runs on --backend netns or local, not docker"),
        ({"backend": "netns", "db": "zookeeper", "workload": "queue"}, "does not serve the 'kafka' client API"),
        ({"backend": "netns", "db": "zookeeper", "read": "serializable"}, "no option.s. read"),  # etcd's
    ]:
        with pytest.raises(SpecError, match=words):
            TestSpec.of(**bad)


def test_cli_flag_and_what_this_machine_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = build_parser()
    args = parser.parse_args(["test", "--db", "zookeeper", "--zk-sync-reads", "--backend", "netns"])
    assert args.zk_sync_reads is True
    args = parser.parse_args(["test", "--db", "zookeeper", "--backend", "local", "--nemesis", "partition"])
    assert "--db zookeeper --backend local" in (test_command.problem(args) or "")  # loopback, or no ZooKeeper
    assert dbs.kind("zookeeper").ports == 3 and dbs.kind("zookeeper").why_not("docker", ()) is None

    monkeypatch.setattr(zk, "ENVIRONMENT", str(tmp_path / "environment"))
    assert "no ZooKeeper here (apt-get install zookeeper" in (zk.why_not("netns", ()) or "")
    (tmp_path / "environment").write_text("JAVA=/usr/bin/java\n")
    monkeypatch.setattr(zk.shutil, "which", lambda _name: None)
    assert "no java here" in (zk.why_not("local", ()) or "")
    monkeypatch.setattr(zk.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert zk.why_not("netns", ["partition", "kill"]) is None and zk.why_not("local", ["kill", "pause"]) is None
    assert "loopback partitions cannot cut them" in (zk.why_not("local", ["partition"]) or "")


# --- the probe ----------------------------------------------------------------------------------


def srvr(mode: str, zxid: int) -> str:
    return (
        "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\nConnections: 1\n"
        f"Outstanding: 0\nZxid: {zxid:#x}\nMode: {mode}\nNode count: 5\n"
    )


def test_srvr_answers_become_statuses() -> None:
    led = {3: "n2"}
    assert zk.status_of(srvr("leader", 0x300000000), 3, led) == Status(3, "leader", None)  # the probe names it
    assert zk.status_of(srvr("leader", 0x20000001C), 3, led) is None  # its zxid is not in its epoch: in between
    # a follower's zxid stays in the last epoch with a transaction: the epoch is currentEpoch's, the leader inferred
    assert zk.status_of(srvr("follower", 0x200000007), 3, led) == Status(3, "follower", "n2")
    assert zk.status_of(srvr("follower", 0x400000000), 4, led) == Status(4, "follower", None)  # not seen leading
    assert zk.status_of("This ZooKeeper instance is not currently serving requests\n", 3, led) == Status(
        3, "unattached", None
    )
    assert zk.status_of(srvr("standalone", 0x100000000), 1, {}) == Status(1, "leader", None)
    assert zk.status_of("garbage", 3, led) is None and zk.status_of("Mode: leader\nZxid: ?\n", 3, led) is None


def _db(tmp_path: Path) -> zk.ZooKeeperDB:
    hosts = [Host(f"n{i}", f"10.0.0.{i}", None, str(tmp_path / f"n{i}")) for i in (1, 2, 3)]  # type: ignore[arg-type]
    return zk.ZooKeeperDB(hosts)


def test_config_and_command_line(tmp_path: Path) -> None:
    db = _db(tmp_path)
    cfg = db.config(db.hosts[1])
    assert "clientPort=2181\n" in cfg and "quorumListenOnAllIPs=true\n" in cfg and "admin.enableServer=false\n" in cfg
    assert cfg.endswith("server.1=10.0.0.1:2888:3888\nserver.2=10.0.0.2:2888:3888\nserver.3=10.0.0.3:2888:3888\n")
    local = zk.ZooKeeperDB(db.hosts, ports={"n1": (1, 2, 3), "n2": (4, 5, 6), "n3": (7, 8, 9)}, listen_any=False)
    cfg = local.config(db.hosts[0])
    assert "clientPort=1\nclientPortAddress=10.0.0.1\n" in cfg and "server.3=10.0.0.3:8:9" in cfg
    assert local.endpoints() == {"n1": ("10.0.0.1", 1), "n2": ("10.0.0.2", 4), "n3": ("10.0.0.3", 7)}
    argv = local.spec(db.hosts[0]).argv
    assert argv[-2:] == [zk.MAIN, f"{tmp_path}/n1/zoo.cfg"] and "-Dzookeeper.root.logger=INFO,CONSOLE" in argv


def test_epochs_checker_reports_two_zookeeper_leaders_in_one_epoch() -> None:
    def ev(node: str, status: Status | None) -> dict[str, Any]:
        assert status is not None
        return zk.ZooKeeperDB.event_of(node, status)

    fine = [
        ev("n1", Status(1, "leader", "n1")),
        ev("n2", zk.status_of(srvr("follower", 0), 1, {1: "n1"})),
        ev("n2", zk.status_of("not currently serving", 1, {})),
        ev("n2", Status(2, "leader", "n2")),
        ev("n1", zk.status_of(srvr("follower", 0x100000009), 2, {1: "n1", 2: "n2"})),
    ]
    assert check_events(fine)["valid"] is True
    split = [*fine, ev("n3", Status(2, "leader", "n3"))]
    result = check_events(split)
    assert result["valid"] is False and "multiple-leaders" in result["anomaly-types"]


# --- the client, against a fake server ----------------------------------------------------------


class FakeZooKeeper:
    """Enough of a ZooKeeper server for the register client: sessions, getData, setData (versions), create,
    sync. `before[op]` runs before an op is answered; returning "drop" closes the connection unanswered."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.ops: list[tuple[int, str]] = []
        self.before: dict[int, Callable[[], str | None]] = {}
        self.refuse = False

    @staticmethod
    def _string(body: bytes, at: int) -> tuple[bytes, int]:
        (n,) = struct.unpack_from(">i", body, at)
        return body[at + 4 : at + 4 + n], at + 4 + n

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def frame() -> bytes:
            (n,) = struct.unpack(">i", await reader.readexactly(4))
            return await reader.readexactly(n)

        def send(data: bytes) -> None:
            writer.write(struct.pack(">i", len(data)) + data)

        try:
            await frame()  # the connect request
            if self.refuse:  # as a member that is not serving: it closes the connection
                writer.close()
                return
            send(struct.pack(">iiq", 0, 4000, 1) + struct.pack(">i", 16) + b"\0" * 16 + b"\0")
            while True:
                req = await frame()
                xid, op = struct.unpack_from(">ii", req)
                if op == zk.PING:
                    send(struct.pack(">iqi", xid, 0, 0))
                    continue
                raw, at = self._string(req, 8)
                path = raw.decode()
                self.ops.append((op, path))
                hook = self.before.pop(op, None)
                if hook is not None and hook() == "drop":
                    writer.close()
                    return
                err, body = self.apply(op, path, req, at)
                send(struct.pack(">iqi", xid, 1, err) + body)
        except asyncio.IncompleteReadError:
            writer.close()

    def apply(self, op: int, path: str, req: bytes, at: int) -> tuple[int, bytes]:
        stat = lambda version: struct.pack(">qqqqiiiqiiq", 0, 0, 0, 0, version, 0, 0, 0, 0, 0, 0)  # noqa: E731
        if op == zk.SYNC:
            return 0, struct.pack(">i", len(path)) + path.encode()
        if op == zk.GET_DATA:
            if path not in self.nodes:
                return -101, b""
            data, version = self.nodes[path]
            return 0, struct.pack(">i", len(data)) + data + stat(version)
        data, at = self._string(req, at)
        if op == zk.SET_DATA:
            (version,) = struct.unpack_from(">i", req, at)
            if path not in self.nodes:
                return -101, b""
            if version not in (-1, self.nodes[path][1]):
                return -103, b""
            self.nodes[path] = (data, self.nodes[path][1] + 1)
            return 0, stat(self.nodes[path][1])
        if op == zk.CREATE:
            if path in self.nodes:
                return -110, b""
            self.nodes[path] = (data, 0)
            return 0, struct.pack(">i", len(path)) + path.encode()
        return -6, b""  # unimplemented


def _run(fake: FakeZooKeeper, sync_reads: bool, steps: list[tuple[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = zk.ZooKeeperTransport({"n1": ("127.0.0.1", port)}, sync_reads)()
        try:
            return [await conn.call(Request("n1", KvRequest(f, "r1", v), 2.0)) for f, v in steps]
        finally:
            await conn.close()
            server.close()

    return asyncio.run(main())


def bodies(answers: list[Any]) -> list[tuple[str, Any, str | None]]:
    return [(a.body.type, a.body.value, a.body.error) if isinstance(a, Reply) else a for a in answers]


def test_register_operations_on_the_wire() -> None:
    fake = FakeZooKeeper()
    answers = _run(fake, False, [("read", None), ("write", 3), ("write", 4), ("read", None), ("cas", [4, 1]),
                                 ("cas", [4, 2]), ("read", None)])  # fmt: skip
    assert bodies(answers) == [
        ("ok", None, None),  # absent: the register's initial value
        ("ok", 3, None),  # setData said no-node: created
        ("ok", 4, None),
        ("ok", 4, None),
        ("ok", [4, 1], None),  # getData 4 (version 1), setData with version 1
        ("fail", [4, 2], "cas-mismatch"),  # compared with 1
        ("ok", 1, None),
    ]
    assert [op for op, _ in fake.ops[:4]] == [zk.GET_DATA, zk.SET_DATA, zk.CREATE, zk.SET_DATA]
    assert zk.SYNC not in [op for op, _ in fake.ops] and json.loads(fake.nodes["/r1"][0]) == 1


def test_sync_reads_sync_first() -> None:
    fake = FakeZooKeeper()
    fake.nodes["/r1"] = (b"2", 0)
    assert bodies(_run(fake, True, [("read", None)])) == [("ok", 2, None)]
    assert fake.ops == [(zk.SYNC, "/"), (zk.GET_DATA, "/r1")]


def test_a_write_between_the_cas_read_and_its_set_is_a_definite_fail() -> None:
    fake = FakeZooKeeper()
    fake.nodes["/r1"] = (b"2", 5)
    fake.before[zk.SET_DATA] = lambda: fake.nodes.update({"/r1": (b"3", 6)}) or None  # another client's write
    assert bodies(_run(fake, False, [("cas", [2, 4])])) == [("fail", [2, 4], "cas-mismatch")]
    assert fake.nodes["/r1"] == (b"3", 6)


def test_lost_connections_are_info_and_refused_sessions_fail() -> None:
    fake = FakeZooKeeper()
    fake.before[zk.SET_DATA] = lambda: "drop"  # the write left, no answer: it may have happened
    first, again = _run(fake, False, [("write", 1), ("write", 2)])
    assert isinstance(first, Failure) and first.sent and "disconnected" in first.reason
    assert bodies([again]) == [("ok", 2, None)]  # a new session
    fake.refuse = True  # a member that is not serving closes the connection before the session starts
    (refused,) = _run(fake, False, [("cas", [1, 2])])
    assert isinstance(refused, Failure) and not refused.sent and "connect-failed" in refused.reason


# --- a real ensemble ----------------------------------------------------------------------------


@pytest.mark.slow
def test_local_zookeeper_with_sync_reads_under_kills_and_pauses_is_valid(tmp_path: Path) -> None:
    """A short run against three real ZooKeeper servers on 127.0.0.x: valid with --zk-sync-reads, with their
    logs and the polled states in the run directory."""
    from tests.harness.real import realtest

    why = dbs.kind("zookeeper").why_not("local", ("kill", "pause"))
    if why:
        lacking("ZooKeeper", why)
    test = realtest.valid_short_run_of(
        tmp_path, "zookeeper", ["--zk-sync-reads"], "kill,pause", "zookeeper.log", "QuorumPeerMain"
    )
    assert test["zookeeper"] == {"zk-sync-reads": True}
