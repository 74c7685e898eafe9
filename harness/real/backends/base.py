"""What every real cluster backend offers: N hosts with addresses, a control transport per host, teardown."""

from __future__ import annotations

import contextlib
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.nemesis.partitions import Grudge
from harness.real.control import cleanup
from harness.real.control.base import Transport

LABEL = "org.kraftwerk.managed"
LABEL_CLUSTER = "org.kraftwerk.cluster"


class BackendError(RuntimeError):
    """The backend cannot run here (not root, no engine, …) or could not create the cluster."""


@dataclass
class Host:
    """One node's machine, as the harness sees it."""

    name: str  # n1, n2, …
    address: str  # its IPv4 address on the cluster network
    control: Transport
    workdir: str  # a writable directory of its own (logs, data, pidfiles, faketime file)
    iface: str = "eth0"  # the interface carrying cluster traffic (for tc)
    python: str = "python3"  # interpreter that runs `python -m nodes` there
    pythonpath: str = ""  # directory holding the `nodes` package there
    faketime_sitedir: str = ""  # directory with the libfaketime time.sleep shim (docker/rootfs/…/faketime)


class PartitionPart(Protocol):
    """A partition nemesis, as `harness.real.faults.RealFaults` drives it and `RealNemesis.partition` offers it:
    `harness.real.faults.net.PartitionNemesis` (iptables on each host) and the local backend's loopback variant
    are the ones. Declared here, where `Backend.partition_nemesis` names it, as the faults import this module."""

    @property
    def active(self) -> Grudge: ...  # the grudge in force

    def setup(self) -> None: ...
    def start(self, grudge: Mapping[str, Iterable[str]]) -> Grudge: ...
    def heal(self) -> None: ...
    def rules(self, node: str) -> list[str]: ...  # the DROP rules in force on a node
    def teardown(self) -> None: ...


class PacketPart(Protocol):
    """A packet nemesis, as `harness.real.faults.RealFaults` drives it: `harness.real.faults.net.PacketNemesis` (tc
    netem, the NFQUEUE shaper or iptables, per host or on one shared stack) is the one. Declared here, where
    `Backend.packet_nemesis` names it, as the faults import this module."""

    def capabilities(self) -> frozenset[str]: ...
    def start(
        self,
        behaviours: Mapping[str, Mapping[str, Any] | None] | Iterable[str],
        nodes: Iterable[str] | None = None,
        peers: Iterable[str] | None = None,
    ) -> dict[str, Any]: ...
    def stop(self) -> dict[str, dict[str, int]]: ...
    def teardown(self) -> None: ...


def new_cluster_id() -> str:
    return secrets.token_hex(3)


def node_names(n: int | Sequence[str]) -> list[str]:
    names = [f"n{i}" for i in range(1, n + 1)] if isinstance(n, int) else list(n)
    if not names:
        raise BackendError("a cluster needs at least one node")
    if len(set(names)) != len(names):
        raise BackendError(f"duplicate node names in {names}")
    return names


class Backend(ABC):
    """A set of hosts created together and torn down together.

    Use as a context manager; teardown also runs on Ctrl-C, SIGTERM and interpreter
    exit (harness.real.control.cleanup), and `down()` removes what a crashed run left.
    """

    kind = "abstract"
    listen_any = True  # nodes listen on 0.0.0.0 (each host has addresses of its own); False: on their address

    def __init__(self, cluster_id: str | None = None) -> None:
        self.cluster_id = cluster_id or new_cluster_id()
        self.hosts: list[Host] = []
        # {host: its ports} for a backend that chooses them (the local backend: hosts share one machine);
        # empty where every host has its own addresses and the DB listens on its fixed ports
        self.ports: dict[str, tuple[int, ...]] = {}
        self.ports_per_host = 2
        self._cleanup_token: int | None = None

    @abstractmethod
    def _create(self, names: list[str]) -> list[Host]:
        """Create the hosts (everything created must be findable by `_destroy` even if this fails midway)."""

    @abstractmethod
    def _destroy(self) -> None:
        """Remove everything of this cluster; idempotent."""

    def create(self, n: int | Sequence[str], *, ports_per_host: int = 2) -> list[Host]:
        """Create `n` hosts (or hosts with these names); returns them, also kept in `self.hosts`. A backend that
        chooses ports gives each host `ports_per_host` of them (the DB's `DBKind.ports`) in `self.ports`."""
        if self.hosts:
            raise BackendError(f"cluster {self.cluster_id} already created")
        if ports_per_host < 0:
            raise BackendError(f"ports per host must be 0 or more, got {ports_per_host}")
        names = node_names(n)
        self.ports_per_host = ports_per_host
        self._cleanup_token = cleanup.register(f"{self.kind} cluster {self.cluster_id}", self._destroy)
        try:
            self.hosts = self._create(names)
        except BaseException:
            self.teardown()
            raise
        return self.hosts

    def teardown(self) -> None:
        """Close transports and remove every container/namespace/link/file of this cluster."""
        with cleanup.shielded():
            for h in self.hosts:
                with contextlib.suppress(Exception):  # a dead connection must not stop the teardown
                    h.control.close()
            self._destroy()
            self.hosts = []
            cleanup.unregister(self._cleanup_token)
            self._cleanup_token = None

    def detach(self) -> None:
        """Leave the cluster running after this process exits (`kraftwerk cluster up`); `down` removes it."""
        for h in self.hosts:
            with contextlib.suppress(Exception):
                h.control.close()
        cleanup.unregister(self._cleanup_token)
        self._cleanup_token = None

    @staticmethod
    def node_env(host: Host) -> dict[str, str]:
        """Environment every node daemon of this backend needs (none by default)."""
        return {}

    def partition_nemesis(self, hosts: list[Host]) -> PartitionPart | None:
        """A partition nemesis of this backend's own, or None for the common one (iptables on each host)."""
        return None

    def packet_nemesis(self, hosts: list[Host]) -> PacketPart | None:
        """A packet nemesis of this backend's own, or None for the common one (netem or a shaper per host)."""
        return None

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host {name!r} in cluster {self.cluster_id}")

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()
