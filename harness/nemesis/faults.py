"""The `Faults` port: what a runtime must be able to do to a cluster for the nemesis to drive it.

One nemesis interpreter (`harness.nemesis.interpreter`) resolves a schedule event's targets
and calls this port; the simulator (`harness.sim.faults.SimFaults`) and the real backends
(`harness.real.faults.RealFaults`: docker, netns, local, ssh) implement it. Every call
takes concrete node names (never "leader") and returns what was really done, which the
interpreter records in the history and in schedule.json.

Value shapes (the schedule's, see `harness.nemesis.schedule`):

- grudge: {node: [nodes it drops packets from]} (`harness.nemesis.partitions`);
- clock change: {node: {"delta-ms": d, "drift-ppm": p}} — add d ms to the node's wall clock and
  set its rate to 1 + p/1e6;
- strobe: {node: {"delta-ms": d, "period-ms": p, "duration-s": s}} — flip the clock between its
  offset and offset + d every p ms for s seconds, then settle on the offset (Jepsen's strobe-clock);
- rate: {node: ppm} — the clock runs at 1 + ppm/1e6 (0 restores the real rate);
- packet behaviours: {name: params or None} with names from `PACKET_BEHAVIOURS`, on traffic
  from `nodes` to `peers` (default: every node to every other);
- disk fault: one of `DISK_FAULTS` on some nodes, with a seed that picks the file, record and bit
  (`nodes.runtime.diskfault`: the same damage functions on both runtimes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from harness.nemesis.partitions import Grudge

ClockChanges = Mapping[str, Mapping[str, float]]
Strobe = Mapping[str, Mapping[str, float]]
PacketBehaviours = Mapping[str, Mapping[str, Any] | None]
# what every runtime can do to packets (the real backends' netem also knows corrupt and rate)
PACKET_BEHAVIOURS = ("loss", "delay", "duplicate", "reorder")
# lose unsynced writes; a power loss that tears the last write; a flipped bit in a closed part of a log
DISK_FAULTS = ("lose-unsynced", "torn", "corrupt")


class Faults(Protocol):
    """The faults a runtime can inject; each returns what was really done."""

    # ------------------------------------------------------------------ network
    def partition(self, grudge: Grudge) -> Grudge:
        """Replace the current partition with `grudge`; the grudge in force (nodes with no grudge left out)."""
        ...

    def heal(self) -> None:
        """Full connectivity again."""
        ...

    # ------------------------------------------------------------------ processes
    def kill(self, nodes: Sequence[str]) -> list[str]:
        """Crash these nodes' processes; the nodes killed."""
        ...

    def start(self, nodes: Sequence[str]) -> list[str]:
        """Restart these (killed) nodes; the nodes started."""
        ...

    def pause(self, nodes: Sequence[str]) -> list[str]:
        """Stop these nodes' processes (SIGSTOP); the nodes paused."""
        ...

    def resume(self, nodes: Sequence[str]) -> list[str]:
        """Continue these (paused) nodes; the nodes resumed."""
        ...

    # ------------------------------------------------------------------ clocks
    def clock_bump(self, changes: ClockChanges) -> Any:
        """Move wall clocks and set their rates ({node: {"delta-ms", "drift-ppm"}}); what was done."""
        ...

    def clock_strobe(self, strobe: Strobe) -> Any:
        """Flip clocks back and forth for a while ({node: {"delta-ms", "period-ms", "duration-s"}})."""
        ...

    def clock_rate(self, ppm: Mapping[str, float]) -> Any:
        """Set clock rates ({node: ppm}) without moving the clocks."""
        ...

    def clock_reset(self, nodes: Sequence[str]) -> list[str]:
        """Back to true time (stopping strobes); the nodes whose clocks were off."""
        ...

    # ------------------------------------------------------------------ packets
    def packet_start(self, behaviours: PacketBehaviours, nodes: Sequence[str], peers: Sequence[str]) -> Any:
        """Loss, delay, duplication, reordering on traffic from `nodes` to `peers` (replacing any); what was done."""
        ...

    def packet_stop(self) -> Any:
        """No packet fault anywhere; what the last one did ({sending node: {counter: n}}, counters from
        `harness.real.faults.nfqueue.COUNTERS`, those the runtime can count), or None if there was none."""
        ...

    # ------------------------------------------------------------------ disks
    def disk_fault(self, fault: str, nodes: Sequence[str], seed: int) -> Any:
        """Crash these nodes (losing their unsynced writes) and damage their log files as `fault` (one of
        `DISK_FAULTS`) says; they stay down until `start`. What was done, per node."""
        ...
