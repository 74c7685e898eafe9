"""The simulator's `Faults` port (`harness.nemesis.faults`): faults on simulated nodes, links and clocks.

Partitions are grudges on the simulated network, kills crash a node (its unsynced writes
are lost) and restarts recover it from its disk, pauses hold its inputs, clock faults move
its wall clock (offset, drift, and strobes as scheduler events), and packet faults shape
its links (`harness.sim.packets`, from their own random stream `packets-<seed>`). Disk faults
crash a node and damage its log files' bytes with the functions the real helper uses
(`nodes.runtime.diskfault`); the node reads them back through CRC recovery when it restarts.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.core.streams import stream
from harness.nemesis.faults import ClockChanges, PacketBehaviours, Strobe
from harness.nemesis.partitions import Grudge
from harness.sim.engine import MS, SECOND, Scheduler
from harness.sim.network import Network
from harness.sim.node import SimNode
from harness.sim.packets import Shaping
from nodes.runtime.diskfault import damage


class SimFaults:
    """Every fault of the port, on a simulation's nodes, network and scheduler (deterministic: scheduler
    events and named random streams)."""

    def __init__(
        self, nodes: Iterable[SimNode], net: Network, sched: Scheduler, seed: int | str, restart_delay: int = 0
    ) -> None:
        self.nodes: dict[str, SimNode] = {n.name: n for n in nodes}
        self.restart_delay = restart_delay  # ns from a start to the node's process running again (0: at once)
        self._starting: dict[str, int] = {}  # node -> generation of its delayed start (a kill cancels it)
        self.net = net
        self.sched = sched
        self.packet_rng = stream("packets", seed)
        self._strobes: dict[str, tuple[int, int]] = {}  # node -> (generation, base offset) of its running strobe
        self._generation = 0

    # ------------------------------------------------------------------ network
    def partition(self, grudge: Grudge) -> Grudge:
        self.net.partition(grudge)
        return {k: v for k, v in grudge.items() if v}

    def heal(self) -> None:
        self.net.heal()

    # ------------------------------------------------------------------ processes
    def kill(self, nodes: Sequence[str]) -> list[str]:
        for n in nodes:
            self._starting.pop(n, None)  # a process still starting is killed too
            self.nodes[n].crash()
        return list(nodes)

    def start(self, nodes: Sequence[str]) -> list[str]:
        for n in nodes:
            if not self.restart_delay:
                self.nodes[n].restart()
            elif n not in self._starting and not self.nodes[n].alive:
                self._generation += 1
                self._starting[n] = self._generation
                self.sched.at(self.sched.now + self.restart_delay, self._started, n, self._generation)
        return list(nodes)

    def _started(self, name: str, generation: int) -> None:
        if self._starting.get(name) == generation:
            del self._starting[name]
            self.nodes[name].restart()

    def pause(self, nodes: Sequence[str]) -> list[str]:
        for n in nodes:
            self.nodes[n].pause()
        return list(nodes)

    def resume(self, nodes: Sequence[str]) -> list[str]:
        for n in nodes:
            self.nodes[n].resume()
        return list(nodes)

    # ------------------------------------------------------------------ clocks
    def clock_bump(self, changes: ClockChanges) -> ClockChanges:
        for name, change in changes.items():
            node = self.nodes[name]
            node.clock_offset += int(change["delta-ms"]) * MS
            node.drift_ppm = int(change.get("drift-ppm", 0))
            node.clock_changed()
        return changes

    def clock_rate(self, ppm: Mapping[str, float]) -> Mapping[str, float]:
        for name, value in ppm.items():
            node = self.nodes[name]
            node.drift_ppm = int(value)
            node.clock_changed()
        return ppm

    def clock_strobe(self, strobe: Strobe) -> Strobe:
        """As the real strobe loop: flips between the offset at its start and that plus delta, then settles
        on the former; a new strobe or a reset of the node ends it."""
        for name, spec in strobe.items():
            node = self.nodes[name]
            period = max(int(float(spec["period-ms"]) * MS), MS)
            flips = max(1, int(float(spec["duration-s"]) * SECOND) // period)
            self._generation += 1
            generation = self._generation
            # a strobe replacing a running one flips around the same offset, not around a flipped one
            base = self._strobes[name][1] if name in self._strobes else node.clock_offset
            self._strobes[name] = (generation, base)
            self._flip(name, generation, base, int(float(spec["delta-ms"]) * MS), period, 0, flips)
        return strobe

    def _flip(self, name: str, generation: int, base: int, delta: int, period: int, i: int, flips: int) -> None:
        if self._strobes.get(name, (None,))[0] != generation:
            return
        node = self.nodes[name]
        node.clock_offset = base + delta if i < flips and i % 2 == 0 else base
        node.clock_changed()
        if i < flips:
            self.sched.after(period, self._flip, name, generation, base, delta, period, i + 1, flips)
        else:
            del self._strobes[name]

    def clock_reset(self, nodes: Sequence[str]) -> list[str]:
        reset = []
        for name in nodes:
            node = self.nodes[name]
            self._strobes.pop(name, None)
            if node.clock_offset or node.drift_ppm:
                reset.append(name)
                # stepping back to true time: the local clock may jump backwards, as with ntpdate
                node.clock_offset = 0
                node.drift_ppm = 0
                node.clock_changed()
        return reset

    # ------------------------------------------------------------------ packets
    def packet_start(self, behaviours: PacketBehaviours, nodes: Sequence[str], peers: Sequence[str]) -> dict[str, Any]:
        shaping = Shaping(behaviours, nodes, peers, self.packet_rng)
        self.net.shaping = shaping
        # the real backends' record, with the simulator as the method
        return {"behaviours": shaping.behaviours, "nodes": list(nodes), "peers": list(peers), "method": "sim"}

    def packet_stop(self) -> dict[str, dict[str, int]]:
        """No packet fault; what the last one did, per sending node (`harness.real.faults.nfqueue.COUNTERS`)."""
        shaping, self.net.shaping = self.net.shaping, None
        counts = shaping.counts if shaping is not None else {}
        return {n: counts[n] for n in self.nodes if n in counts}

    # ------------------------------------------------------------------ disks
    def disk_fault(self, fault: str, nodes: Sequence[str], seed: int) -> dict[str, Any]:
        """Crash each node (its unsynced writes are lost) and damage its log files as `fault` says; they stay
        down until started. What was done, per node."""
        done = {}
        for name in nodes:
            node = self.nodes[name]
            files = node.log_files()
            written = {f: d.image() for f, d in files}  # what the running node wrote, synced or not
            node.crash()
            images = [(f, *(written[f] if fault == "torn" else d.image())) for f, d in files]
            new, what = damage(images, fault, random.Random(f"disk-{seed}-{name}"))
            target = what.get("file")
            if target is not None:
                dict(files)[target].damaged = new[target]
            done[name] = what
        return done
