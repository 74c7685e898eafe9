"""Network faults on real hosts: partitions as iptables DROP rules, packet faults with tc netem.

Partitions: each node gets a chain KRAFTWERK, jumped to from position 1 of INPUT
(before any conntrack ACCEPT, so established flows are cut too). Applying a
grudge {node: [nodes it drops packets from]} fills each node's chain with
`-s <src-ip> -j DROP`; healing flushes the chains; teardown removes the jump and
the chain. Every iptables call passes `-w` (wait for the xtables lock).

Packet faults: Jepsen's layout on each node's cluster interface — a root `prio`
qdisc with 4 bands, netem on band 1:4, and one u32 filter per peer address — so
only traffic to the chosen peers is shaped and control traffic (SSH) is not.
`loss` can also be done without netem by an iptables `statistic` DROP rule in
chain KRAFTWERK-PKT (netem loss on a local interface is reported to TCP, which
just resends; and some kernels lack sch_netem altogether).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import networkx as nx

from harness.backends.base import Host
from harness.control.base import CommandError
from harness.nemesis.partitions import Grudge
from harness.nemesis.real_common import NemesisError, Undoable, on_hosts

CHAIN = "KRAFTWERK"
PACKET_CHAIN = "KRAFTWERK-PKT"

# Jepsen's default behaviours (jepsen.net): tc netem arguments per behaviour
DEFAULT_BEHAVIOURS: dict[str, dict[str, Any]] = {
    "delay": {"time-ms": 50, "jitter-ms": 10, "correlation": 25, "distribution": "normal"},
    "loss": {"percent": 20, "correlation": 75},
    "corrupt": {"percent": 20, "correlation": 75},
    "duplicate": {"percent": 20, "correlation": 75},
    "reorder": {"percent": 20, "correlation": 75},
    "rate": {"mbit": 1},
}


def validate_grudge(grudge: Mapping[str, Iterable[str]], nodes: Sequence[str]) -> Grudge:
    """A clean copy of a grudge, or ValueError naming an unknown node or a node that drops itself."""
    known = set(nodes)
    clean: Grudge = {}
    for node, sources in grudge.items():
        if node not in known:
            raise ValueError(f"grudge names unknown node {node!r} (nodes: {', '.join(nodes)})")
        srcs = list(dict.fromkeys(sources))
        bad = [s for s in srcs if s not in known]
        if bad:
            raise ValueError(f"grudge of {node} names unknown node(s) {', '.join(map(repr, bad))}")
        if node in srcs:
            raise ValueError(f"grudge makes {node} drop packets from itself")
        clean[node] = srcs
    return clean


def describe_grudge(grudge: Mapping[str, Iterable[str]], nodes: Sequence[str]) -> dict[str, Any]:
    """What a grudge does to the cluster, via networkx.

    - `components`: groups of nodes connected by two-way links (connected components),
    - `complete`: every component is a clique (a clean partition, not a ring or a bridge),
    - `one-way`: [receiver, sender] pairs where only one direction is cut,
    - `majority`: nodes that hear and are heard by a majority (themselves included).
    """
    hears = nx.DiGraph()
    hears.add_nodes_from(nodes)
    drops = {n: set(grudge.get(n, ())) for n in nodes}
    for a in nodes:
        for b in nodes:
            if a != b and b not in drops[a]:
                hears.add_edge(b, a)  # a packet from b reaches a
    mutual = nx.Graph()
    mutual.add_nodes_from(nodes)
    mutual.add_edges_from((a, b) for a, b in hears.edges if hears.has_edge(b, a))
    components = sorted((sorted(c, key=list(nodes).index) for c in nx.connected_components(mutual)), key=len)
    complete = all(mutual.subgraph(c).number_of_edges() == len(c) * (len(c) - 1) // 2 for c in components)
    one_way = sorted([a, b] for a in nodes for b in drops[a] if a not in drops.get(b, set()))
    quorum = len(nodes) // 2 + 1
    majority = [n for n in nodes if mutual.degree(n) + 1 >= quorum]
    return {"components": components, "complete": complete, "one-way": one_way, "majority": majority}


class PartitionNemesis(Undoable):
    """Apply grudges with iptables on every host; heal; remove the chains on teardown."""

    label = "partition nemesis (iptables)"

    def __init__(self, hosts: Sequence[Host]) -> None:
        super().__init__()
        self.hosts = {h.name: h for h in hosts}
        self.active: Grudge = {}
        self._ready = False

    def setup(self) -> None:
        """Create the chain and the INPUT jump on every host (idempotent)."""
        self._armed()
        script = (
            f"iptables -w -N {CHAIN} 2>/dev/null; "
            f"iptables -w -C INPUT -j {CHAIN} 2>/dev/null || iptables -w -I INPUT 1 -j {CHAIN}; "
            f"iptables -w -F {CHAIN}"
        )
        on_hosts(self.hosts.values(), lambda h: h.control.run(script, check=True, timeout=30))
        self._ready = True

    def start(self, grudge: Mapping[str, Iterable[str]]) -> Grudge:
        """Replace the current partition with this grudge; returns the grudge applied (empty lists dropped)."""
        if not self._ready:
            self.setup()
        clean = validate_grudge(grudge, list(self.hosts))

        def apply(h: Host) -> None:
            rules = [f"iptables -w -F {CHAIN}"]
            for src in clean.get(h.name, []):
                rules.append(f"iptables -w -A {CHAIN} -s {shlex.quote(self.hosts[src].address)} -j DROP")
            h.control.run(" && ".join(rules), check=True, timeout=30)

        on_hosts(self.hosts.values(), apply)
        self.active = {k: v for k, v in clean.items() if v}
        return dict(self.active)

    def heal(self) -> None:
        """Flush every host's chain: full connectivity again."""
        if self._ready:
            on_hosts(self.hosts.values(), lambda h: h.control.run(f"iptables -w -F {CHAIN}", check=True, timeout=30))
        self.active = {}

    def rules(self, node: str) -> list[str]:
        """The DROP rules currently in a node's chain (`iptables -S` lines)."""
        out = self.hosts[node].control.run(f"iptables -w -S {CHAIN}", timeout=30).stdout
        return [line for line in out.splitlines() if line.startswith("-A ")]

    def teardown(self) -> None:
        """Remove the jump from INPUT and the chain itself on every host."""
        script = (
            f"while iptables -w -D INPUT -j {CHAIN} 2>/dev/null; do :; done; "
            f"iptables -w -F {CHAIN} 2>/dev/null; iptables -w -X {CHAIN} 2>/dev/null; true"
        )
        on_hosts(self.hosts.values(), lambda h: h.control.run(script, timeout=30))
        self.active = {}
        self._ready = False
        self._disarmed()


def netem_args(behaviours: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """tc netem arguments for behaviours such as {"delay": {"time-ms": 100}, "loss": {"percent": 10}}.

    Missing parameters take Jepsen's defaults; `reorder` needs a delay and gets the default one.
    """
    unknown = set(behaviours) - set(DEFAULT_BEHAVIOURS)
    if unknown:
        raise ValueError(f"unknown packet behaviour(s) {sorted(unknown)} (expected {sorted(DEFAULT_BEHAVIOURS)})")
    b = {k: {**DEFAULT_BEHAVIOURS[k], **(v or {})} for k, v in behaviours.items()}
    if "reorder" in b and "delay" not in b:
        b["delay"] = dict(DEFAULT_BEHAVIOURS["delay"])
    args: list[str] = []
    if "delay" in b:
        d = b["delay"]
        args += ["delay", f"{d['time-ms']}ms", f"{d['jitter-ms']}ms", f"{d['correlation']}%"]
        if d.get("jitter-ms") and d.get("distribution"):
            args += ["distribution", str(d["distribution"])]
    for name in ("loss", "corrupt", "duplicate", "reorder"):
        if name in b:
            args += [name, f"{b[name]['percent']}%", f"{b[name]['correlation']}%"]
    if "rate" in b:
        args += ["rate", f"{b['rate']['mbit']}mbit"]
    return args


def netem_script(iface: str, peers: Sequence[str], behaviours: Mapping[str, Mapping[str, Any] | None]) -> str:
    """Shell commands that shape egress to `peers` (addresses) on `iface` (Jepsen's prio/netem/u32 layout)."""
    dev = shlex.quote(iface)
    lines = [
        f"tc qdisc del dev {dev} root 2>/dev/null; true",
        f"tc qdisc add dev {dev} root handle 1: prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
        f"tc qdisc add dev {dev} parent 1:4 handle 40: netem {' '.join(netem_args(behaviours))}",
    ]
    for ip in peers:
        lines.append(
            f"tc filter add dev {dev} parent 1:0 protocol ip prio 3 u32 match ip dst {shlex.quote(ip)}/32 flowid 1:4"
        )
    return lines[0] + "\n" + " && ".join(lines[1:])


class PacketFaultUnsupported(NemesisError):
    """The hosts cannot do this packet fault (e.g. the kernel has no sch_netem)."""


class PacketNemesis(Undoable):
    """Delay, loss, duplication, reordering, corruption, rate limits between cluster nodes.

    `method`: "netem" (tc, every behaviour), "iptables" (loss only, `statistic` match),
    or "auto" (netem when the kernel has it, else iptables for loss-only faults).
    """

    label = "packet nemesis (tc netem / iptables)"

    def __init__(self, hosts: Sequence[Host], method: str = "auto") -> None:
        super().__init__()
        if method not in ("auto", "netem", "iptables"):
            raise ValueError(f"unknown packet fault method {method!r}")
        self.hosts = {h.name: h for h in hosts}
        self.method = method
        self.active: dict[str, Any] = {}
        self._netem: bool | None = None

    def setup(self) -> None:  # nothing to prepare: qdiscs and chains are made on start
        pass

    def netem_supported(self) -> bool:
        """Whether the first host's kernel has sch_netem (probed once on its loopback, then removed)."""
        if self._netem is None:
            h = next(iter(self.hosts.values()))
            r = h.control.run(
                "tc qdisc add dev lo root handle 9: netem delay 0ms && tc qdisc del dev lo root handle 9:", timeout=30
            )
            self._netem = r.ok
        return self._netem

    def start(
        self,
        behaviours: Mapping[str, Mapping[str, Any] | None] | Iterable[str],
        nodes: Iterable[str] | None = None,
        peers: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Shape traffic from `nodes` (default all) to `peers` (default every other node); returns what was done."""
        if not isinstance(behaviours, Mapping):
            behaviours = {name: None for name in behaviours}
        netem_args(behaviours)  # validates names
        targets = list(nodes) if nodes is not None else list(self.hosts)
        peer_names = list(peers) if peers is not None else list(self.hosts)
        for n in [*targets, *peer_names]:
            if n not in self.hosts:
                raise ValueError(f"unknown node {n!r}")
        method = self.method
        if method == "auto":
            method = "netem" if self.netem_supported() else "iptables"
        if method == "iptables" and set(behaviours) != {"loss"}:
            raise PacketFaultUnsupported(
                f"{', '.join(sorted(set(behaviours) - {'loss'}))} need tc netem, which this kernel lacks "
                "(sch_netem); only loss is available (iptables statistic)"
            )
        self.stop()
        self._armed()

        def apply(h: Host) -> None:
            addrs = [self.hosts[p].address for p in peer_names if p != h.name]
            if method == "netem":
                h.control.run(netem_script(h.iface, addrs, behaviours), check=True, timeout=30)
            else:
                loss = {**DEFAULT_BEHAVIOURS["loss"], **(behaviours["loss"] or {})}
                p = float(loss["percent"]) / 100.0
                rules = [
                    f"iptables -w -N {PACKET_CHAIN} 2>/dev/null; true",
                    f"iptables -w -F {PACKET_CHAIN}",
                    f"(iptables -w -C INPUT -j {PACKET_CHAIN} 2>/dev/null || iptables -w -I INPUT 1 -j {PACKET_CHAIN})",
                ]
                rules += [
                    f"iptables -w -A {PACKET_CHAIN} -s {a} -m statistic --mode random --probability {p:.4f} -j DROP"
                    for a in addrs
                ]
                h.control.run(rules[0] + "\n" + " && ".join(rules[1:]), check=True, timeout=30)

        try:
            on_hosts([self.hosts[n] for n in targets], apply)
        except CommandError as e:
            raise NemesisError(f"packet fault failed: {e}") from e
        self.active = {"method": method, "behaviours": dict(behaviours), "nodes": targets, "peers": peer_names}
        return dict(self.active)

    def stop(self) -> None:
        """Remove every packet fault from every host (idempotent; `no qdisc` errors are ignored)."""

        def clear(h: Host) -> None:
            h.control.run(
                f"tc qdisc del dev {shlex.quote(h.iface)} root 2>/dev/null; "
                f"while iptables -w -D INPUT -j {PACKET_CHAIN} 2>/dev/null; do :; done; "
                f"iptables -w -F {PACKET_CHAIN} 2>/dev/null; iptables -w -X {PACKET_CHAIN} 2>/dev/null; true",
                timeout=30,
            )

        if self.active or self._token is not None:
            on_hosts(self.hosts.values(), clear)
        self.active = {}

    heal = stop

    def teardown(self) -> None:
        self.stop()
        self._disarmed()
