"""Simulated clients: each runs one operation at a time against a node, like a Jepsen worker.

A client sends its request to the leader it last heard of (or, sometimes, any
node), and records the invocation and completion in the history. Given a plan
(the operations of a stored schedule), it issues exactly those operations to
exactly those nodes, each no earlier than its recorded time, instead of drawing
them at random: that is how a schedule is replayed or shrunk. A reply of
`fail` is definite; no reply before the timeout is `info`, after which the
client reopens under a new process id (process + concurrency), as in Jepsen.
"""

from __future__ import annotations

import random
from typing import Any

from harness.sim.engine import MS
from harness.streams import stream
from workloads.register import RegisterGenerator, RegisterOp


class SimClient:
    def __init__(self, sim: Any, slot: int, rng: random.Random, generator: RegisterGenerator) -> None:
        self.sim = sim
        self.slot = slot
        self.name = f"c{slot}"  # its own network links, so its traffic never shifts another client's timing
        self.process = slot
        self.rng = rng
        self.generator = generator
        self.leader_hint: int | None = None
        self.current: tuple[int, RegisterOp, str] | None = None  # (request id, op, node name)
        self.final_keys: list[str] = []
        self.final_attempts = 0
        self.done = False
        self.ops = 0
        self.plan: list[dict[str, Any]] | None = None
        self.final_rng = stream("final", sim.opts.seed, slot)

    # ----------------------------------------------------------------- choosing
    def _target(self) -> Any:
        sim = self.sim
        ids = sim.node_ids
        # the final phase draws from its own stream, so it is the same whether or not the main
        # phase drew its operations at random or followed a plan
        rng = self.final_rng if sim.phase == "final" else self.rng
        if self.leader_hint is not None and rng.random() < 0.9:
            return sim.nodes[self.leader_hint]
        return sim.nodes[ids[rng.randrange(len(ids))]]

    # ----------------------------------------------------------------- running
    def start(self) -> None:
        if self.plan is not None:
            if self.plan:
                self.sim.sched.at(self.sim.main_start + self.plan[0]["at"], self.next_op)
            return
        self.sim.sched.after(self.rng.randint(0, self.sim.opts.think_ms * MS), self.next_op)

    def next_op(self) -> None:
        sim = self.sim
        if self.current is not None or self.done:
            return
        node = None
        if sim.phase == "main":
            if sim.sched.now >= sim.main_end:
                return
            if self.plan is not None:
                if not self.plan:
                    return
                step = self.plan[0]
                due = sim.main_start + step["at"]
                if sim.sched.now < due:
                    sim.sched.at(due, self.next_op)
                    return
                self.plan.pop(0)
                op = RegisterOp(step["f"], step["key"], step["value"])
                node = sim.nodes[int(step["node"][1:])]
            else:
                op = self.generator.next()
        elif sim.phase == "final":
            if not self.final_keys or sim.sched.now >= sim.final_end:
                self.done = True
                return
            op = self.generator.final_read(self.final_keys[0])
        else:
            return
        self.invoke(op, node)

    def invoke(self, op: RegisterOp, node: Any = None) -> None:
        sim = self.sim
        if node is None:
            node = self._target()
        if sim.phase == "main":
            sim.op_log.append(
                {
                    "at": sim.sched.now - sim.main_start,  # like the fault schedule: from the main phase's start
                    "client": self.slot,
                    "f": op.f,
                    "key": op.key,
                    "value": op.value,
                    "node": node.name,
                }
            )
        request_id = sim.new_request(self)
        self.current = (request_id, op, node.name)
        self.ops += 1
        sim.recorder.record(self.process, "invoke", op.f, op.value, key=op.key)
        sim.net.send(
            self.name, node.name, node.client_request, self, request_id, op.f, op.key, op.value, partitionable=False
        )
        sim.sched.after(sim.opts.timeout_ms * MS, self.timeout, request_id)

    def reply(self, request_id: int, reply: Any, node_name: str) -> None:
        if self.current is None or self.current[0] != request_id:
            return  # a late answer to an operation already given up on
        _, op, _ = self.current
        self.current = None
        if reply.leader_id is not None:
            self.leader_hint = reply.leader_id
        typ = reply.type
        value = reply.value if typ == "ok" else op.value
        if op.f == "cas" and typ == "ok":
            value = op.value
        self.sim.recorder.record(self.process, typ, op.f, value, key=op.key, node=node_name, error=reply.error)
        final = self.sim.phase == "final" and op.f == "read" and self.final_keys and op.key == self.final_keys[0]
        if final and typ == "ok":
            self.final_keys.pop(0)
        if typ == "fail" and reply.error == "not-leader" and reply.leader_id is None:
            self.leader_hint = None
        if typ == "info":
            self.process += self.sim.opts.concurrency  # the outcome is unknown: reopen as a new process
        self._later()

    def timeout(self, request_id: int) -> None:
        if self.current is None or self.current[0] != request_id:
            return
        _, op, node_name = self.current
        self.current = None
        self.sim.recorder.record(self.process, "info", op.f, op.value, key=op.key, node=node_name, error="timeout")
        self.process += self.sim.opts.concurrency  # a crashed client reopens under a new id
        self.leader_hint = None
        self._later()

    def _later(self) -> None:
        if self.plan is not None and self.sim.phase == "main":
            self.sim.sched.after(0, self.next_op)
            return
        think = self.sim.opts.think_ms * MS
        rng = self.final_rng if self.sim.phase != "main" else self.rng
        self.sim.sched.after(rng.randint(0, 2 * think) if think else 0, self.next_op)
