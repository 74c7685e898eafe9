"""Partition shapes as grudges: for each node, the nodes it drops packets from.

Pure functions over node names; every backend applies a grudge the same way
(the simulator's network, or iptables DROP rules in a node's own chain).
"""

from __future__ import annotations

import random

Grudge = dict[str, list[str]]
KINDS = ("halves", "one", "leader", "majorities-ring", "bridge", "one-way")


def complete(components: list[list[str]]) -> Grudge:
    """Every component drops packets from every node outside it."""
    everyone = [n for c in components for n in c]
    grudge: Grudge = {}
    for comp in components:
        inside = set(comp)
        for node in comp:
            grudge[node] = [n for n in everyone if n not in inside]
    return grudge


def halves(nodes: list[str], rng: random.Random) -> Grudge:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = len(shuffled) // 2
    return complete([shuffled[:cut], shuffled[cut:]])


def isolate(nodes: list[str], victim: str) -> Grudge:
    return complete([[victim], [n for n in nodes if n != victim]])


def majorities_ring(nodes: list[str], rng: random.Random) -> Grudge:
    """Each node sees a majority (itself and its ring neighbours) and no two see the same one."""
    ring = list(nodes)
    rng.shuffle(ring)
    n = len(ring)
    reach = n // 2  # neighbours on each side; 2*reach + 1 >= majority
    if n < 3:
        return {}
    grudge: Grudge = {}
    for i, node in enumerate(ring):
        visible = {ring[(i + d) % n] for d in range(-(reach // 2 + reach % 2), reach // 2 + reach % 2 + 1)}
        while len(visible) < n // 2 + 1:
            visible.add(ring[(i + len(visible)) % n])
        grudge[node] = [m for m in ring if m not in visible]
    # make it symmetric: a drops b iff b drops a
    for a in ring:
        for b in list(grudge[a]):
            if a not in grudge[b]:
                grudge[b].append(a)
    return {k: sorted(v, key=ring.index) for k, v in grudge.items()}


def bridge(nodes: list[str], rng: random.Random) -> Grudge:
    """Two halves that cannot talk, and one node that talks to both."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if len(shuffled) < 3:
        return halves(nodes, rng)
    middle = shuffled[0]
    rest = shuffled[1:]
    cut = len(rest) // 2
    left, right = rest[:cut], rest[cut:]
    grudge: Grudge = {n: list(right) for n in left}
    grudge.update({n: list(left) for n in right})
    grudge[middle] = []
    return grudge


def one_way(nodes: list[str], rng: random.Random) -> Grudge:
    """One node hears nobody, while everyone still hears it."""
    victim = nodes[rng.randrange(len(nodes))]
    return {victim: [n for n in nodes if n != victim]}


def make(kind: str, nodes: list[str], rng: random.Random, leader: str | None = None) -> Grudge:
    if kind == "halves":
        return halves(nodes, rng)
    if kind == "one":
        return isolate(nodes, nodes[rng.randrange(len(nodes))])
    if kind == "leader":
        return isolate(nodes, leader if leader is not None else nodes[rng.randrange(len(nodes))])
    if kind == "majorities-ring":
        return majorities_ring(nodes, rng)
    if kind == "bridge":
        return bridge(nodes, rng)
    if kind == "one-way":
        return one_way(nodes, rng)
    raise ValueError(f"unknown partition kind {kind!r} (expected one of {', '.join(KINDS)})")
