"""Named random streams: the one place where a test's seed becomes `random.Random`s.

Every random choice of a test (faults, operations, clients, the simulated network,
nodes and disks) draws from a stream named here, seeded from the test's seed and
the stream's name, so removing the draws of one stream never reshuffles another.
The seed strings are those kraftwerk has always used: a seed gives the same
history it gave before these streams had names.
"""

from __future__ import annotations

import random

# stream name → what it draws
STREAMS: dict[str, str] = {
    "nemesis": "the fault schedule (harness.nemesis.schedule.generate)",
    "nemesis-run": "targets the nemesis resolves when a fault fires",
    "interpreter": "which free process gets the next operation (the interpreter core, both runtimes)",
    "interpreter-final": "simulator: the interpreter core's choices in the final-read phase",
    # workload and client: seeded inside workloads/ (which may not import harness), with these same keys
    "workload": "the workload's operations (keys, values, functions)",
    "client": "one client: which node it talks to (per thread and process)",
    "setup": "real runtime: the client that creates the queue topic",
    "transport": "real runtime: the node connections' reconnect jitter",
    "packets": "simulator: packet faults (loss, delay, duplication, reordering) on the links",
    "net": "simulator: message latency and loss, and the per-link seeds",
    "link": "simulator: one network link's drops and delays (seeded by the net stream)",
    "nodes": "simulator: the per-node disk seeds",
    "core": "simulator: one node core's election timeouts",
    "disk": "simulator: one node's disk latency",
    "start-smaller": "shrink: fresh small runs to start shrinking from",
    "start-longer": "shrink: fresh longer runs to start shrinking from",
    "robust-faults": "shrink --robust: how late each fault lands in the other timings",
    "robust-cluster": "shrink --robust: how late the main phase starts and killed nodes serve in the other timings",
}


def stream(name: str, seed: int | float | str, *parts: object) -> random.Random:
    """The random stream `name` of `seed`, optionally per part (a node, a client slot, …).

    The stream `link` is keyed `seed-src-dst` without its name (its seed is already a draw of `net`).
    """
    if name not in STREAMS:
        raise KeyError(f"unknown random stream {name!r} (known: {', '.join(STREAMS)})")
    key = (seed, *parts) if name == "link" else (name, seed, *parts)
    return random.Random("-".join(str(p) for p in key))
