"""etcd as a DB (harness.db.etcd): options, the v3 gateway translation, the HTTP client, the raft-status
events the epochs checker reads, and a short run against a real local etcd cluster."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from checkers.epochs import check_events
from harness.cli import build_parser
from harness.commands import test as test_command
from harness.core.argtypes import UsageError
from harness.core.spec import SpecError, TestSpec
from harness.db.base import Status
from harness.db.etcd import EtcdConnection, EtcdDB, role_of
from harness.db.etcd_http import HttpConnection, NotSent
from harness.real.backends.base import Host
from workloads.register import KvRequest

need_etcd = pytest.mark.needs("etcd")


def b64(x: object) -> str:
    return base64.b64encode(json.dumps(x).encode()).decode()


# --- options ------------------------------------------------------------------------------------


def test_spec_db_defaults_round_trip_and_refusals() -> None:
    plain = TestSpec(backend="docker")
    assert plain.db == "kraftwerk" and plain.to_json()["db"] == "kraftwerk" and plain.name == "register-docker"
    etcd = TestSpec.of(backend="docker", db="etcd", read="serializable")
    doc = etcd.to_json()
    assert doc["db"] == "etcd" and doc["etcd"] == {"etcd-read": "serializable"} and etcd.name == "register-etcd-docker"
    assert "kraftwerk" not in doc and "fsync-delay-ms" not in doc  # our nodes' options are not etcd's
    assert TestSpec.from_json(doc) == etcd
    assert TestSpec.from_json({**doc, "etcd": None, "etcd-read": "serializable"}) == etcd  # as runs stored it before
    for bad, words in [
        ({"backend": "sim", "db": "etcd"}, "--db etcd runs on --backend docker, netns or local"),
        ({"backend": "docker", "db": "etcd", "workload": "queue"}, "does not serve the 'kafka' client API"),
        ({"backend": "docker", "db": "etcd", "bugs": ("stale-read",)}, "--bug"),
        ({"backend": "docker", "db": "etcd", "lose_unsynced": True}, "no option.s. lose_unsynced"),
        ({"backend": "docker", "db": "mongo"}, "--db mongo: unknown"),
        ({"backend": "docker", "db": "etcd", "read": "stale"}, "--etcd-read stale: unknown"),
    ]:
        with pytest.raises(SpecError, match=words):
            TestSpec.of(**bad)


def test_cli_etcd_options_exit_254_naming_them(tmp_path: Path) -> None:
    parser = build_parser()
    args = parser.parse_args(["test", "--db", "etcd", "--backend", "sim", "--store", str(tmp_path)])
    assert "--db etcd" in (test_command.problem(args) or "")
    args = parser.parse_args(["test", "--db", "etcd", "--backend", "local", "--nemesis", "partition"])
    assert "--db etcd --backend local --nemesis partition" in (test_command.problem(args) or "")
    with pytest.raises(UsageError, match="--db"):
        parser.parse_args(["test", "--db", "mongo"])


# --- the v3 gateway translation -----------------------------------------------------------------


def test_register_requests_become_v3_gateway_calls() -> None:
    lin, ser = EtcdConnection({}, "linearizable"), EtcdConnection({}, "serializable")
    assert lin.body(KvRequest("read", "r1", None)) == ("/v3/kv/range", {"key": "cjE="})
    assert ser.body(KvRequest("read", "r1", None)) == ("/v3/kv/range", {"key": "cjE=", "serializable": True})
    assert lin.body(KvRequest("write", "r1", 3)) == ("/v3/kv/put", {"key": "cjE=", "value": b64(3)})
    path, txn = lin.body(KvRequest("cas", "r1", [3, 4]))
    assert path == "/v3/kv/txn"
    assert txn["compare"] == [{"key": "cjE=", "target": "VALUE", "result": "EQUAL", "value": b64(3)}]
    assert txn["success"] == [{"requestPut": {"key": "cjE=", "value": b64(4)}}]


def test_gateway_answers_in_history_terms() -> None:
    read, write, cas = KvRequest("read", "r1", None), KvRequest("write", "r1", 2), KvRequest("cas", "r1", [1, 2])
    r = EtcdConnection.reply
    assert r(read, 200, {"header": {}, "kvs": [{"key": "cjE=", "value": b64(4)}], "count": "1"}).value == 4
    assert r(read, 200, {"header": {}}).type == "ok" and r(read, 200, {"header": {}}).value is None
    assert r(write, 200, {"header": {}}).type == "ok"
    assert r(cas, 200, {"header": {}, "succeeded": True}).type == "ok"
    miss = r(cas, 200, {"header": {}})  # compared, value differs: definitely not swapped
    assert (miss.type, miss.error) == ("fail", "cas-mismatch")
    err = {"error": "etcdserver: request timed out", "code": 14}
    assert r(read, 503, err).type == "fail"  # a read changes nothing
    assert r(write, 503, err).type == "info" and r(cas, 503, err).type == "info"  # may have been committed


# --- the HTTP client ----------------------------------------------------------------------------


def test_http_client_content_length_chunked_timeout_and_refused() -> None:
    async def main() -> None:
        answers = [
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"a": 1}',
            b'HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"b"\r\n4\r\n: 2}\r\n0\r\n\r\n',
            None,  # never answers
        ]
        seen: list[bytes] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for answer in answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                seen.append(await reader.readexactly(length))
                if answer is None:
                    await asyncio.sleep(5)
                    return
                writer.write(answer)
                await writer.drain()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = HttpConnection("127.0.0.1", port)
        assert await conn.post("/v3/kv/range", {"key": "cjE="}, 2.0) == (200, {"a": 1})
        assert await conn.post("/v3/kv/put", {}, 2.0) == (400, {"b": 2})  # same keep-alive connection
        with pytest.raises(TimeoutError):
            await conn.post("/v3/kv/put", {}, 0.2)
        assert conn._writer is None  # closed: a late answer cannot answer the next request
        assert json.loads(seen[0]) == {"key": "cjE="}
        server.close()
        await server.wait_closed()
        with pytest.raises(NotSent):
            await HttpConnection("127.0.0.1", port).post("/", {}, 1.0)

    asyncio.run(main())


# --- raft status → events for the epochs checker ------------------------------------------------


def _db(n: int = 3) -> EtcdDB:
    hosts = [Host(f"n{i}", f"10.0.0.{i}", None, "/w") for i in range(1, n + 1)]  # type: ignore[arg-type]
    db = EtcdDB(hosts)
    db.ids = {f"{i:x}a": f"n{i}" for i in range(1, n + 1)}
    return db


def raft(member: int, term: int, state: str, lead: int, vote: int = 0) -> dict:
    return {"id": f"{member:x}a", "term": term, "raftState": state, "lead": f"{lead:x}a" if lead else "0",
            "vote": f"{vote:x}a" if vote else "0"}  # fmt: skip


def event(db: EtcdDB, name: str, raft_status: dict) -> dict:
    """The `state` event the status poller records for one raft status of member `name`."""
    return db.event_of(name, db.status_of(raft_status))


def test_raft_status_becomes_state_events() -> None:
    db = _db()
    assert role_of("StateLeader") == "leader" and role_of("StatePreCandidate") == "follower"
    assert db.status_of(raft(2, 5, "StateFollower", 1, 0)) == Status(5, "follower", "n1", None)
    assert event(db, "n1", raft(1, 4, "StateLeader", 1, 1)) == {
        "node": "n1", "type": "state", "epoch": 4, "role": "leader", "leader": "n1", "voted_for": "n1",
    }  # fmt: skip
    assert event(db, "n2", raft(2, 5, "StateCandidate", 0, 2)) == {
        "node": "n2", "type": "state", "epoch": 5, "role": "candidate", "voted_for": "n2",
    }  # fmt: skip
    assert db.name_of("0") is None and db.name_of("ffff") is None


def test_epochs_checker_reports_two_etcd_leaders_in_one_term() -> None:
    db = _db()
    fine = [
        event(db, "n1", raft(1, 2, "StateLeader", 1, 1)),
        event(db, "n2", raft(2, 2, "StateFollower", 1, 1)),
        event(db, "n2", raft(2, 3, "StateLeader", 2, 2)),
        event(db, "n1", raft(1, 3, "StateFollower", 2, 2)),
    ]
    assert check_events(fine)["valid"] is True
    split = [*fine, event(db, "n3", raft(3, 3, "StateLeader", 3, 3))]
    res = check_events(split)
    assert res["valid"] is False and "multiple-leaders" in res["anomaly-types"]
    twice = [
        *fine,
        event(db, "n3", raft(3, 3, "StateFollower", 2, 2)),
        event(db, "n3", raft(3, 3, "StateFollower", 1, 1)),
    ]
    assert "double-vote" in check_events(twice)["anomaly-types"]


# --- a real cluster -----------------------------------------------------------------------------


@need_etcd
@pytest.mark.slow
def test_local_etcd_register_under_kills_and_pauses_is_valid(tmp_path: Path) -> None:
    """A short run against three real etcd members on 127.0.0.x: valid, with etcd's logs and the polled
    raft states in the run directory."""
    from tests.harness.real import realtest

    test = realtest.valid_short_run_of(
        tmp_path, "etcd", [], "kill,pause,clock", "etcd.log", '"msg":"starting an etcd server"'
    )
    assert test["etcd"]["etcd-read"] == "linearizable"


def test_replay_of_an_etcd_run_needs_a_real_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    (tmp_path / "test.json").write_text(json.dumps({"db": "etcd", "backend": "docker", "workload": "register"}))
    assert main(["replay", str(tmp_path), "--backend", "sim"]) == 254
    assert "--db etcd runs on --backend docker, netns or local, not sim" in capsys.readouterr().err
