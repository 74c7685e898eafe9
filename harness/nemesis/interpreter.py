"""The nemesis interpreter: schedule events in, `Faults` port calls out, what to record back.

The only place that understands schedule events (`harness.nemesis.schedule`) and resolves
their targets: "leader" (through the leader the runtime names, see `needs_leader`),
"active-controller" (the quorum leader the runtime names, see `needs_controller`), "all",
"controllers" and "brokers" (the cluster's shape, `harness.core.shape`), node lists, and
partition kinds (`harness.nemesis.partitions`). It keeps track of what is
down, paused, cut, skewed and shaped, so healing everything is the same on every runtime.
The simulator (`harness.sim.cluster`) and the real runner (`harness.real.nemesis`) both
drive their own `Faults` through one of these.

    nemesis = NemesisInterpreter(faults, ["n1", "n2", "n3"], random.Random("nemesis-run-1"))
    leader = current_leader() if nemesis.needs_leader(event) else None
    controller = quorum_leader() if nemesis.needs_controller(event) else None
    applied = nemesis.apply(event, leader, controller)   # Applied(recorded=history, realised=schedule.json)
    for event in nemesis.heal_events(packages): nemesis.apply(event)
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.shape import ACTIVE_CONTROLLER, GROUPS
from harness.nemesis import partitions
from harness.nemesis.faults import DISK_FAULTS, Faults
from harness.nemesis.partitions import Grudge
from harness.nemesis.schedule import HEAL, HEAL_ORDER

FS = (
    "start-partition",
    "stop-partition",
    "kill",
    "start",
    "pause",
    "resume",
    "bump-clock",
    "strobe-clock",
    "rate-clock",
    "reset-clock",
    "start-packet",
    "stop-packet",
    "start-disk",
    "stop-disk",
)


@dataclass(frozen=True)
class Applied:
    """What a nemesis event did: the value for the history, the value for the schedule, an error."""

    recorded: Any
    realised: Any
    error: str | None = None


class NemesisInterpreter:
    """Applies schedule events to a `Faults` port, resolving targets once; tracks what is in force."""

    def __init__(
        self,
        faults: Faults,
        nodes: Sequence[str],
        rng: random.Random,
        groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.faults = faults
        self.names = list(nodes)
        # the "controllers" and "brokers" targets (harness.core.shape.Shape.groups; default: every node is both)
        self.groups = {g: list((groups or {}).get(g, self.names)) for g in GROUPS}
        self._controller: str | None = None  # the active controller of the event being applied
        # draws for partitions whose shape is only known when they fire ("leader", or a kind without a grudge)
        self.rng = rng
        self.down: set[str] = set()
        self.paused: set[str] = set()  # until resumed, even if killed in between (as the simulator always did)
        self.cut: Grudge = {}
        self.skewed: set[str] = set()
        self.packets: Any = None
        self.disk_down: set[str] = set()  # crashed by a disk fault, until stop-disk (or a start) brings them back

    # ------------------------------------------------------------------ targets
    @staticmethod
    def needs_leader(event: Mapping[str, Any]) -> bool:
        """Whether `apply` needs the current leader's name for this event."""
        f, value = event["f"], event.get("value")
        if f in ("kill", "pause"):
            return value in ("leader", None)
        if f == "start-partition":
            return isinstance(value, Mapping) and "grudge" not in value and value.get("kind") == "leader"
        if f == "start-packet":
            return isinstance(value, Mapping) and value.get("nodes") == "leader"
        if f == "start-disk":
            return isinstance(value, Mapping) and value.get("nodes", "leader") == "leader"
        if f in ("bump-clock", "strobe-clock", "rate-clock"):
            return isinstance(value, Mapping) and "leader" in value
        return value == "leader"

    @staticmethod
    def needs_controller(event: Mapping[str, Any]) -> bool:
        """Whether `apply` needs the active controller's name (the quorum leader) for this event."""
        f, value = event["f"], event.get("value")
        if f in ("start-packet", "start-disk"):
            return isinstance(value, Mapping) and ACTIVE_CONTROLLER in (value.get("nodes"), value.get("peers"))
        return value == ACTIVE_CONTROLLER

    def targets(self, spec: Any, leader: str | None) -> list[str]:
        """Node names for a target spec: "leader" (None: the leader) → the leader if one is known, else none;
        "active-controller" → the quorum leader given to `apply` if known, else none; "all" → every node;
        "controllers", "brokers" → those of the cluster's shape; a name or a list of names → those (unknown
        names are a ValueError)."""
        if spec == "leader" or spec is None:
            return [leader] if leader in self.names else []
        if spec == ACTIVE_CONTROLLER:
            return [self._controller] if self._controller in self.names else []
        if spec == "all":
            return list(self.names)
        if isinstance(spec, str) and spec in self.groups:
            return list(self.groups[spec])
        names = [spec] if isinstance(spec, str) else list(spec)
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise ValueError(f"unknown node(s) {', '.join(map(repr, unknown))} (nodes: {', '.join(self.names)})")
        return names

    def _in_order(self, nodes: Iterable[str]) -> list[str]:
        chosen = set(nodes)
        return [n for n in self.names if n in chosen]

    def _clock_targets(self, value: Any, leader: str | None) -> dict[str, Any]:
        """A clock fault's {node: parameters} with a "leader" key resolved to the leader (dropped when none is
        known; a named node's own entry wins); any other key that is not a node is a ValueError."""
        if not isinstance(value, Mapping):
            raise ValueError(f"a clock fault needs {{node: parameters}}, not {value!r}")
        named = {n: v for n, v in value.items() if n != "leader"}
        self.targets(list(named), leader)
        if "leader" in value:
            for n in self.targets("leader", leader):
                named.setdefault(n, value["leader"])
        return {n: named[n] for n in self._in_order(named)}

    def _grudge(self, value: Any, leader: str | None) -> tuple[Grudge, Any]:
        """The grudge a start-partition value asks for, and the value to store in schedule.json."""
        if isinstance(value, Mapping) and "grudge" in value:
            return value["grudge"], value
        if isinstance(value, Mapping) and "kind" in value:
            grudge = partitions.make(value["kind"], self.names, self.rng, leader)
            return grudge, {"kind": value["kind"], "grudge": grudge}
        if isinstance(value, Mapping):
            return dict(value), value  # a bare grudge, as Jepsen accepts
        raise ValueError(f"start-partition needs a grudge or a partition kind, not {value!r}")

    # ------------------------------------------------------------------ events
    def apply(self, event: Mapping[str, Any], leader: str | None = None, controller: str | None = None) -> Applied:
        """Apply one schedule event {"f", "value"}; `leader`: the current leader, when `needs_leader(event)`;
        `controller`: the active controller (quorum leader), when `needs_controller(event)`."""
        self._controller = controller
        try:
            return self._apply(event, leader)
        finally:
            self._controller = None

    def _apply(self, event: Mapping[str, Any], leader: str | None) -> Applied:
        f, value = event["f"], event.get("value")
        faults = self.faults
        if f == "start-partition":
            grudge, realised = self._grudge(value, leader)
            self.cut = faults.partition(grudge)
            return Applied(self.cut, realised)
        if f == "stop-partition":
            faults.heal()
            self.cut = {}
            return Applied(None, value)
        if f == "kill":
            victims = self.targets(value, leader)
            killed = faults.kill(victims)
            self.down.update(victims)
            return Applied(killed, victims)
        if f == "start":
            nodes = self._in_order(self.down) if value is None else self.targets(value, leader)
            started = faults.start(nodes)
            self.down.difference_update(nodes)
            self.disk_down.difference_update(nodes)
            return Applied(started, value)
        if f == "pause":
            victims = self.targets(value, leader)
            paused = faults.pause(victims)
            self.paused.update(paused)
            return Applied(paused, victims)
        if f == "resume":
            nodes = self._in_order(self.paused) if value is None else self.targets(value, leader)
            resumed = faults.resume(nodes)
            self.paused.difference_update(nodes)
            return Applied(resumed, value)
        if f in ("bump-clock", "strobe-clock", "rate-clock"):
            value = self._clock_targets(value, leader)
            clock = {
                "bump-clock": faults.clock_bump,
                "strobe-clock": faults.clock_strobe,
                "rate-clock": faults.clock_rate,
            }
            done = clock[f](value)
            self.skewed.update(value)
            return Applied(done, value)
        if f == "reset-clock":
            nodes = list(self.names) if value is None else self.targets(value, leader)
            reset = faults.clock_reset(nodes)
            self.skewed.difference_update(nodes)
            return Applied(reset, value)
        if f == "start-packet":
            spec = value or {}
            nodes = self.targets(spec.get("nodes") or "all", leader)
            peers = self.targets(spec.get("peers") or "all", leader)
            self.packets = faults.packet_start(spec.get("behaviours") or {"delay": None}, nodes, peers)
            return Applied(self.packets, value)
        if f == "stop-packet":
            done = faults.packet_stop()
            self.packets = None
            return Applied(done, value)
        if f == "start-disk":
            spec = dict(value or {})
            fault = spec.get("fault", "lose-unsynced")
            if fault not in DISK_FAULTS:
                raise ValueError(f"unknown disk fault {fault!r} (expected one of {', '.join(DISK_FAULTS)})")
            victims = self.targets(spec.get("nodes", "leader"), leader)
            done = faults.disk_fault(fault, victims, int(spec.get("seed", 0)))
            self.disk_down.update(victims)
            return Applied(done, {**spec, "nodes": victims})
        if f == "stop-disk":
            nodes = self._in_order(self.disk_down - self.down) if value is None else self.targets(value, leader)
            started = faults.start(nodes)
            self.disk_down.difference_update(nodes)
            return Applied(started, value)
        raise ValueError(f"unknown nemesis op {f!r} (expected one of {', '.join(FS)})")

    # ------------------------------------------------------------------ healing
    def in_force(self) -> dict[str, bool]:
        """For each fault package, whether any of its faults is in force now."""
        return {
            "partition": bool(self.cut),
            "packet": self.packets is not None,
            "pause": bool(self.paused),
            "kill": bool(self.down),
            "clock": bool(self.skewed),
            "disk": bool(self.disk_down),
        }

    def heal_events(self, packages: Iterable[str] = ()) -> list[dict[str, Any]]:
        """The events that heal everything: one per package in `packages` (whether or not it has a fault in
        force) and per package that has one, in heal order (network, processes, clocks)."""
        wanted = set(packages) | {p for p, active in self.in_force().items() if active}
        return [{"f": HEAL[p], "value": None} for p in HEAL_ORDER if p in wanted]
