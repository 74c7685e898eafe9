"""The register workload: keyed read/write/cas operations, checked for linearizability.

As Jepsen's linearizable-register test: values are small integers so that
compare-and-set often succeeds, and each key is retired after a bounded number
of operations so every key's history stays cheap to check. Written once for
every runtime: the generator, the sans-IO client (one `KvRequest` per operation
to one node; the transport of the runtime carries it) and the final reads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checkers.registry import Checking
from workloads import generator as gen
from workloads.protocol import Answer, Completion, Failure, Op, Request, Step

MODEL = "cas-register"


@dataclass(frozen=True)
class KvRequest:
    """read (value None), write (value v) or cas (value [expected, new]) of one key."""

    f: str
    key: str
    value: Any


@dataclass(frozen=True)
class KvReply:
    """A node's answer in history terms; `leader`: the node it names as leader, if any."""

    type: str
    value: Any = None
    error: str | None = None
    leader: str | None = None


@dataclass
class RegisterOp:
    f: str
    key: str
    value: Any


class RegisterGenerator:
    """Draws the next operation. `keys` keys are live at once; each lives for `ops_per_key` ops."""

    def __init__(self, rng: random.Random, keys: int = 4, ops_per_key: int = 120, values: int = 5) -> None:
        if keys < 1 or ops_per_key < 1 or values < 1:
            raise ValueError("keys, ops_per_key and values must be positive")
        self.rng = rng
        self.values = values
        self.ops_per_key = ops_per_key
        self._next_key = 0
        self.live: list[list[Any]] = []  # [name, ops issued]
        self.all_keys: list[str] = []
        for _ in range(keys):
            self._new_key()

    def _new_key(self) -> None:
        name = f"r{self._next_key}"
        self._next_key += 1
        self.live.append([name, 0])
        self.all_keys.append(name)

    def next(self) -> RegisterOp:
        rng = self.rng
        slot = rng.randrange(len(self.live))
        entry = self.live[slot]
        key = entry[0]
        entry[1] += 1
        if entry[1] >= self.ops_per_key:
            del self.live[slot]
            self._new_key()
        f = rng.choice(("read", "write", "cas"))
        if f == "read":
            return RegisterOp("read", key, None)
        if f == "write":
            return RegisterOp("write", key, rng.randrange(self.values))
        return RegisterOp("cas", key, [rng.randrange(self.values), rng.randrange(self.values)])


class RegisterClient:
    """One worker process's client: each operation is one request to one node.

    The node is the op's `node` if given (replays), else the leader last heard of (9 times in
    10) or a random node. A definite failure (`fail`, or a request that never left) is `fail`;
    no answer, or a node that cannot tell, is `info`.
    """

    def __init__(self, nodes: Sequence[str], rng: random.Random, timeout_s: float) -> None:
        self.nodes = list(nodes)
        self.rng = rng
        self.timeout_s = timeout_s
        self.leader: str | None = None
        self.op: Op | None = None
        self.node: str | None = None

    def choose(self) -> str:
        # always the same two draws, so a replayed op that names its node leaves the stream as it was
        leader_first, any_node = self.rng.random() < 0.9, self.nodes[self.rng.randrange(len(self.nodes))]
        return self.leader if self.leader is not None and leader_first else any_node

    def invoke(self, op: Op) -> Step:
        self.op = op
        chosen = self.choose()
        self.node = op.get("node") or chosen
        return Request(self.node, KvRequest(op["f"], op["key"], op.get("value")), self.timeout_s)

    def receive(self, answer: Answer) -> Step:
        op, node = self.op, self.node
        assert op is not None, "an answer without an operation"
        self.op = self.node = None
        if isinstance(answer, Failure):
            self.leader = None
            return Completion("info" if answer.sent else "fail", op.get("value"), answer.reason, node)
        r: KvReply = answer.body
        if r.leader is not None:
            self.leader = r.leader if r.leader in self.nodes else None
        elif r.type == "fail" and r.error == "not-leader":
            self.leader = None
        if r.type == "info":
            self.leader = None
        value = r.value if (r.type == "ok" and op["f"] == "read") else op.get("value")
        return Completion(r.type, value, r.error, node)


class Register:
    """Linearizable registers (cas-register per key): read / write / cas with small values."""

    name = "register"
    model = MODEL
    api = "kv"  # the client API it speaks (our nodes' KV listener)

    def __init__(
        self, nodes: Sequence[str], seed: int, *, timeout_s: float = 2.0, keys: int = 4, ops_per_key: int = 120
    ) -> None:
        self.nodes = sorted(nodes, key=lambda n: (len(n), n))
        self.seed = seed
        self.timeout_s = timeout_s
        self.ops = RegisterGenerator(random.Random(f"workload-{seed}"), keys, ops_per_key)

    def _next(self, ctx: gen.Context) -> Op:
        op = self.ops.next()
        return {"f": op.f, "key": op.key, "value": op.value}

    def options(self) -> dict[str, Any]:
        """Nothing beyond the seed: a stored run makes the same registers again."""
        return {}

    def setup(self) -> gen.Generator | None:
        return None

    def generator(self) -> gen.Generator:
        return gen.Fn(self._next)

    def final(self, keys: Sequence[str], threads: int) -> gen.Generator | None:
        """Each key read until a read succeeds; keys dealt round-robin to the client threads."""
        if not keys:
            return None
        per_thread = []
        for t in range(min(threads, len(keys))):
            reads = [
                gen.until_ok(gen.delay(0.1, gen.repeat({"f": "read", "key": k, "value": None})))
                for k in keys[t::threads]
            ]
            per_thread.append(gen.on_threads(lambda x, t=t: x == t, reads))
        return gen.any_of(*per_thread)

    def client(self, thread: int, process: int) -> RegisterClient:
        return RegisterClient(self.nodes, random.Random(f"client-{self.seed}-{thread}-{process}"), self.timeout_s)


@dataclass(frozen=True)
class RegisterOptions:
    """The register workload has no options of its own: its keys and values come from the seed."""

    def problem(self, nodes: int) -> str | None:
        """Nothing to refuse."""
        return None

    def checking(self) -> Checking:
        """Every key a linearizable compare-and-set register (Knossos' cas-register)."""
        return Checking(MODEL)

    def exercises(self) -> frozenset[str]:
        """The parts of a system its requests reach: the quorum, the KV state machine, the disks."""
        return frozenset({"raft", "kv", "storage"})


def make(nodes: Sequence[str], seed: int, options: RegisterOptions, timeout_s: float) -> Register:
    """The workload of a test (workloads.registry)."""
    return Register(nodes, seed, timeout_s=timeout_s)
