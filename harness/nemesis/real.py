"""The real-cluster nemesis: schedule events (harness.nemesis.schedule) applied to hosts of any backend.

Written once against the control interface, so docker, netns and SSH hosts get
the same faults. It understands exactly the events the simulator applies
(start-partition/stop-partition, kill/start, pause/resume, bump-clock/reset-clock)
plus strobe-clock and start-packet/stop-packet, and returns the value to record
in the history, as `harness.sim.cluster` does.

    with RealNemesis(hosts, daemons=spec_for) as nemesis:   # setup: chains, faketime files
        start node daemons with env=nemesis.clock.env(host)
        nemesis.invoke({"f": "start-partition", "value": {"kind": "halves", "grudge": {...}}})
        ...
    # on exit — normal, exception, Ctrl-C, SIGTERM — every fault is healed and removed
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from harness.backends.base import Host
from harness.control import cleanup
from harness.nemesis import partitions
from harness.nemesis.real_clock import ClockNemesis
from harness.nemesis.real_common import NemesisError
from harness.nemesis.real_net import PacketNemesis, PartitionNemesis, describe_grudge
from harness.nemesis.real_process import ProcessNemesis, SpecSource

FS = (
    "start-partition",
    "stop-partition",
    "kill",
    "start",
    "pause",
    "resume",
    "bump-clock",
    "strobe-clock",
    "reset-clock",
    "check-clock-offsets",
    "start-packet",
    "stop-packet",
)


class RealNemesis:
    """Partitions, packet faults, clock skew, kills and pauses on real hosts, healed on every way out.

    `daemons` (per-node DaemonSpec, or a function of the host) is needed for kill/start/pause/resume.
    `leader()` names the current leader for "leader" targets (else a random node is chosen).
    """

    def __init__(
        self,
        hosts: Sequence[Host],
        daemons: SpecSource | None = None,
        *,
        leader: Callable[[], str | None] | None = None,
        rng: random.Random | None = None,
        monotonic: bool = False,
        packet_method: str = "auto",
    ) -> None:
        self.hosts = list(hosts)
        self.names = [h.name for h in self.hosts]
        self.leader = leader
        self.rng = rng or random.Random(0)
        self.partition = PartitionNemesis(self.hosts)
        self.packet = PacketNemesis(self.hosts, method=packet_method)
        self.clock = ClockNemesis(self.hosts, monotonic=monotonic)
        self.process = ProcessNemesis(self.hosts, daemons) if daemons is not None else None
        self._token: int | None = None

    # ------------------------------------------------------------------ life cycle
    def setup(self) -> RealNemesis:
        """Prepare every host (iptables chain, faketime files); arm teardown for Ctrl-C/SIGTERM/exit."""
        self._token = cleanup.register("real nemesis", self.teardown)
        self.partition.setup()
        self.clock.setup()
        self.packet.setup()
        if self.process is not None:
            self.process.setup()
        return self

    def heal_all(self) -> dict[str, Any]:
        """Undo every fault (as the simulator does before recovery): network, packets, processes, clocks."""
        done: dict[str, Any] = {}
        self.partition.heal()
        self.packet.stop()
        if self.process is not None:
            done.update(self.process.heal())
        done["clock-reset"] = self.clock.reset()
        return done

    def teardown(self) -> None:
        """Heal and remove everything this nemesis put on the hosts; every part is attempted."""
        errors: list[BaseException] = []
        with cleanup.shielded():
            for part in (self.partition, self.packet, self.process, self.clock):
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

    def __enter__(self) -> RealNemesis:
        return self.setup()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    # ------------------------------------------------------------------ events
    def _targets(self, value: Any) -> list[str]:
        if value == "leader" or value is None:
            leader = self.leader() if self.leader is not None else None
            return [leader if leader in self.names else self.rng.choice(self.names)]
        if value == "all":
            return list(self.names)
        if isinstance(value, str):
            return [value]
        return list(value)

    def _processes(self) -> ProcessNemesis:
        if self.process is None:
            raise NemesisError("kill/pause faults need the daemons to control (RealNemesis(daemons=…))")
        return self.process

    def invoke(self, event: Mapping[str, Any]) -> Any:
        """Apply one schedule event {"f", "value"}; returns the value to record in the history."""
        f, value = event["f"], event.get("value")
        if f == "start-partition":
            if isinstance(value, Mapping) and "grudge" not in value and value.get("kind") == "leader":
                leader = self.leader() if self.leader is not None else None
                grudge = partitions.make("leader", self.names, self.rng, leader)
            elif isinstance(value, Mapping) and "grudge" in value:
                grudge = value["grudge"]
            elif isinstance(value, Mapping) and "kind" in value:
                grudge = partitions.make(value["kind"], self.names, self.rng)
            else:
                grudge = value  # a bare grudge, as Jepsen accepts
            return self.partition.start(grudge)
        if f == "stop-partition":
            self.partition.heal()
            return None
        if f == "kill":
            return self._processes().kill(self._targets(value))
        if f == "start":
            return self._processes().start(None if value is None else self._targets(value))
        if f == "pause":
            return self._processes().pause(self._targets(value))
        if f == "resume":
            return self._processes().resume(None if value is None else self._targets(value))
        if f == "bump-clock":
            return self.clock.apply(value)
        if f == "strobe-clock":
            self.clock.strobe(value)
            return value
        if f == "reset-clock":
            return self.clock.reset(None if value is None else self._targets(value))
        if f == "check-clock-offsets":
            return self.clock.check_offsets()
        if f == "start-packet":
            value = value or {}
            return self.packet.start(value.get("behaviours", {"delay": None}), value.get("nodes"), value.get("peers"))
        if f == "stop-packet":
            self.packet.stop()
            return None
        raise NemesisError(f"unknown nemesis op {f!r} (expected one of {', '.join(FS)})")

    def describe(self, grudge: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
        """Components, one-way cuts and majority-holding nodes of a grudge (default: the active one)."""
        return describe_grudge(self.partition.active if grudge is None else grudge, self.names)
