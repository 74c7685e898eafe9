"""What every DB whose members are one daemon per host does alike, written once (harness.db.protocol).

`DaemonDB` is the scaffolding: each member is a detached daemon with a pidfile, started, killed,
paused and resumed through its host's control transport (`harness.real.control`); `with db:` starts
them all and stops them on the way out; `collect` stops them, copies each host's log files into
nodes/<host>/ and merges the members' events. A DB supplies its daemon (`spec`, `pidfile`), its files
(`log_files`, `data_dir`), its `setup`, its clients (`endpoints`, `transport`) and how it knows who
leads.

`ProbedDB` adds that last part for a system nobody here wrote, from one probe per member: `probe(name)`
says what the member thinks now, as a `Status` (epoch, role, leader and, where it knows it, voted_for).
On the probe it builds `leader`, `wait_ready` and `wait_serving`, and a status poller: from `start_all`
until `collect`, one thread per member probes it every `poll_interval` seconds and records each change
as a `state` event in the format of docs/formats.md "Node events", which `collect` writes to
nodes/<host>/events.jsonl and hands to the epochs checker (two leaders in one epoch, two votes in one
epoch). Leaders that come and go between two polls are not seen.

Our nodes (`harness.db.nodes.NodeDB`) write their own events and answer a richer status
(DescribeQuorum-like, with partition leaders), so they use `DaemonDB` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from harness.db.protocol import ClusterNotReady, EnvSource
from harness.real.backends.base import Host
from harness.real.control.base import ControlError, DaemonSpec
from harness.real.faults.common import on_hosts

Events = list[dict[str, Any]]
Collected = tuple[Events, dict[str, Events], dict[str, Any]]


class DaemonDB:
    """One daemon per host, by pidfile (see the module docstring). Subclasses call `super().__init__` and
    define `spec`, `pidfile`, `log_files`, `data_dir`, `setup`, `endpoints`, `transport`, `leader` and
    `wait_ready`; `collect` asks `host_events` and `dump` for what each host leaves."""

    label = "db"  # how messages name it

    def __init__(self, hosts: Sequence[Host], *, env: EnvSource | None = None) -> None:
        self.hosts = list(hosts)
        self.by_name = {h.name: h for h in self.hosts}
        self.env = env
        self.partition_logs: dict[str, dict[str, Events]] = {}  # a DB with partitions fills it in collect
        self._started = False

    # ------------------------------------------------------------------ what a DB supplies
    def spec(self, h: Host) -> DaemonSpec:
        """How to (re)start the daemon of `h`."""
        raise NotImplementedError

    def pidfile(self, h: Host) -> str:
        raise NotImplementedError

    def log_files(self, h: Host) -> dict[str, str]:
        """{path on the host: name under nodes/<host>/ in the run directory}."""
        raise NotImplementedError

    def data_dir(self, h: Host) -> str:
        raise NotImplementedError

    def setup(self) -> None:
        """Write every host's configuration (nothing runs yet)."""
        raise NotImplementedError

    def endpoints(self) -> dict[str, tuple[str, int]]:
        raise NotImplementedError

    def transport(self, seed: int) -> Any:
        raise NotImplementedError

    async def leader(self, timeout: float = 1.0) -> str | None:
        raise NotImplementedError

    async def wait_ready(self, timeout: float, names: Sequence[str] | None = None) -> tuple[str, float]:
        raise NotImplementedError

    async def wait_serving(self, names: Sequence[str], timeout: float = 10.0) -> bool:
        raise NotImplementedError

    async def partition_leader(self, timeout: float = 1.0) -> str | None:
        """What a "leader" fault target means: for a DB without partitions, the leader."""
        return await self.leader(timeout)

    # ------------------------------------------------------------------ daemons
    def start_all(self) -> None:
        self._started = True
        on_hosts(self.hosts, lambda h: h.control.start_daemon(self.spec(h)))

    def stop_all(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGCONT + SIGTERM, SIGKILL after `timeout`) of every member still running."""
        on_hosts(self.hosts, lambda h: h.control.stop_daemon(self.pidfile(h), timeout=timeout))
        self._started = False

    def teardown(self) -> None:
        """Stop every member that still runs (files stay for `collect`)."""
        self.stop_all()

    def start(self, name: str) -> int | None:
        """Start one member again (same configuration and data); its pid."""
        h = self.by_name[name]
        return h.control.start_daemon(self.spec(h))

    def kill(self, name: str) -> int | None:
        """SIGKILL one member (and wait until it is gone); the pid it had, None if it was not running."""
        h = self.by_name[name]
        return h.control.kill_daemon(self.pidfile(h))

    def pause(self, name: str) -> int | None:
        h = self.by_name[name]
        return h.control.pause_daemon(self.pidfile(h))

    def resume(self, name: str) -> int | None:
        h = self.by_name[name]
        return h.control.resume_daemon(self.pidfile(h))

    def running(self) -> dict[str, bool]:
        return on_hosts(self.hosts, lambda h: h.control.daemon_status(self.pidfile(h)).running)

    def __enter__(self) -> DaemonDB:
        """Start every member (call `setup` first)."""
        self.start_all()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            with contextlib.suppress(Exception):  # the backend's teardown removes what is left
                self.stop_all(timeout=5.0)

    # ------------------------------------------------------------------ collection
    def collect_notes(self) -> dict[str, Any]:
        """Notes of this DB's own beside "missing" and "fatal" (taken before the members stop)."""
        return {}

    def before_stop(self, run_dir: Path, notes: dict[str, Any]) -> None:
        """What to ask the members while they still run (a DB with partitions dumps them here)."""

    def host_events(self, h: Host, out: Path, notes: dict[str, Any]) -> Events:
        """The events of host `h`, once its files are in `out` (nodes/<host>/)."""
        return []

    def fatal(self, h: Host, out: Path) -> list[str]:
        """Why member `h` stopped itself on an illegal state, from its files in `out` ([] if it did not)."""
        return []

    def dump(self, h: Host, notes: dict[str, Any]) -> Events | None:
        """The committed log of a stopped member, for logs/<host>.jsonl (None: this DB has none)."""
        return None

    def collect(self, run_dir: Path) -> Collected:
        """Stop the members, then gather into `run_dir`: (merged events, committed-log dumps {host: entries},
        notes {"missing": [host:file], "fatal": {host: [reasons]}, …}). Each host's `log_files` go to
        nodes/<host>/."""
        notes: dict[str, Any] = {"missing": [], "fatal": {}, **self.collect_notes()}
        self.before_stop(run_dir, notes)
        self.stop_all()

        def fetch(h: Host) -> tuple[Events, Events | None]:
            out = run_dir / "nodes" / h.name
            out.mkdir(parents=True, exist_ok=True)
            for remote, local in self.log_files(h).items():
                try:
                    (out / local).write_bytes(h.control.get_file(remote))
                except ControlError:
                    notes["missing"].append(f"{h.name}:{local}")
            fatal = self.fatal(h, out)
            if fatal:
                notes["fatal"][h.name] = fatal
            return self.host_events(h, out, notes), self.dump(h, notes)

        fetched = on_hosts(self.hosts, fetch)
        logs = {h.name: fetched[h.name][1] for h in self.hosts if fetched[h.name][1] is not None}
        return merge_events([fetched[h.name][0] for h in self.hosts]), logs, notes  # type: ignore[return-value]


class Status(NamedTuple):
    """What one member says of itself: its epoch (raft term), role (docs/formats.md "Node events": leader,
    follower, candidate, …), the member it follows (None: none known) and the one it voted for in this epoch
    (None: none, or not known)."""

    epoch: int
    role: str
    leader: str | None
    voted_for: str | None = None


POLL_INTERVAL = 0.1  # seconds between two probes of one member by the status poller


class ProbedDB(DaemonDB):
    """A DaemonDB whose leaders, readiness and `state` events come from `probe(name)` (module docstring)."""

    def __init__(
        self, hosts: Sequence[Host], *, env: EnvSource | None = None, poll_interval: float = POLL_INTERVAL
    ) -> None:
        super().__init__(hosts, env=env)
        self.poll_interval = poll_interval
        self.events: dict[str, Events] = {h.name: [] for h in self.hosts}
        self.polls: dict[str, int] = {h.name: 0 for h in self.hosts}
        self._t0 = time.monotonic_ns()
        self._stop = threading.Event()
        self._pollers: list[threading.Thread] = []

    def probe(self, name: str, timeout: float = 0.5) -> Status | None:
        """What member `name` says of itself now, None if it does not answer (blocking)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ leaders and readiness
    def statuses_now(self, names: Sequence[str] | None = None, timeout: float = 0.5) -> dict[str, Status | None]:
        """Every member's (of `names`) status, probed at once."""
        names = list(names) if names is not None else [h.name for h in self.hosts]
        with ThreadPoolExecutor(max_workers=max(1, len(names)), thread_name_prefix="db-probe") as pool:
            return dict(zip(names, pool.map(lambda n: self.probe(n, timeout), names)))

    async def statuses(self, names: Sequence[str] | None = None, timeout: float = 0.5) -> dict[str, Status | None]:
        return await asyncio.get_running_loop().run_in_executor(None, self.statuses_now, names, timeout)

    @staticmethod
    def leader_of(statuses: Mapping[str, Status | None]) -> str | None:
        """The member that says it leads, in the highest epoch."""
        best: tuple[int, str | None] = (-1, None)
        for name, s in statuses.items():
            if s is not None and s.role == "leader" and s.epoch > best[0]:
                best = (s.epoch, name)
        return best[1]

    @classmethod
    def agreed_leader(cls, statuses: Mapping[str, Status | None]) -> str | None:
        """The leader if every member answers and follows it in its epoch, else None."""
        leader = cls.leader_of(statuses)
        if leader is None or any(s is None for s in statuses.values()):
            return None
        epoch = statuses[leader].epoch  # type: ignore[union-attr]
        if all(s is not None and s.epoch == epoch and s.leader == leader for s in statuses.values()):
            return leader
        return None

    async def leader(self, timeout: float = 1.0) -> str | None:
        return self.leader_of(await self.statuses(timeout=min(timeout, 0.5)))

    async def wait_ready(self, timeout: float, names: Sequence[str] | None = None) -> tuple[str, float]:
        """Wait until a leader is elected and every member (of `names`) answers and follows it; (leader,
        seconds). Raises ClusterNotReady."""
        started = time.monotonic()
        statuses: dict[str, Status | None] = {}
        while time.monotonic() - started < timeout:
            statuses = await self.statuses(names)
            leader = self.agreed_leader(statuses)
            if leader is not None:
                return leader, time.monotonic() - started
            await asyncio.sleep(0.1)
        summary = {n: None if s is None else s._asdict() for n, s in statuses.items()}
        raise ClusterNotReady(f"{self.label}: no leader known to every member within {timeout:g}s: {summary}")

    async def wait_serving(self, names: Sequence[str], timeout: float = 10.0) -> bool:
        """Wait until each of `names` answers and knows a leader; False if some did not within `timeout`."""
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending and time.monotonic() < deadline:
            statuses = await self.statuses(pending, 0.25)
            pending = [n for n, s in statuses.items() if s is None or s.leader is None]
            if pending:
                await asyncio.sleep(0.05)
        return not pending

    # ------------------------------------------------------------------ the status poller
    def start_all(self) -> None:
        super().start_all()
        self._stop.clear()
        self._pollers = [
            threading.Thread(target=self._poll, args=(h.name,), name=f"db-poll-{h.name}", daemon=True)
            for h in self.hosts
        ]
        for t in self._pollers:
            t.start()

    def stop_all(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for t in self._pollers:
            t.join(timeout=5.0)
        self._pollers = []
        super().stop_all(timeout)

    @staticmethod
    def event_of(name: str, status: Status) -> dict[str, Any]:
        """A `state` event (docs/formats.md "Node events") of member `name` (the poller adds its time)."""
        ev: dict[str, Any] = {"node": name, "type": "state", "epoch": status.epoch, "role": status.role}
        if status.leader is not None:
            ev["leader"] = status.leader
        if status.voted_for is not None:
            ev["voted_for"] = status.voted_for
        return ev

    def _poll(self, name: str) -> None:
        last: Status | None = None
        while not self._stop.is_set():
            began = time.monotonic()
            status = self.probe(name, timeout=max(self.poll_interval * 4, 0.3))
            if status is not None:
                self.polls[name] += 1
                if status != last:
                    last = status
                    self.events[name].append({**self.event_of(name, status), "time": time.monotonic_ns() - self._t0})
            self._stop.wait(max(0.0, self.poll_interval - (time.monotonic() - began)))

    def host_events(self, h: Host, out: Path, notes: dict[str, Any]) -> Events:
        """The polled `state` events of `h`, also written to nodes/<host>/events.jsonl."""
        text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in self.events[h.name])
        (out / "events.jsonl").write_text(text, encoding="utf-8")
        return self.events[h.name]

    def collect_notes(self) -> dict[str, Any]:
        return {"status-polls": dict(self.polls)}


def merge_events(per_node: Sequence[Sequence[dict[str, Any]]]) -> Events:
    """One stream of every node's events, roughly by time, never reordering one node's events."""
    streams = [
        [(e["time"] if isinstance(e.get("time"), int) else 0, i, e) for e in evs] for i, evs in enumerate(per_node)
    ]
    return [e for _, _, e in heapq.merge(*streams, key=lambda x: (x[0], x[1]))]
