"""The real backends' `Faults` port, and a blocking front for driving it with schedule events.

`RealFaults` implements `harness.nemesis.faults.Faults` once for docker, netns, local and SSH
hosts, over the control interface: partitions (iptables, `real_net.PartitionNemesis`, or the
local backend's loopback variant), packet faults (tc netem, or the NFQUEUE shaper and
iptables where the kernel has no netem: `real_net.PacketNemesis`), clocks (libfaketime,
`real_clock.ClockNemesis`), processes (`real_process.ProcessNemesis`) and disks (kill the node,
then `python -m nodes disk-fault` on its data directory: the damage functions the simulator uses,
`nodes.runtime.diskfault`). Only the enabled packages are prepared (a test without `clock` needs
no libfaketime, one without `partition` no iptables).

`RealNemesis` pairs it with the one nemesis interpreter (`harness.nemesis.interpreter`):

    with RealNemesis(hosts, daemons=spec_for) as nemesis:   # setup: chains, faketime files
        start node daemons with env=nemesis.clock.env(host)
        nemesis.invoke({"f": "start-partition", "value": {"kind": "halves", "grudge": {...}}})
        ...
    # on exit — normal, exception, Ctrl-C, SIGTERM — every fault is healed and removed
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from harness.nemesis.faults import PACKET_BEHAVIOURS, ClockChanges, PacketBehaviours, Strobe
from harness.nemesis.interpreter import NemesisInterpreter
from harness.nemesis.partitions import Grudge
from harness.nemesis.schedule import PACKAGES, cuts_links
from harness.real.backends.base import Host, PacketPart, PartitionPart
from harness.real.control import cleanup
from harness.real.faults.clock import ClockNemesis
from harness.real.faults.common import NemesisError, on_hosts, parallel
from harness.real.faults.net import PacketFaultUnsupported, PacketNemesis, PartitionNemesis, describe_grudge
from harness.real.faults.process import ProcessNemesis, SpecSource


class RealFaults:
    """Partitions, packet faults, clock skew, kills and pauses on real hosts (the `Faults` port).

    `daemons` (per-node DaemonSpec, or a function of the host) is needed for kill/start/pause/resume;
    `packages`: the fault packages to prepare; `partition`: a replacement for the iptables partition part;
    `data_dir`: a node's data directory on its host (disk faults).
    """

    def __init__(
        self,
        hosts: Sequence[Host],
        daemons: SpecSource | None = None,
        *,
        packages: Iterable[str] = PACKAGES,
        partition: PartitionPart | None = None,
        monotonic: bool = False,
        packet_method: str = "auto",
        data_dir: Callable[[Host], str] | None = None,
        packet: PacketPart | None = None,
    ) -> None:
        self.hosts = list(hosts)
        self.data_dir = data_dir
        self.packages = list(packages)
        self.partitioner: PartitionPart = partition if partition is not None else PartitionNemesis(self.hosts)
        self.packets: PacketPart = packet if packet is not None else PacketNemesis(self.hosts, method=packet_method)
        self.clocks = ClockNemesis(self.hosts, monotonic=monotonic)
        self.processes = ProcessNemesis(self.hosts, daemons) if daemons is not None else None
        self._token: int | None = None

    def enabled(self, package: str) -> bool:
        return package in self.packages

    # ------------------------------------------------------------------ life cycle
    def setup(self) -> RealFaults:
        """Prepare the enabled parts on every host (iptables chains and faketime files at once); arm teardown
        for Ctrl-C/SIGTERM/exit."""
        self._token = cleanup.register("real nemesis", self.teardown)
        if self.processes is not None:
            self.processes.setup()
        steps = [self.partitioner.setup] if cuts_links(self.packages) else []
        steps += [self.clocks.setup] if self.enabled("clock") else []
        parallel(*steps)
        return self

    def require_packet(self, behaviours: Iterable[str] = PACKET_BEHAVIOURS) -> None:
        """PacketFaultUnsupported unless the hosts can do every one of these packet behaviours (tc netem, or
        the NFQUEUE shaper where the kernel has no sch_netem)."""
        missing = set(behaviours) - self.packets.capabilities()
        if missing:
            raise PacketFaultUnsupported(
                f"--nemesis packet: the hosts cannot do {', '.join(sorted(missing))} (their kernel has neither "
                "sch_netem (tc netem) nor NFQUEUE; only loss can be done, with iptables); drop `packet` from --nemesis"
            )

    def teardown(self) -> None:
        """Heal and remove everything the enabled parts put on the hosts; every part is attempted."""
        errors: list[BaseException] = []
        parts = [
            self.partitioner if cuts_links(self.packages) else None,
            self.packets if self.enabled("packet") else None,
            self.processes,
            self.clocks if self.enabled("clock") else None,
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

    def _process(self) -> ProcessNemesis:
        if self.processes is None:
            raise NemesisError("kill/pause faults need the daemons to control (daemons=…)")
        return self.processes

    # ------------------------------------------------------------------ the port
    def partition(self, grudge: Grudge) -> Grudge:
        return self.partitioner.start(grudge)

    def heal(self) -> None:
        self.partitioner.heal()

    def kill(self, nodes: Sequence[str]) -> list[str]:
        return self._process().kill(nodes)

    def start(self, nodes: Sequence[str]) -> list[str]:
        return self._process().start(nodes)

    def pause(self, nodes: Sequence[str]) -> list[str]:
        return self._process().pause(nodes)

    def resume(self, nodes: Sequence[str]) -> list[str]:
        process = self._process()
        return process.resume([n for n in nodes if n in process.paused])  # a killed node is no longer stopped

    def clock_bump(self, changes: ClockChanges) -> dict[str, Any]:
        return self.clocks.apply(changes)

    def clock_strobe(self, strobe: Strobe) -> Strobe:
        self.clocks.strobe(strobe)
        return strobe

    def clock_rate(self, ppm: Mapping[str, float]) -> dict[str, float]:
        self.clocks.drift(ppm)
        return {n: self.clocks.rates[n] for n in ppm}

    def clock_reset(self, nodes: Sequence[str]) -> list[str]:
        return self.clocks.reset(nodes)

    def packet_start(self, behaviours: PacketBehaviours, nodes: Sequence[str], peers: Sequence[str]) -> dict[str, Any]:
        return self.packets.start(behaviours, nodes, peers)

    def packet_stop(self) -> dict[str, dict[str, int]]:
        return self.packets.stop()

    def disk_fault(self, fault: str, nodes: Sequence[str], seed: int) -> dict[str, Any]:
        """Kill each node, then damage its data directory with `python -m nodes disk-fault` (the node's own
        code, so every backend can do it); the nodes stay down until `start`."""
        if self.data_dir is None:
            raise NemesisError("disk faults need the nodes' data directories (data_dir=…)")
        data_dir = self.data_dir
        by_name = {h.name: h for h in self.hosts}
        self._process().kill(nodes)

        def damage(h: Host) -> Any:
            env = {"PYTHONPATH": h.pythonpath} if h.pythonpath else {}
            argv = [h.python, "-m", "nodes", "disk-fault", "--dir", data_dir(h), "--fault", fault]
            r = h.control.run([*argv, "--seed", f"{seed}-{h.name}"], env=env, timeout=60)
            if not r.ok:
                raise NemesisError(f"{h.name}: disk-fault failed: {r.stderr.strip()[-300:]}")
            return json.loads(r.stdout)

        return on_hosts([by_name[n] for n in nodes], damage)


class RealNemesis:
    """RealFaults driven by the nemesis interpreter, blocking; `leader()` names the current leader for
    "leader" targets (without one, or when it names nobody, such an event targets no node)."""

    def __init__(
        self,
        hosts: Sequence[Host],
        daemons: SpecSource | None = None,
        *,
        leader: Callable[[], str | None] | None = None,
        rng: random.Random | None = None,
        packages: Iterable[str] = PACKAGES,
        partition: PartitionPart | None = None,
        monotonic: bool = False,
        packet_method: str = "auto",
        data_dir: Callable[[Host], str] | None = None,
        packet: PacketPart | None = None,
        groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.faults = RealFaults(
            hosts,
            daemons,
            packages=packages,
            partition=partition,
            monotonic=monotonic,
            packet_method=packet_method,
            data_dir=data_dir,
            packet=packet,
        )
        self.names = [h.name for h in hosts]
        self.interpreter = NemesisInterpreter(self.faults, self.names, rng or random.Random(0), groups)
        self.leader = leader

    # the parts, for callers that need one directly (clock env, rules, offsets)
    @property
    def partition(self) -> PartitionPart:
        return self.faults.partitioner

    @property
    def packet(self) -> PacketPart:
        return self.faults.packets

    @property
    def clock(self) -> ClockNemesis:
        return self.faults.clocks

    @property
    def process(self) -> ProcessNemesis | None:
        return self.faults.processes

    def setup(self) -> RealNemesis:
        self.faults.setup()
        return self

    def teardown(self) -> None:
        self.faults.teardown()

    def __enter__(self) -> RealNemesis:
        return self.setup()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def invoke(self, event: Mapping[str, Any]) -> Any:
        """Apply one schedule event through the interpreter; the value recorded in the history."""
        needs = self.leader is not None and self.interpreter.needs_leader(event)
        return self.interpreter.apply(event, self.leader() if needs else None).recorded  # type: ignore[misc]

    def heal_all(self) -> list[Any]:
        """Heal every enabled package (also what its parts were told directly) and anything else the interpreter
        knows in force; what each heal event did."""
        return [self.invoke(e) for e in self.interpreter.heal_events(self.faults.packages)]

    def describe(self, grudge: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
        """Components, one-way cuts and majority-holding nodes of a grudge (default: the active one)."""
        return describe_grudge(self.partition.active if grudge is None else grudge, self.names)
