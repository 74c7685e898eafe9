"""The node process on its own: a one-voter quorum, SIGTERM, dump-log, refusals to start."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from nodes.raft import API_KEYS, DescribeQuorumRequest, DescribeQuorumResponse, Error, decode, encode
from nodes.runtime.client import ClientConnection
from nodes.runtime.kvclient import KvClient

from ._support import run

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[3]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        return s.getsockname()[1]


def single_node_config(tmp_path: Path) -> tuple[Path, int]:
    controller, client = free_port(HOST), free_port(HOST)
    config = tmp_path / "node.properties"
    config.write_text(
        "node.id=1\n"
        "process.roles=controller\n"
        f"controller.quorum.voters=1@{HOST}:{controller}\n"
        f"listeners=CONTROLLER://{HOST}:{controller},CLIENT://{HOST}:{client}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "controller.quorum.election.timeout.ms=50\n"
    )
    return config, client


def node(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nodes", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 10) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=5)
        raise AssertionError(f"node did not exit within {timeout}s: {err[-2000:]}") from None
    return proc.returncode, out, err


async def wait_writable(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    async with KvClient(HOST, port, timeout=1) as client:
        while time.monotonic() < deadline:
            if (await client.write("k", "v")).type == "ok":
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the node never accepted a write")


def test_single_node_serves_stops_on_sigterm_and_dumps(tmp_path: Path) -> None:
    config, client_port = single_node_config(tmp_path)
    proc = node("--config", str(config))
    try:
        run(wait_writable(client_port), timeout=15)
        second = node("--config", str(config))  # same directory: refused, the first keeps running
        code, _, err = finish(second)
        assert code == 1 and "in use by another node process" in err
        proc.send_signal(signal.SIGTERM)
        code, _, err = finish(proc)
        assert code == 0, err
        assert "is leader in epoch" in err and "stopped (exit code 0)" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    code, out, _ = finish(node("dump-log", "--config", str(config)))
    entries = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [e["offset"] for e in entries] == list(range(len(entries))) and len(entries) >= 2
    events = [json.loads(line) for line in (tmp_path / "data" / "events.jsonl").read_text().splitlines()]
    assert {"node": "n1", "type": "state", "role": "leader"}.items() <= next(
        e for e in events if e.get("role") == "leader"
    ).items()
    assert (tmp_path / "data" / "node.log").read_text().count("stopped (exit code 0)") == 1


def test_refuses_a_corrupt_quorum_state(tmp_path: Path) -> None:
    config, _ = single_node_config(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "quorum-state").write_text("{torn")
    code, _, err = finish(node("--config", str(config)))
    assert code == 1 and "quorum-state is corrupt" in err


def test_refuses_a_voter_set_other_than_the_recorded_one(tmp_path: Path) -> None:
    config, client_port = single_node_config(tmp_path)
    proc = node("--config", str(config))
    try:
        run(wait_writable(client_port), timeout=15)
    finally:
        proc.send_signal(signal.SIGTERM)
        finish(proc)
    assert json.loads((tmp_path / "data" / "quorum-state").read_text())["voters"] == [1]
    text = config.read_text()
    voters = next(line for line in text.splitlines() if line.startswith("controller.quorum.voters="))
    config.write_text(text.replace(voters, f"{voters},2@{HOST}:{free_port(HOST)}"))
    code, _, err = finish(node("--config", str(config)))
    assert code == 1, err
    assert "configured voter set [1, 2] differs from the voter set [1] recorded in the quorum state" in err


def test_answers_another_cluster_inconsistent_cluster_id_and_keeps_serving(tmp_path: Path) -> None:
    config, client_port = single_node_config(tmp_path)
    config.write_text(config.read_text() + "cluster.id=c-27\n")
    controller_port = int(config.read_text().split("controller.quorum.voters=1@")[1].split("\n")[0].rsplit(":", 1)[1])

    async def scenario() -> list[DescribeQuorumResponse]:
        await wait_writable(client_port)
        answers = []
        conn = ClientConnection(HOST, controller_port)
        try:
            for cluster in ("another-cluster", "c-27"):
                request = encode(DescribeQuorumRequest(cluster_id=cluster))
                answers.append(decode(bytes(await conn.send(API_KEYS[DescribeQuorumRequest], 0, request) or b"")))
        finally:
            await conn.close()
        async with KvClient(HOST, client_port, timeout=2) as kv:
            assert (await kv.write("k", "after")).type == "ok"
        return answers

    proc = node("--config", str(config))
    try:
        foreign, ours = run(scenario(), timeout=15)
    finally:
        proc.send_signal(signal.SIGTERM)
        code, _, err = finish(proc)
    assert code == 0, err
    assert isinstance(foreign, DescribeQuorumResponse) and foreign.error is Error.INCONSISTENT_CLUSTER_ID
    assert foreign.voters == () and foreign.leader_id == 1
    assert isinstance(ours, DescribeQuorumResponse) and ours.error is Error.NONE and len(ours.voters) == 1


def test_refuses_a_taken_port(tmp_path: Path) -> None:
    config, client_port = single_node_config(tmp_path)
    with socket.socket() as s:
        s.bind((HOST, client_port))
        s.listen()
        code, _, err = finish(node("--config", str(config)))
    assert code == 1 and "cannot bind" in err


def test_help_and_dump_of_an_empty_dir(tmp_path: Path) -> None:
    code, out, _ = finish(node("--help"))
    assert code == 0 and "--config" in out
    code, out, _ = finish(node("dump-log", "--dir", str(tmp_path)))
    assert code == 0 and out == ""
    code, _, err = finish(node("dump-log", "--dir", str(tmp_path / "missing")))
    assert code == 1 and "not a directory" in err
