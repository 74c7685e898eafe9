"""The DB protocol: what a system under test offers the harness, like Jepsen's `jepsen.db`.

A DB is bound to the hosts a backend created (`harness.real.backends`): it writes its configuration
onto them, starts and stops its daemons through each host's control transport, says who leads,
where its clients connect and which log files it leaves, and gathers what it wrote into the run
directory. Backends, nemeses and workloads know only this protocol; `harness.db.nodes.NodeDB`
(our KRaft-style nodes) is one implementation, a real system such as etcd is another.

Life cycle, as the runner (`harness.real.run`) drives it::

    db = registry.kind(name).factory(context)   # harness.db.registry: the DB of this run
    db.env = …                          # the nemesis's and the backend's environment for every daemon
    db.setup()                          # configuration and data directories on every host
    with db:                            # start_all(): every daemon (detached; pidfile per host) … stop_all()
        leader, s = await db.wait_ready(t)  # a leader known to every node: raise ClusterNotReady otherwise
        ...                             # clients through db.transport(seed); faults: kill/start/pause/resume
                                        # (name), "leader" targets from db.partition_leader(), restarted
                                        # members awaited with db.wait_serving, disk faults in db.data_dir(h)
        events, logs, notes = db.collect(run_dir)   # stops the daemons, then copies logs and dumps
    db.teardown()                       # stop whatever still runs

`harness.db.etcd.EtcdDB` (etcd, `--db etcd`) is the second implementation: a system nobody here wrote.
What is shared is written once in `harness.db.base`; what a DB can do (backends, workloads, faults, bugs,
options) is declared in its registry entry (`harness.db.registry.DBKind`), not probed on the DB.

Restarts done by a nemesis use `db.spec(host)` (the daemon's command line and environment), so a
restarted daemon gets the same configuration, plus the nemesis's environment through `db.env`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.core.runtime import NotReady
from harness.real.backends.base import Host
from harness.real.control.base import DaemonSpec

EnvSource = Callable[[Host], Mapping[str, str]]
"""Extra environment of a host's daemon (the clock nemesis's libfaketime, the local backend's bind address)."""


class ClusterNotReady(NotReady):
    """The DB did not elect a leader and answer within the time allowed."""


@runtime_checkable
class DB(Protocol):
    """A system under test on a set of hosts (see the module docstring for the life cycle)."""

    hosts: list[Host]
    env: EnvSource | None
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]]
    """Per-partition committed logs gathered by `collect` ({partition: {node: entries}}); empty for a DB
    without partitions."""

    # --- setup and daemons
    def setup(self) -> None:
        """Write every host's configuration and create its data directory (nothing runs yet)."""

    def teardown(self) -> None:
        """Stop every daemon that still runs (gracefully, then SIGKILL); files stay for `collect`."""

    def spec(self, host: Host) -> DaemonSpec:
        """How to (re)start the daemon of `host`."""

    def start_all(self) -> None:
        """Start every host's daemon."""

    def start(self, name: str) -> int | None:
        """Start the daemon of one host again (same configuration and data); its pid."""

    def kill(self, name: str) -> int | None:
        """SIGKILL the daemon of one host; the pid it had, None if it was not running."""

    def pause(self, name: str) -> int | None:
        """SIGSTOP the daemon of one host."""

    def resume(self, name: str) -> int | None:
        """SIGCONT the daemon of one host."""

    def stop_all(self, timeout: float = 10.0) -> None:
        """Graceful stop of every daemon (SIGKILL after `timeout`)."""

    def running(self) -> dict[str, bool]:
        """{host: is its daemon running}."""

    def __enter__(self) -> DB:
        """Start every daemon (`start_all`; call `setup` first)."""

    def __exit__(self, *exc: object) -> None:
        """Stop every daemon this started that still runs (errors suppressed: the backend removes the rest)."""

    # --- clients and leaders
    def endpoints(self) -> dict[str, tuple[str, int]]:
        """Where clients connect: {host: (address, port)}."""

    async def leader(self, timeout: float = 1.0) -> str | None:
        """The host that leads now (None if none answers as leader)."""

    async def partition_leader(self, timeout: float = 1.0) -> str | None:
        """What a "leader" fault target means: for a DB with partitions (our brokers) the node leading the
        most partitions, else `leader()`."""

    async def wait_ready(self, timeout: float, names: Sequence[str] | None = None) -> tuple[str, float]:
        """Wait until a leader is elected and every host (of `names`) answers and knows it; (leader, seconds).
        Raises ClusterNotReady."""

    async def wait_serving(self, names: Sequence[str], timeout: float = 10.0) -> bool:
        """Wait until each of `names` answers clients again (after a restart); False if some did not."""

    def transport(self, seed: int) -> Any:
        """The workloads' transport to this DB: called once per client process, it opens a connection whose
        `call(Request)` answers `Reply(body)` or `Failure` (workloads.protocol); `seed` for any jitter."""

    # --- files
    def data_dir(self, host: Host) -> str:
        """The daemon's data directory on `host` (disk faults damage it)."""

    def log_files(self, host: Host) -> dict[str, str]:
        """Files this DB leaves on `host`: {path on the host: name under nodes/<host>/ in the run directory}."""

    def collect(self, run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], dict[str, Any]]:
        """Stop the daemons and gather into `run_dir`: (merged node events for events.jsonl, committed-log dumps
        {node: entries} for logs/<node>.jsonl, notes {"missing": [...], "fatal": {node: [reasons]}, ...})."""
