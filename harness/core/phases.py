"""The phases of a test and their time limits: one set, the same on every runtime (`harness.core.run`).

A test runs these phases, in this order, on the simulator and on real clusters alike:

setup     wait until a leader is known to every node (`ready`), then run the workload's setup on clients
          of its own (`setup`: the queue creates its topic and waits until every partition is led);
main      clients run the workload while the nemesis injects faults, for the test's time limit;
heal      every fault is healed: partitions, pauses, clocks, packet faults; killed nodes restarted;
recovery  wait at least the test's `settle` seconds (TestSpec.settle, default `SETTLE`: late consequences
          of a fault show before the final reads, as Jepsen's tests sleep before theirs), and until a
          leader is known to every running node, up to `recovery` seconds counted from the heal;
final     clients read every key back (the queue drains every partition), for at most `final` seconds;
collect   the nodes' events and committed logs are gathered, then the run is checked.

A client operation that has no answer after `op_timeout` seconds completes `info`. The ready and
setup limits only fire on a broken cluster (a healthy one is ready within seconds).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Phases:
    """Seconds each phase may take (see the module docstring)."""

    ready: float = 120.0  # a fresh cluster that has not elected a leader known to all by then is broken
    setup: float = 120.0  # ... nor finished the workload's setup (the queue's topic) by then
    settle: float = 10.0  # the default of TestSpec.settle: at least this long from the heal to the final reads
    recovery: float = 30.0  # from the heal, for a leader known to every running node
    final: float = 20.0  # allowed for the final reads
    op_timeout: float = 2.0  # a client's request without an answer by then completes info


PHASES = Phases()
SETTLE = PHASES.settle
