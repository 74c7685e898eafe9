"""The workloads' transport to simulated nodes: a request body in, a reply (or a timeout) out.

`SimTransport.send(link, request, deliver)` carries a register `KvRequest` to the node's
`client_request` over the simulated network (on the client's own link, never partitioned from
the harness, as on real clusters) and calls `deliver` once: with `Reply(KvReply)` when the
node's answer arrives, or `Failure` when the request times out or the node closes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.sim.engine import MS
from workloads.protocol import Answer, Failure, Reply, Request
from workloads.register import KvReply, KvRequest


class _Outstanding:
    """One request in flight: what the simulation routes the node's reply (or its closing) to."""

    __slots__ = ("name", "deliver", "answered")

    def __init__(self, name: str, deliver: Callable[[Answer], None]) -> None:
        self.name = name  # the client's network link
        self.deliver = deliver
        self.answered = False

    def _answer(self, answer: Answer) -> None:
        if not self.answered:
            self.answered = True
            self.deliver(answer)

    def reply(self, request_id: int, effect: Any, node_name: str) -> None:
        leader = effect.leader_id
        self._answer(Reply(KvReply(effect.type, effect.value, effect.error, None if leader is None else f"n{leader}")))

    def closed(self, request_id: int) -> None:
        self._answer(Failure("closed", sent=True))

    def timeout(self) -> None:
        self._answer(Failure("timeout", sent=True))


class SimTransport:
    """Sends the requests of simulated clients to `sim`'s nodes."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim

    def send(self, link: str, request: Request, deliver: Callable[[Answer], None]) -> None:
        sim = self.sim
        body = request.body
        if not isinstance(body, KvRequest):
            raise TypeError(f"simulated nodes cannot serve a {type(body).__name__}")
        node = sim.nodes[int(request.node[1:])]
        pending = _Outstanding(link, deliver)
        request_id = sim.new_request(pending)
        sim.net.send(
            link, node.name, node.client_request, pending, request_id, body.f, body.key, body.value, partitionable=False
        )
        sim.sched.after(int(request.timeout_s * 1000) * MS, pending.timeout)
