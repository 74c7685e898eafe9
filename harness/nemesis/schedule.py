"""Seeded fault schedules: which faults start and stop when, on which nodes.

Each enabled fault package is a flip-flop (start, stop, start, …) with random
intervals, as Jepsen's combined packages; packages overlap freely. The schedule
is concrete data (`schedule.json`), so a run can be driven again without the
random source; only `leader` and `active-controller` targets are resolved when the fault fires. A cluster
laid out in roles (`--controllers`, harness.core.shape) also draws the `controllers`, `brokers` and
`active-controller` targets; the default layout draws exactly what it always did.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from harness.core.shape import ACTIVE_CONTROLLER, BROKERS, CONTROLLERS
from harness.core.streams import stream
from harness.nemesis import partitions

SECOND = 1_000_000_000
MS = 1_000_000
PACKAGES = ("partition", "kill", "pause", "clock", "packet", "disk")
# what `--nemesis all` means: packet faults are asked for by name (on real hosts they need tc netem or NFQUEUE),
# and so are disk faults
ALL = ("partition", "kill", "pause", "clock")
# Each package: (start f, stop f)
FLIP_FLOP = {
    "partition": ("start-partition", "stop-partition"),
    "kill": ("kill", "start"),
    "pause": ("pause", "resume"),
    "clock": ("bump-clock", "reset-clock"),
    "packet": ("start-packet", "stop-packet"),
    "disk": ("start-disk", "stop-disk"),
}
HEAL = {p: stop for p, (_, stop) in FLIP_FLOP.items()}
HEAL_ORDER = ("partition", "packet", "pause", "kill", "disk", "clock")  # network first, clocks last


def cuts_links(packages: Iterable[str]) -> bool:
    """Whether these packages cut links between nodes: partitions, and the clock nemesis (it cuts the leader off
    before stepping its clock back), so the partition part must be set up for either."""
    return bool({"partition", "clock"} & set(packages))


def _parse_names(
    text: str, known: tuple[str, ...], what: str, none_ok: bool, everything: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    """A comma-separated choice from `known` (deduplicated, in order); `all` → `everything` (default: every
    one); `none` or '' → () when `none_ok`; anything else is a ValueError naming `what`."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if none_ok and names in (["none"], []):
        return ()
    if names == ["all"]:
        return everything or known
    if not names:
        raise ValueError(f"no {what} given")
    unknown = [n for n in names if n not in known]
    if unknown:
        extra = "all, none" if none_ok else "all"
        raise ValueError(f"unknown {what} {', '.join(unknown)} (expected any of {', '.join(known)}, {extra})")
    return tuple(dict.fromkeys(names))


def parse_nemeses(text: str) -> list[str]:
    """`partition,kill` → ['partition', 'kill']; `none` or '' → []; `all` → every package but packet."""
    return list(_parse_names(text, PACKAGES, "nemesis", none_ok=True, everything=ALL))


# with roles laid out apart: how often a kill or pause aims at the active controller, every controller, every
# broker (cumulative), before the draw below
ROLE_TARGETS = ((0.2, ACTIVE_CONTROLLER), (0.3, CONTROLLERS), (0.4, BROKERS))


def _targets(rng: random.Random, nodes: list[str], roles: bool = False) -> list[str] | str:
    """A node spec: one node, a minority, a majority, all, or the leader (resolved later); with `roles` (a cluster
    whose controllers and brokers are apart) also the active controller, the controllers or the brokers."""
    if roles:
        r = rng.random()
        for p, target in ROLE_TARGETS:
            if r < p:
                return target
    r = rng.random()
    n = len(nodes)
    if r < 0.4:
        return "leader"
    if r < 0.65:
        k = 1
    elif r < 0.85:
        k = max(1, (n - 1) // 2)
    elif r < 0.95:
        k = n // 2 + 1
    else:
        k = n
    return sorted(rng.sample(nodes, k), key=nodes.index)


def parse_partition_kinds(text: str) -> tuple[str, ...]:
    """`leader,one` → ('leader', 'one'); `all` → every kind; unknown kinds are a ValueError."""
    return _parse_names(text, partitions.KINDS, "partition kind", none_ok=False)


def _start_value(
    package: str, rng: random.Random, nodes: list[str], kinds: tuple[str, ...], roles: bool = False
) -> Any:
    if package == "partition":
        kind = rng.choice(kinds)
        if kind == "leader":
            return {"kind": "leader"}
        return {"kind": kind, "grudge": partitions.make(kind, nodes, rng)}
    if package in ("kill", "pause"):
        return _targets(rng, nodes, roles)
    if package == "packet":
        return _packet_value(rng, nodes)
    if package == "disk":
        return _disk_value(rng, nodes, roles)
    # clock: bump some nodes by ±2^k ms (about 16 ms to 32 s), optionally with drift
    victims = sorted(rng.sample(nodes, rng.randint(1, len(nodes))), key=nodes.index)
    return {
        n: {
            "delta-ms": rng.choice((-1, 1)) * int(2 ** rng.uniform(4, 15)),
            "drift-ppm": rng.choice((0, 0, 1000, -1000, 20000)),
        }
        for n in victims
    }


# parameters drawn for each packet behaviour (tc netem's, as Jepsen's jepsen.net/all-packet-behaviors)
PACKET_PARAMS = {
    "loss": lambda rng: {"percent": rng.choice((5, 10, 20, 40))},
    "delay": lambda rng: {"time-ms": rng.choice((20, 50, 100, 200)), "jitter-ms": rng.choice((0, 10, 50))},
    "duplicate": lambda rng: {"percent": rng.choice((5, 10, 20))},
    "reorder": lambda rng: {"percent": rng.choice((10, 20, 50))},
}


def _disk_value(rng: random.Random, nodes: list[str], roles: bool = False) -> dict[str, Any]:
    """A disk fault: lost unsynced writes or a torn write on some nodes (a power loss may hit several at once),
    or a flipped bit on one node (the leader or another: bits rot on one disk at a time)."""
    fault = rng.choice(("lose-unsynced", "torn", "corrupt"))
    if fault == "corrupt":
        target: Any = "leader" if rng.random() < 0.4 else [rng.choice(nodes)]
    else:
        target = _targets(rng, nodes, roles)
    return {"fault": fault, "nodes": target, "seed": rng.randrange(1 << 31)}


def _packet_value(rng: random.Random, nodes: list[str]) -> dict[str, Any]:
    """One or two packet behaviours on the traffic some nodes (or all) send."""
    names = sorted(rng.sample(sorted(PACKET_PARAMS), rng.choice((1, 1, 2))), key=list(PACKET_PARAMS).index)
    behaviours = {name: PACKET_PARAMS[name](rng) for name in names}
    if rng.random() < 0.5:
        return {"behaviours": behaviours}
    victims = sorted(rng.sample(nodes, rng.randint(1, max(1, len(nodes) // 2))), key=nodes.index)
    return {"behaviours": behaviours, "nodes": victims}


# how often a clock fault is the leader one below instead of a bump of random nodes
LEADER_CLOCK_P = 0.5


def _leader_clock_fault(rng: random.Random, events: list[dict[str, Any]], t: int, end: int, interval_s: float) -> int:
    """The clock fault that leases measured on the wall clock cannot survive, as Jepsen's clock nemesis aims
    bumps at the primary: cut the leader off from the other nodes (clients still reach it), step its wall clock
    back 8–32 s a moment later (while it still leads: the others need an election timeout to replace it), then
    reset the clocks and heal. Appends the events (package "clock") and returns when the fault ends."""
    events.append({"at": t, "package": "clock", "f": "start-partition", "value": {"kind": "leader"}})
    step = {"delta-ms": -int(2 ** rng.uniform(13, 15)), "drift-ppm": rng.choice((0, 0, -1000, -20000))}
    bump_at = t + int(rng.uniform(0.05, 0.4) * SECOND)
    # long enough for the others to elect a leader (a fetch timeout and an election) and write through it
    stop_at = t + int(rng.uniform(max(0.4 * interval_s, 3.5), max(1.2 * interval_s, 8.0)) * SECOND)
    if bump_at < min(stop_at, end):
        events.append({"at": bump_at, "package": "clock", "f": "bump-clock", "value": {"leader": step}})
    if stop_at < end:
        events.append({"at": stop_at, "package": "clock", "f": "reset-clock", "value": None})
        events.append({"at": stop_at + MS, "package": "clock", "f": "stop-partition", "value": None})
    return stop_at + MS


def generate(
    seed: int | str,
    nodes: list[str],
    packages: list[str],
    time_limit_s: float,
    interval_s: float = 5.0,
    partition_kinds: tuple[str, ...] = partitions.KINDS,
    roles: bool = False,
) -> list[dict[str, Any]]:
    """The fault schedule for a run: events sorted by time ({"at": ns, "f", "value", "package"}).
    Partitions are drawn from `partition_kinds` (Jepsen's partition targets); `roles`: the cluster's controllers
    and brokers are apart (`Shape.separate`), so kills, pauses and disk faults also aim at the role targets."""
    rng = stream("nemesis", seed)
    end = int(time_limit_s * SECOND)
    events: list[dict[str, Any]] = []
    for package in packages:
        start_f, stop_f = FLIP_FLOP[package]
        t = int(rng.uniform(0.5, 1.5) * interval_s * SECOND)
        while t < end:
            if package == "clock" and rng.random() < LEADER_CLOCK_P:
                t = _leader_clock_fault(rng, events, t, end, interval_s)
                t += int(rng.uniform(0.5, 1.5) * interval_s * SECOND)
                continue
            value = _start_value(package, rng, nodes, partition_kinds, roles)
            events.append({"at": t, "package": package, "f": start_f, "value": value})
            if package == "kill" and rng.random() < 0.5:
                # a quick crash-restart: the node comes back while the cluster still remembers it
                t += int(rng.uniform(0.02, 1.0) * SECOND)
            else:
                t += int(rng.uniform(0.3, 1.2) * interval_s * SECOND)
            if t >= end:
                break
            events.append({"at": t, "package": package, "f": stop_f, "value": None})
            t += int(rng.uniform(0.5, 1.5) * interval_s * SECOND)
    events.sort(key=lambda e: (e["at"], PACKAGES.index(e["package"])))
    return events
