"""The runner's nemesis: the nemesis interpreter over real hosts, as the client interpreter's nemesis handler.

`RunnerNemesis` is `harness.real.faults.RealNemesis` over only the fault packages the test
asked for, with a replaceable partition part (the local backend cuts loopback addresses in
one shared chain). `apply(op)` is the interpreter's nemesis handler: it asks the nodes for
the leader when the event needs one, has the nemesis interpreter apply the event in a worker
thread, and returns what to record in the history and in schedule.json.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from harness.nemesis.interpreter import Applied
from harness.real.backends.base import Host, PacketPart, PartitionPart
from harness.real.faults import RealNemesis
from harness.real.faults.common import parallel
from harness.real.faults.net import describe_grudge
from harness.real.faults.process import SpecSource

__all__ = ["LeaderSource", "RunnerNemesis", "parallel"]

LeaderSource = Callable[[], Awaitable[str | None]]


class RunnerNemesis(RealNemesis):
    """RealNemesis over only the enabled packages (partition, kill, pause, clock, packet)."""

    def __init__(
        self,
        hosts: Sequence[Host],
        daemons: SpecSource,
        packages: Sequence[str],
        *,
        leader: LeaderSource,
        rng: random.Random,
        partition: PartitionPart | None = None,
        serving: Callable[[Sequence[str]], Awaitable[object]] | None = None,
        data_dir: Callable[[Host], str] | None = None,
        packet: PacketPart | None = None,
        controller: LeaderSource | None = None,
        groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(
            hosts,
            daemons,
            rng=rng,
            packages=packages,
            partition=partition,
            data_dir=data_dir,
            packet=packet,
            groups=groups,
        )
        self.packages = list(packages)
        self.find_leader = leader
        # the active controller (the quorum leader), for "active-controller" targets (default: as `leader`)
        self.find_controller = controller or leader
        # if given, a `start` completes only once the restarted nodes answer (awaited with their names)
        self.serving = serving

    def enabled(self, package: str) -> bool:
        return package in self.packages

    def setup(self) -> RunnerNemesis:
        """Prepare the enabled parts; a packet nemesis needs tc netem or NFQUEUE on the hosts (else
        PacketFaultUnsupported, exit 254)."""
        self.faults.setup()
        if self.enabled("packet"):
            self.faults.require_packet()
        return self

    def clock_env(self, host: Host) -> dict[str, str]:
        """The environment node processes need so the clock nemesis controls their wall clock
        (ClockNemesis.env, which also keeps libfaketime from stalling CPython's thread hand-over)."""
        if not self.enabled("clock"):
            return {}
        return self.clock.env(host)

    def heal_ops(self) -> list[dict[str, Any]]:
        """The events that undo every enabled package and any fault still in force (the final phase's first step)."""
        return self.interpreter.heal_events(self.packages)

    async def apply(self, op: dict[str, Any]) -> Applied:
        """Apply one schedule event; (value for the history, resolved value for schedule.json)."""
        leader = await self.find_leader() if self.interpreter.needs_leader(op) else None
        controller = await self.find_controller() if self.interpreter.needs_controller(op) else None
        loop = asyncio.get_running_loop()
        applied = await loop.run_in_executor(None, self.interpreter.apply, op, leader, controller)
        if op["f"] in ("start", "stop-disk") and self.serving is not None and applied.recorded:
            await self.serving(list(applied.recorded))
        return applied

    def active(self) -> dict[str, Any]:
        """The faults in force right now (for the progress display)."""
        out: dict[str, Any] = {}
        state = self.interpreter
        if state.cut:
            comps = describe_grudge(state.cut, self.names)["components"]
            out["partition"] = " | ".join(",".join(c) for c in comps) if len(comps) > 1 else "one-way"
        if state.packets is not None:
            out["packet"] = ",".join(sorted(state.packets.get("behaviours", {})))
        if state.down:
            out["killed"] = ",".join(sorted(state.down))
        if state.disk_down:
            out["disk"] = ",".join(sorted(state.disk_down))
        if state.paused:
            out["paused"] = ",".join(sorted(state.paused))
        skew = {n: o for n, o in self.clock.offsets.items() if o or self.clock.rates[n] != 1.0}
        if skew:
            out["clock"] = ",".join(f"{n}{o:+.1f}s" for n, o in sorted(skew.items()))
        return out
