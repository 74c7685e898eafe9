"""The register workload's sans-IO client and its registry entry (no runtime involved)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from workloads import registry
from workloads.protocol import Completion, Failure, Reply, Request
from workloads.register import KvReply, KvRequest, Register, RegisterClient

NODES = ["n1", "n2", "n3"]


def client(seed: int = 0) -> RegisterClient:
    return RegisterClient(NODES, random.Random(seed), timeout_s=2.0)


def test_an_op_is_one_request_and_its_answer_the_completion() -> None:
    c = client()
    step = c.invoke({"f": "read", "key": "r1", "value": None, "node": "n3"})
    assert step == Request("n3", KvRequest("read", "r1", None), 2.0)
    assert c.receive(Reply(KvReply("ok", 4, None, "n2"))) == Completion("ok", 4, None, "n3")
    step = c.invoke({"f": "write", "key": "r1", "value": 2})
    assert isinstance(step, Request) and step.body == KvRequest("write", "r1", 2)
    assert c.receive(Reply(KvReply("ok", None))) == Completion("ok", 2, None, step.node)  # the value written


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Failure("connect-failed: refused", sent=False), "fail"),  # never left: certainly did not happen
        (Failure("timeout", sent=True), "info"),
        (Reply(KvReply("info", None, "leadership-lost")), "info"),
        (Reply(KvReply("fail", None, "cas-mismatch")), "fail"),
    ],
)
def test_outcomes(answer: Reply | Failure, expected: str) -> None:
    c = client()
    c.invoke({"f": "cas", "key": "r0", "value": [1, 2], "node": "n1"})
    done = c.receive(answer)
    assert isinstance(done, Completion) and done.type == expected and done.value == [1, 2] and done.node == "n1"


def test_the_leader_hint_is_followed_nine_times_in_ten_and_dropped_after_trouble() -> None:
    c = client(7)
    c.invoke({"f": "read", "key": "r0", "value": None, "node": "n1"})
    c.receive(Reply(KvReply("fail", None, "not-leader", "n2")))
    nodes = []
    for _ in range(200):
        step = c.invoke({"f": "read", "key": "r0", "value": None})
        assert isinstance(step, Request)
        nodes.append(step.node)
        c.receive(Reply(KvReply("ok", None, None, "n2")))
    assert 0.85 < nodes.count("n2") / len(nodes) < 0.97
    c.invoke({"f": "read", "key": "r0", "value": None})
    c.receive(Failure("timeout", sent=True))
    assert c.leader is None
    c.invoke({"f": "read", "key": "r0", "value": None})
    c.receive(Reply(KvReply("fail", None, "not-leader", "n9")))  # a leader not in this cluster: ignored
    assert c.leader is None


def test_a_replayed_op_naming_its_node_draws_as_a_generated_one() -> None:
    """So a replay's later choices (the final reads) are the stored run's."""
    a, b = client(3), client(3)
    a.invoke({"f": "read", "key": "r0", "value": None})
    b.invoke({"f": "read", "key": "r0", "value": None, "node": "n2"})
    assert a.rng.random() == b.rng.random()


def test_the_registry_makes_the_register_and_names_the_choices() -> None:
    w = registry.kind("register").make(["n2", "n10", "n1"], 5, registry.kind("register").options(), 2.0)
    assert isinstance(w, Register) and w.nodes == ["n1", "n2", "n10"] and w.model == "cas-register"
    assert w.setup() is None
    with pytest.raises(ValueError, match="unknown workload 'nope' \\(known: register, queue\\)"):
        registry.kind("nope")


def test_the_same_seed_draws_the_same_clients() -> None:
    a, b = Register(NODES, 9).client(1, 5), Register(NODES, 9).client(1, 5)
    ops = [{"f": "read", "key": "r0", "value": None}] * 20
    assert [a.invoke(o).node for o in ops] == [b.invoke(o).node for o in ops]  # type: ignore[union-attr]


def test_workloads_import_neither_the_harness_nor_the_nodes() -> None:
    for path in sorted(Path("workloads").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] in ("harness", "nodes") for n in names), (path, names)
