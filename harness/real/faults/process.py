"""Process faults on real hosts: kill (SIGKILL, later restart) and pause (SIGSTOP/SIGCONT).

The nemesis knows how to (re)start each node's daemon from a DaemonSpec, given
per host or by a function of the host (so restarts pick up the clock nemesis's
environment). Healing resumes paused nodes and restarts killed ones; teardown
only resumes (stopping daemons is the cluster's business).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from harness.real.backends.base import Host
from harness.real.control.base import DaemonSpec
from harness.real.faults.common import Undoable, on_hosts

SpecSource = Mapping[str, DaemonSpec] | Callable[[Host], DaemonSpec]


class ProcessNemesis(Undoable):
    """Kill/restart and pause/resume the daemon of each node."""

    label = "process nemesis (kill/pause)"

    def __init__(self, hosts: Sequence[Host], daemons: SpecSource) -> None:
        super().__init__()
        self.hosts = {h.name: h for h in hosts}
        self.daemons = daemons
        self.killed: set[str] = set()
        self.paused: set[str] = set()

    def spec(self, node: str) -> DaemonSpec:
        d = self.daemons
        return d(self.hosts[node]) if callable(d) else d[node]

    def setup(self) -> None:
        self._armed()

    def _check(self, nodes: Iterable[str]) -> list[str]:
        names = list(dict.fromkeys(nodes))
        for n in names:
            if n not in self.hosts:
                raise ValueError(f"unknown node {n!r}")
        return names

    def kill(self, nodes: Iterable[str]) -> list[str]:
        """SIGKILL each node's daemon (whole process group) and wait until it is gone; the nodes killed."""
        names = self._check(nodes)
        self._armed()
        pids = on_hosts([self.hosts[n] for n in names], lambda h: h.control.kill_daemon(self.spec(h.name).pidfile))
        self.killed.update(names)
        self.paused.difference_update(names)
        return [n for n in names if pids[n] is not None]

    def start(self, nodes: Iterable[str] | None = None) -> list[str]:
        """Restart killed daemons (default: every node killed so far); the nodes started."""
        names = self._check(nodes if nodes is not None else sorted(self.killed, key=list(self.hosts).index))

        def start(h: Host) -> bool:
            spec = self.spec(h.name)
            if h.control.daemon_status(spec.pidfile).running:
                return False
            h.control.start_daemon(spec)
            return True

        started = on_hosts([self.hosts[n] for n in names], start)
        self.killed.difference_update(names)
        return [n for n in names if started[n]]

    def pause(self, nodes: Iterable[str]) -> list[str]:
        """SIGSTOP each node's daemon; the nodes paused."""
        names = self._check(nodes)
        self._armed()
        pids = on_hosts([self.hosts[n] for n in names], lambda h: h.control.pause_daemon(self.spec(h.name).pidfile))
        paused = [n for n in names if pids[n] is not None]
        self.paused.update(paused)
        return paused

    def resume(self, nodes: Iterable[str] | None = None) -> list[str]:
        """SIGCONT paused daemons (default: every node paused so far); the nodes resumed."""
        names = self._check(nodes if nodes is not None else sorted(self.paused, key=list(self.hosts).index))
        on_hosts([self.hosts[n] for n in names], lambda h: h.control.resume_daemon(self.spec(h.name).pidfile))
        self.paused.difference_update(names)
        return names

    def heal(self) -> dict[str, list[str]]:
        return {"resumed": self.resume(), "started": self.start()}

    def teardown(self) -> None:
        """Resume whatever is paused (a stopped process cannot be shut down gracefully)."""
        if self.paused:
            self.resume()
        self.killed.clear()
        self._disarmed()
