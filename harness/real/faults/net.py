"""Network faults on real hosts: partitions as iptables DROP rules; packet faults with tc netem or NFQUEUE.

Partitions: each node gets a chain KRAFTWERK, jumped to from position 1 of INPUT
(before any conntrack ACCEPT, so established flows are cut too). Applying a
grudge {node: [nodes it drops packets from]} fills each node's chain with
`-s <src-ip> -j DROP`; healing flushes the chains; teardown removes the jump and
the chain. Every iptables call passes `-w` (wait for the xtables lock).

Packet faults shape what the chosen nodes send to their peers (egress, as the
simulator's links), never control traffic, with the first method the kernel has:

- `netem`: Jepsen's layout on each node's cluster interface — a root `prio` qdisc
  with 4 bands, netem on band 1:4, and one u32 filter per peer address;
- `nfqueue` (kernels without sch_netem, such as this project's CI machines): the
  sender's chain KRAFTWERK-PKT in OUTPUT sends each link's packets to a userspace
  shaper (`harness.real.faults.nfqueue`, started on the node as a daemon) that delays,
  duplicates and reorders them, and the receiver's chain KRAFTWERK-PKT-IN in INPUT
  counts them and drops a share with the iptables `statistic` match (loss at the
  receiver: a packet dropped in its sender's OUTPUT is reported to the sender's TCP,
  which sends it again at once, so that would be no loss at all). The nodes' TCP
  meets all four as it would meet netem's (retransmits, D-SACKs, out-of-order queues);
- `iptables`: loss only (the statistic rule), when the kernel has no NFQUEUE either.

Stopping a fault returns what it did per sending node (packets that met it, lost,
and for the shaper delayed, duplicated, reordered); the nemesis records it.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx

from harness.nemesis.partitions import Grudge
from harness.real.backends.base import Host
from harness.real.control.base import CommandError, DaemonSpec
from harness.real.faults import nfqueue
from harness.real.faults.common import NemesisError, Undoable, on_hosts

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
    """The hosts cannot do this packet fault (e.g. the kernel has no sch_netem and no NFQUEUE)."""


# what each method can do; `auto` takes the first of netem, nfqueue, iptables that the hosts have
METHOD_BEHAVIOURS = {
    "netem": frozenset(DEFAULT_BEHAVIOURS),
    "nfqueue": frozenset(("loss", "delay", "duplicate", "reorder")),
    "iptables": frozenset(("loss",)),
}
PROBE_CHAIN = "KRAFTWERK-PKTP"
SHAPER = "kraftwerk-nfqueue"  # file names of the shaper on each host: .py, .pid, .log, .json (stats)
_COUNT = re.compile(r"^-A \S+(?: -s (\S+?)(?:/32)?)?(?: -d \S+)? .*?-c (\d+) \d+(?: -j (\S+))?$")
_TC_SENT = re.compile(r"qdisc netem .*?Sent \d+ bytes (\d+) pkt \(dropped (\d+)", re.S)


def _match(src: str | None, dst: str | None) -> str:
    return " ".join(([f"-s {shlex.quote(src)}"] if src else []) + ([f"-d {shlex.quote(dst)}"] if dst else []))


def chain_script(
    queued: Sequence[tuple[str | None, str]],
    received: Sequence[tuple[str, str | None]],
    loss: float | None,
    chain: str = PACKET_CHAIN,
    queue_num: int = nfqueue.QUEUE_NUM,
) -> str:
    """Shell commands that put a host's two packet chains in place, for links given as (source address or None,
    destination address or None):

    - `chain` in OUTPUT: what this host sends over the `queued` links goes to the shaper's queue (copies the
      shaper sends itself carry a mark and pass);
    - `chain`-IN in INPUT: what arrives over the `received` links is counted and, with `loss`, dropped with
      that probability — at the receiver, so the sender's TCP meets a real loss (dropped in its own OUTPUT, a
      segment is merely sent again at once: the kernel tells TCP).
    """
    c, cin = chain, f"{chain}-IN"
    # one iptables-restore: a process per rule is slow on a loaded machine (~0.1 s each at a load of 10 per core)
    rules = [
        "*filter",
        f":{c} - [0:0]",  # created, or emptied if it is there
        f":{cin} - [0:0]",
        f"-I OUTPUT 1 -j {c}",  # (stop() took any earlier jump out)
        f"-I INPUT 1 -j {cin}",
        f"-A {c} -m mark --mark {nfqueue.MARK:#x} -j RETURN",
    ]
    for src, dst in queued:
        rules.append(f"-A {c} {_match(src, dst)} -j NFQUEUE --queue-num {queue_num} --queue-bypass")
    for src, dst in received:
        rules.append(f"-A {cin} {_match(src, dst)}")  # no target: counts what comes over the link
        if loss:
            rules.append(f"-A {cin} {_match(src, dst)} -m statistic --mode random --probability {loss:.4f} -j DROP")
    rules.append("COMMIT")
    return _restore(rules)


def _restore(rules: Sequence[str]) -> str:
    return f"printf '%s\\n' {' '.join(shlex.quote(r) for r in rules)} | iptables-restore -w --noflush"


def unhook_script(chain: str = PACKET_CHAIN) -> str:
    """Shell commands that take the packet chains out of OUTPUT and INPUT (the chains stay, with their counts)."""
    return f"iptables -w -D OUTPUT -j {chain} 2>/dev/null; iptables -w -D INPUT -j {chain}-IN 2>/dev/null;"


def remove_script(chain: str = PACKET_CHAIN) -> str:
    """Shell commands that remove the packet chains altogether (idempotent)."""
    chains = (chain, f"{chain}-IN")
    one_by_one = " ".join(f"iptables -w -F {c} 2>/dev/null; iptables -w -X {c} 2>/dev/null;" for c in chains)
    at_once = _restore(["*filter", *(f"{op} {c}" for c in chains for op in ("-F", "-X")), "COMMIT"])
    return f"{unhook_script(chain)} {at_once} 2>/dev/null || {{ {one_by_one} }}; true"


def chain_counts(rules: str) -> dict[str, dict[str, int]]:
    """Per source address ("" when the rules name none): packets that met the fault and packets it dropped,
    from `iptables -S CHAIN-IN -v`."""
    out: dict[str, dict[str, int]] = {}
    for line in rules.splitlines():
        m = _COUNT.match(line.strip())
        if not m:
            continue
        counts = out.setdefault(m.group(1) or "", {"packets": 0, "lost": 0})
        if m.group(3) is None:
            counts["packets"] += int(m.group(2))
        elif m.group(3) == "DROP":
            counts["lost"] += int(m.group(2))
    return out


class PacketNemesis(Undoable):
    """Delay, loss, duplication, reordering (and, with netem, corruption and rate limits) on the traffic cluster
    nodes send to each other.

    `method`: "netem" (tc, every behaviour), "nfqueue" (the userspace shaper `harness.real.faults.nfqueue` for delay,
    duplicate and reorder, iptables `statistic` for loss), "iptables" (loss only), or "auto": netem when the kernel
    has sch_netem, else nfqueue when it has NFQUEUE, else iptables. Every method shapes what `nodes` send to
    `peers` (egress, as netem on their interfaces and the simulator's links), never control traffic.

    `shared`: the hosts share one network stack (the local backend: processes on distinct loopback addresses);
    then one chain `chain` and one shaper on queue `queue_num` hold every link, told apart by source address, and
    netem (which would shape the whole loopback) is never used.
    """

    label = "packet nemesis (tc netem / nfqueue / iptables)"

    def __init__(
        self,
        hosts: Sequence[Host],
        method: str = "auto",
        *,
        shared: bool = False,
        chain: str = PACKET_CHAIN,
        queue_num: int = nfqueue.QUEUE_NUM,
    ) -> None:
        super().__init__()
        if method not in ("auto", *METHOD_BEHAVIOURS) or (shared and method == "netem"):
            raise ValueError(f"unknown packet fault method {method!r} (auto, {', '.join(METHOD_BEHAVIOURS)})")
        self.hosts = {h.name: h for h in hosts}
        self.method = method
        self.shared = shared
        self.chain = chain
        self.queue_num = queue_num
        self.active: dict[str, Any] = {}
        self._netem: bool | None = False if shared else None
        self._nfqueue: bool | None = None
        self._shapers: dict[str, str] = {}  # hosts where the shaper daemon was started: its stats file
        self._installed: set[str] = set()  # hosts the shaper's script was copied to
        self._starts = 0
        if shared and len({h.address for h in hosts}) < len(hosts):
            raise PacketFaultUnsupported("packet faults need every node on an address of its own")

    def setup(self) -> None:  # nothing to prepare: qdiscs, chains and shapers are made on start
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

    def nfqueue_supported(self) -> bool:
        """Whether the first host can run the shaper: a queue binds, and iptables takes an NFQUEUE rule."""
        if self._nfqueue is None:
            h = next(iter(self.hosts.values()))
            self._install(h)
            c = f"{self.chain}-T" if self.shared else PROBE_CHAIN
            r = h.control.run(
                f"{shlex.quote(h.python)} {shlex.quote(self._path(h, 'py'))} --probe {self.queue_num} && "
                f"iptables -w -N {c} && iptables -w -A {c} -j NFQUEUE --queue-num {self.queue_num} --queue-bypass; "
                f"r=$?; iptables -w -F {c} 2>/dev/null; iptables -w -X {c} 2>/dev/null; exit $r",
                timeout=30,
            )
            self._nfqueue = r.ok
        return self._nfqueue

    def method_for(self, behaviours: Iterable[str]) -> str:
        """The method these behaviours get on these hosts; PacketFaultUnsupported if none can do them all."""
        wanted = set(behaviours)
        if self.method != "auto":
            method = self.method
        elif self.netem_supported():
            method = "netem"
        elif self.nfqueue_supported():
            method = "nfqueue" if wanted - {"loss"} else "iptables"
        else:
            method = "iptables"
        missing = wanted - METHOD_BEHAVIOURS[method]
        if missing:
            have = (
                ""
                if self.method != "auto"
                else " (the kernel has no sch_netem" + (")" if method == "nfqueue" else " and no NFQUEUE)")
            )
            raise PacketFaultUnsupported(
                f"packet fault(s) {', '.join(sorted(missing))} cannot be done with {method}{have}; "
                f"it does {', '.join(sorted(METHOD_BEHAVIOURS[method]))}"
            )
        return method

    def capabilities(self) -> frozenset[str]:
        """The behaviours these hosts can do (with `method`, or the best method they have)."""
        if self.method != "auto":
            return METHOD_BEHAVIOURS[self.method]
        if self.netem_supported():
            return METHOD_BEHAVIOURS["netem"]
        return METHOD_BEHAVIOURS["nfqueue" if self.nfqueue_supported() else "iptables"]

    # ------------------------------------------------------------------ the shaper's files
    @staticmethod
    def _path(h: Host, ext: str) -> str:
        return f"{h.workdir.rstrip('/')}/{SHAPER}.{ext}"

    def _install(self, h: Host) -> None:
        self._armed()  # the script is removed on teardown
        if h.name not in self._installed:
            h.control.put_file(self._path(h, "py"), Path(nfqueue.__file__).read_bytes())
            self._installed.add(h.name)

    def _start_shaper(self, h: Host, behaviours: Mapping[str, Any], then: str) -> None:
        """Start the shaper, wait until its queue is bound, then run the shell commands `then` (the rules that
        send it packets: while nobody listens, the queue rule lets packets pass)."""
        self._install(h)
        self._starts += 1
        stats = self._path(h, f"{self._starts}.json")  # a new file each time: no stale one to remove first
        config = {"behaviours": behaviours, "seed": random.getrandbits(32), "stats": stats, "queue": self.queue_num}
        spec = DaemonSpec(
            argv=[h.python, self._path(h, "py"), json.dumps(config)],
            pidfile=self._path(h, "pid"),
            logfile=self._path(h, "log"),
        )
        self._shapers[h.name] = stats
        h.control.start_daemon(spec)
        q = shlex.quote(stats)
        r = h.control.run(
            f"i=0; while [ ! -s {q} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; test -s {q} && {then}",
            timeout=30,
        )
        if not r.ok:
            log = h.control.run(f"tail -5 {shlex.quote(self._path(h, 'log'))}", timeout=30).stdout.strip()
            raise NemesisError(f"{h.name}: the packet shaper did not start: {log or r.stderr.strip() or 'no output'}")

    def _stop_shaper(self, h: Host) -> dict[str, dict[str, int]]:
        """Stop the shaper (it lets its held packets go first); its final counters, by source address when
        `shared`, else under "" (what this host sent)."""
        stats_path = self._shapers.pop(h.name)
        h.control.stop_daemon(self._path(h, "pid"))
        r = h.control.run(f"cat {shlex.quote(stats_path)}; rm -f {shlex.quote(stats_path)}", timeout=30)
        try:
            stats = json.loads(r.stdout) if r.stdout.strip() else {}
        except ValueError:
            stats = {}
        keep = ("delayed", "duplicated", "reordered")
        if self.shared:  # one shaper for every node: its counts by source address
            return {src: {k: int(c[k]) for k in keep if k in c} for src, c in stats.get("sources", {}).items()}
        return {"": {k: int(stats[k]) for k in keep if k in stats}}

    # ------------------------------------------------------------------ faults
    def start(
        self,
        behaviours: Mapping[str, Mapping[str, Any] | None] | Iterable[str],
        nodes: Iterable[str] | None = None,
        peers: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Shape traffic from `nodes` (default all) to `peers` (default every other node); returns what was done:
        {"behaviours" (parameters filled in), "nodes", "peers", "method"}."""
        if not isinstance(behaviours, Mapping):
            behaviours = {name: None for name in behaviours}
        netem_args(behaviours)  # validates names
        targets = list(nodes) if nodes is not None else list(self.hosts)
        peer_names = list(peers) if peers is not None else list(self.hosts)
        for n in [*targets, *peer_names]:
            if n not in self.hosts:
                raise ValueError(f"unknown node {n!r}")
        method = self.method_for(behaviours)
        full = {k: {**DEFAULT_BEHAVIOURS[k], **(v or {})} for k, v in behaviours.items()}
        if method != "netem":
            full = nfqueue.with_defaults(behaviours)
        elif "reorder" in full and "delay" not in full:
            full["delay"] = dict(DEFAULT_BEHAVIOURS["delay"])
        self.stop()
        self._armed()
        shaped = {k: v for k, v in full.items() if k != "loss"} if method == "nfqueue" else {}
        loss = float(full["loss"]["percent"]) / 100.0 if "loss" in full else None

        addr = {n: h.address for n, h in self.hosts.items()}
        links = [(n, p) for n in targets for p in peer_names if p != n]

        def apply(h: Host) -> None:
            if method == "netem":
                if h.name in targets:
                    addrs = [addr[p] for p in peer_names if p != h.name]
                    h.control.run(netem_script(h.iface, addrs, behaviours), check=True, timeout=30)
                return
            if self.shared:
                queued: list[tuple[str | None, str]] = [(addr[n], addr[p]) for n, p in links]
                received: list[tuple[str, str | None]] = [(addr[n], addr[p]) for n, p in links]
            else:
                queued = [(None, addr[p]) for n, p in links if n == h.name]
                received = [(addr[n], None) for n, p in links if p == h.name]
            script = chain_script(queued if shaped else [], received, loss, self.chain, self.queue_num)
            if shaped and queued:
                self._start_shaper(h, shaped, f"( {script} )")
            else:
                h.control.run(script, check=True, timeout=30)

        self.active = {"behaviours": full, "nodes": targets, "peers": peer_names, "method": method}
        involved = {n for link in links for n in link} | set(targets)
        try:
            if self.shared:
                apply(next(iter(self.hosts.values())))
            else:
                on_hosts([h for n, h in self.hosts.items() if n in involved], apply)
        except CommandError as e:
            raise NemesisError(f"packet fault failed: {e}") from e
        return dict(self.active)

    def stop(self) -> dict[str, dict[str, int]]:
        """Remove every packet fault from every host (idempotent); what the last one did, per sending node:
        packets that met it (counted where they arrive, copies included), lost (iptables / netem drops), and
        delayed, duplicated, reordered (the shaper)."""
        shaping = [n for n in self.hosts if n in set(self.active.get("nodes", ()))]
        method = self.active.get("method")
        c = self.chain

        def clear(h: Host) -> dict[str, dict[str, int]]:
            """Counts on this host by source address ("" for what the host itself sent)."""
            counts: dict[str, dict[str, int]] = {}
            netem = "" if self.shared else f"tc qdisc del dev {shlex.quote(h.iface)} root 2>/dev/null; "
            if method == "netem" and h.name in shaping:
                m = _TC_SENT.search(h.control.run(f"tc -s qdisc show dev {shlex.quote(h.iface)}", timeout=30).stdout)
                counts[""] = {"packets": int(m.group(1)), "lost": int(m.group(2))} if m else {}
                h.control.run(f"{netem}{remove_script(c)}", timeout=30)
            else:
                # unhooked first, so that the counts are final (and the shaper gets nothing more); one round trip
                script = f"{unhook_script(c)} iptables -w -S {c}-IN -v 2>/dev/null; {netem}{remove_script(c)}"
                listing = h.control.run(script, timeout=30).stdout
                counts = chain_counts(listing) if method is not None else {}
            if h.name in self._shapers:
                for src, more in self._stop_shaper(h).items():
                    counts.setdefault(src, {}).update(more)
            return counts

        done: dict[str, dict[str, int]] = {}
        if self.active or self._token is not None:
            hosts = [next(iter(self.hosts.values()))] if self.shared else list(self.hosts.values())
            found = on_hosts(hosts, clear)
            for n in shaping:
                a = self.hosts[n].address
                total = {} if method == "netem" else dict.fromkeys(nfqueue.COUNTERS, 0)  # not done: done to none
                for host, by_source in found.items():
                    own = by_source.get("", {}) if host == n and not self.shared else {}
                    for k, v in [*by_source.get(a, {}).items(), *own.items()]:
                        total[k] = total.get(k, 0) + v
                done[n] = {k: total[k] for k in nfqueue.COUNTERS if k in total}
        self.active = {}
        return done

    heal = stop

    def teardown(self) -> None:
        """Stop every fault and shaper; remove the shaper's files and the probe chain."""
        try:
            self.stop()
        finally:
            probe = f"{self.chain}-T" if self.shared else PROBE_CHAIN

            def remove(h: Host) -> None:
                h.control.run(
                    f"rm -f {' '.join(shlex.quote(self._path(h, e)) for e in ('py', 'pid'))} "
                    f"{shlex.quote(h.workdir.rstrip('/'))}/{SHAPER}.*.json*; "
                    f"iptables -w -F {probe} 2>/dev/null; iptables -w -X {probe} 2>/dev/null; "
                    + remove_script(self.chain),
                    timeout=30,
                )

            if self._token is not None:
                on_hosts(self.hosts.values(), remove)
            self._installed.clear()
            self._disarmed()
