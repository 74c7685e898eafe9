"""The runner's nemesis: schedule events applied to real hosts, "leader" resolved when a fault fires.

`RunnerNemesis` is `harness.nemesis.real.RealNemesis` restricted to the fault packages the
test asked for (a test without `clock` needs no libfaketime, one without `partition` no
iptables), with a replaceable partition part (the local backend cuts loopback addresses in
one shared chain). `apply(op)` is the interpreter's nemesis handler: it resolves `leader`
targets through the nodes' AdminDescribe, applies the event in a worker thread, and returns
what to record in the history and in schedule.json.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.backends.base import Host
from harness.control import cleanup
from harness.nemesis import partitions
from harness.nemesis.real import RealNemesis
from harness.nemesis.real_common import NemesisError
from harness.nemesis.real_net import PartitionNemesis, describe_grudge
from harness.nemesis.real_process import SpecSource
from harness.nemesis.schedule import HEAL
from harness.runner.interpreter import Applied

LeaderSource = Callable[[], Awaitable[str | None]]


def parallel(*fns: Callable[[], object]) -> None:
    """Run blocking setup steps in threads at once; re-raise the first error once all are done."""
    if len(fns) <= 1:
        for fn in fns:
            fn()
        return
    with ThreadPoolExecutor(max_workers=len(fns), thread_name_prefix="setup") as pool:
        futures = [pool.submit(fn) for fn in fns]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]


class RunnerNemesis(RealNemesis):
    """RealNemesis over only the enabled packages (partition, kill, pause, clock)."""

    def __init__(
        self,
        hosts: Sequence[Host],
        daemons: SpecSource,
        packages: Sequence[str],
        *,
        leader: LeaderSource,
        rng: random.Random,
        partition: PartitionNemesis | None = None,
        serving: Callable[[Sequence[str]], Awaitable[object]] | None = None,
    ) -> None:
        super().__init__(hosts, daemons, rng=rng)
        self.packages = list(packages)
        self.find_leader = leader
        # if given, a `start` completes only once the restarted nodes answer (awaited with their names)
        self.serving = serving
        if partition is not None:
            self.partition = partition

    def enabled(self, package: str) -> bool:
        return package in self.packages

    # ------------------------------------------------------------------ life cycle
    def setup(self) -> RunnerNemesis:
        """Prepare the enabled parts on every host (iptables chains and faketime files at once)."""
        self._token = cleanup.register("runner nemesis", self.teardown)
        if self.process is not None:
            self.process.setup()
        steps = [self.partition.setup] if self.enabled("partition") else []
        steps += [self.clock.setup] if self.enabled("clock") else []
        parallel(*steps)
        return self

    def clock_env(self, host: Host) -> dict[str, str]:
        """The environment node processes need so the clock nemesis controls their wall clock
        (ClockNemesis.env, which also keeps libfaketime from stalling CPython's thread hand-over)."""
        if not self.enabled("clock"):
            return {}
        return self.clock.env(host)

    def heal_ops(self) -> list[dict[str, Any]]:
        """The events that undo every enabled package (the final phase's first step)."""
        return [{"f": HEAL[p], "value": None} for p in ("partition", "pause", "kill", "clock") if self.enabled(p)]

    def teardown(self) -> None:
        errors: list[BaseException] = []
        parts = [
            self.partition if self.enabled("partition") else None,
            self.process,
            self.clock if self.enabled("clock") else None,
        ]
        with cleanup.shielded():
            for part in parts:
                if part is None:
                    continue
                try:
                    part.teardown()
                except Exception as e:  # noqa: BLE001 - keep tearing down the other parts
                    errors.append(e)
            cleanup.unregister(self._token)
            self._token = None
        if errors:
            raise NemesisError(f"teardown incomplete: {'; '.join(map(str, errors))}") from errors[0]

    # ------------------------------------------------------------------ events
    def _resolve_targets(self, value: Any, leader: str | None) -> list[str]:
        if value == "leader" or value is None:
            return [leader if leader in self.names else self.rng.choice(self.names)]
        if value == "all":
            return list(self.names)
        if isinstance(value, str):
            return [value]
        return list(value)

    async def apply(self, op: dict[str, Any]) -> Applied:
        """Apply one schedule event; (value for the history, resolved value for schedule.json)."""
        f, value = op["f"], op.get("value")
        event: dict[str, Any] = {"f": f, "value": value}
        leader_partition = f == "start-partition" and isinstance(value, dict) and value.get("kind") == "leader"
        needs_leader = value == "leader" or leader_partition
        leader = await self.find_leader() if needs_leader else None
        if f in ("kill", "pause"):
            event["value"] = self._resolve_targets(value, leader)
        elif f == "start-partition" and isinstance(value, dict) and "grudge" not in value:
            kind = value.get("kind", "halves")
            event["value"] = {"kind": kind, "grudge": partitions.make(kind, self.names, self.rng, leader)}
        loop = asyncio.get_running_loop()
        recorded = await loop.run_in_executor(None, self.invoke, event)
        if f == "start" and self.serving is not None and recorded:
            await self.serving(list(recorded))
        return Applied(recorded, event["value"])

    def active(self) -> dict[str, Any]:
        """The faults in force right now (for the progress display)."""
        out: dict[str, Any] = {}
        if self.partition.active:
            comps = describe_grudge(self.partition.active, self.names)["components"]
            out["partition"] = " | ".join(",".join(c) for c in comps) if len(comps) > 1 else "one-way"
        if self.process is not None:
            if self.process.killed:
                out["killed"] = ",".join(sorted(self.process.killed))
            if self.process.paused:
                out["paused"] = ",".join(sorted(self.process.paused))
        skew = {n: o for n, o in self.clock.offsets.items() if o or self.clock.rates[n] != 1.0}
        if skew:
            out["clock"] = ",".join(f"{n}{o:+.1f}s" for n, o in sorted(skew.items()))
        return out
