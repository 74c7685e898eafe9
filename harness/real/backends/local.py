"""The `local` backend: node processes on this machine, each on its own 127.0.0.x address.

This is the one way local clusters are made: `kraftwerk test --backend local`, `kraftwerk cluster
--backend local` (harness.real.cluster_local) and the tests and benchmarks (harness.real.cluster_local.LocalCluster)
all get their hosts here and start a DB on them (harness.db).

No root needed for kill, pause (signals) and clock faults (libfaketime LD_PRELOAD). Nodes
bind their listeners to their own loopback address and — through the `localsite`
sitecustomize put on their PYTHONPATH — their outgoing connections too, so a packet's
source address says which node sent it. That is what makes partitions possible (root
only): one iptables chain `KW-<cluster>` jumped to from INPUT holds
`-s <sender> -d <receiver> -j DROP` rules; loopback traffic of anything else is untouched.

Layout: `$KRAFTWERK_LOCAL_DIR` (default /tmp/kraftwerk-local-<uid>)/<cluster>/<node>/ per node,
plus cluster.json; `down()` kills what a crashed run left and removes directory and chain. A
cluster given its own `directory` (`kraftwerk cluster --dir`) keeps its files there: teardown stops
its processes and leaves the directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import ROOT
from harness.nemesis.partitions import Grudge
from harness.real.backends.base import Backend, BackendError, Host
from harness.real.control.netns import NetnsTransport
from harness.real.faults.net import PacketNemesis, PartitionNemesis, validate_grudge

LOCALSITE = Path(__file__).resolve().parent / "localsite"
BASE_DIR = Path(os.environ.get("KRAFTWERK_LOCAL_DIR", f"/tmp/kraftwerk-local-{os.getuid()}"))
CHAIN_PREFIX = "KW-"


def chain_name(cluster_id: str) -> str:
    return f"{CHAIN_PREFIX}{cluster_id}"


def can_partition() -> str | None:
    """None if loopback partitions are possible here, else why not."""
    if os.geteuid() != 0:
        return "partitions on the local backend need root (iptables rules on lo); run as root or drop `partition`"
    if shutil.which("iptables") is None:
        return "partitions on the local backend need iptables (apt-get install iptables)"
    return None


def loopback_addresses(n: int, first: int = 2) -> list[str]:
    """``127.0.0.first …`` n distinct addresses if they can be bound, else ``127.0.0.1`` n times."""
    addresses = [f"127.0.0.{first + i}" for i in range(n)]
    try:
        for address in addresses:
            with socket.socket() as s:
                s.bind((address, 0))
    except OSError:
        return ["127.0.0.1"] * n
    return addresses


def _free_port(address: str, taken: set[tuple[str, int]]) -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind((address, 0))
            port = s.getsockname()[1]
        if (address, port) not in taken:
            taken.add((address, port))
            return port
    raise BackendError(f"no free port on {address}")


def _check_port(address: str, port: int) -> None:
    try:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, port))
    except OSError as exc:
        raise BackendError(f"--base-port: {address}:{port} cannot be bound ({exc.strerror or exc})") from None


class LocalBackend(Backend):
    """Processes on 127.0.0.x, each with `ports_per_host` ports chosen free (or from `base_port`) in
    `ports[name]`, in the order the DB names them (our nodes: (controller, client)).

    Without `directory`, a cluster lives in `base_dir/<cluster id>` and its addresses start at an offset
    chosen by the cluster id (clusters of parallel runs do not share addresses, so partitions of one do not
    cut another); with `directory`, its nodes live in `directory/<node>` from 127.0.0.`first`."""

    kind = "local"
    listen_any = False  # every node has its own 127.0.0.x address on the one loopback interface

    def __init__(
        self,
        cluster_id: str | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        first: int | None = None,
        base_port: int | None = None,
        python: str = sys.executable,
    ) -> None:
        super().__init__(cluster_id)
        self.base_dir = Path(base_dir) if base_dir is not None else BASE_DIR
        self.own_dir = directory is not None
        self.dir = Path(directory) if directory is not None else self.base_dir / self.cluster_id
        self.first = first
        self.base_port = base_port
        self.python = python

    def _create(self, names: list[str]) -> list[Host]:
        if len(names) > 200:
            raise BackendError("the local backend has room for at most 200 nodes")
        k = self.ports_per_host
        if self.base_port is not None and not 1024 <= self.base_port <= 65535 - k * len(names):
            raise BackendError(f"--base-port: {self.base_port} leaves no room for {len(names)} nodes ({k} ports each)")
        first = self.first if self.first is not None else 2 + int(self.cluster_id, 16) % (253 - len(names))
        addresses = loopback_addresses(len(names), first)
        self.dir.mkdir(parents=True, exist_ok=True)
        hosts: list[Host] = []
        taken: set[tuple[str, int]] = set()
        for i, (name, address) in enumerate(zip(names, addresses)):
            if self.base_port is not None:
                # node i's block is P+k(i-1) …; its first port is the last of its tuple (our nodes' client port)
                block = [self.base_port + k * i + j for j in range(k)]
                for port in block:
                    _check_port(address, port)
                self.ports[name] = (*block[1:], *block[:1])
            else:
                self.ports[name] = tuple(_free_port(address, taken) for _ in range(k))
            workdir = self.dir / name
            workdir.mkdir(parents=True, exist_ok=True)
            hosts.append(self.host_at(name, address, str(workdir), self.python, str(ROOT)))
        if not self.own_dir:
            state = {
                "cluster": self.cluster_id,
                "created": time.time(),
                "nodes": [{"name": h.name, "address": h.address, "ports": self.ports[h.name]} for h in hosts],
            }
            (self.dir / "cluster.json").write_text(json.dumps(state) + "\n")
        return hosts

    @staticmethod
    def host_at(name: str, address: str, workdir: str, python: str, pythonpath: str) -> Host:
        """The host record of a local node (also to rebuild the hosts of a running cluster in another process)."""
        return Host(
            name=name,
            address=address,
            control=NetnsTransport(name, None),
            workdir=workdir,
            iface="lo",
            python=python,
            pythonpath=pythonpath,
            faketime_sitedir=str(LOCALSITE),
        )

    def attach(self, records: Sequence[Mapping[str, Any]]) -> list[Host]:
        """Take over a running cluster from its host records (name, address, workdir, python, pythonpath,
        ports): `kraftwerk cluster kill|start|down` in a process other than the one that started it."""
        self.hosts = []
        for rec in records:
            self.ports[rec["name"]] = tuple(rec["ports"])
            self.hosts.append(
                self.host_at(rec["name"], rec["address"], rec["workdir"], rec["python"], rec["pythonpath"])
            )
        return self.hosts

    def record(self, h: Host) -> dict[str, Any]:
        """What `attach` needs of a host."""
        return {
            "name": h.name,
            "address": h.address,
            "workdir": h.workdir,
            "python": h.python,
            "pythonpath": h.pythonpath,
            "ports": list(self.ports[h.name]),
        }

    def _destroy(self) -> None:
        if self.own_dir:
            _kill_pidfiles(self.dir)
        else:
            destroy(self.cluster_id, self.base_dir)

    @staticmethod
    def node_env(host: Host) -> dict[str, str]:
        """Environment that makes a node's outgoing connections leave from its own address."""
        return {"KRAFTWERK_BIND_ADDRESS": host.address}

    def partition_nemesis(self, hosts: list[Host]) -> LocalPartitionNemesis:
        """Partitions between loopback addresses (root only)."""
        return LocalPartitionNemesis(hosts, self.cluster_id)

    def packet_nemesis(self, hosts: list[Host]) -> PacketNemesis:
        """Packet faults between loopback addresses (root only): one chain `KW-<cluster>-P` in OUTPUT and one
        NFQUEUE shaper on a queue of this cluster's own, links told apart by source address."""
        return PacketNemesis(
            hosts,
            shared=True,
            chain=f"{chain_name(self.cluster_id)}-P",
            queue_num=1000 + zlib.crc32(self.cluster_id.encode()) % 60000,
        )


class LocalPartitionNemesis(PartitionNemesis):
    """Partitions between loopback addresses: one shared chain with `-s sender -d receiver` DROP rules."""

    label = "partition nemesis (iptables on lo)"

    def __init__(self, hosts: Iterable[Host], cluster_id: str) -> None:
        super().__init__(list(hosts))
        self.chain = chain_name(cluster_id)

    def _iptables(self, script: str, check: bool = True) -> None:
        r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise BackendError(f"iptables failed: {r.stderr.strip()}")

    def setup(self) -> None:
        self._armed()
        c = self.chain
        self._iptables(
            f"iptables -w -N {c} 2>/dev/null; "
            f"iptables -w -C INPUT -j {c} 2>/dev/null || iptables -w -I INPUT 1 -j {c}; iptables -w -F {c}"
        )
        self._ready = True

    def start(self, grudge: Mapping[str, Iterable[str]]) -> Grudge:
        if not self._ready:
            self.setup()
        clean = validate_grudge(grudge, list(self.hosts))
        rules = [f"iptables -w -F {self.chain}"]
        for dst, sources in clean.items():
            for src in sources:
                s, d = self.hosts[src].address, self.hosts[dst].address
                rules.append(f"iptables -w -A {self.chain} -s {shlex.quote(s)} -d {shlex.quote(d)} -j DROP")
        self._iptables(" && ".join(rules))
        self.active = {k: v for k, v in clean.items() if v}
        return dict(self.active)

    def heal(self) -> None:
        if self._ready:
            self._iptables(f"iptables -w -F {self.chain}")
        self.active = {}

    def rules(self, node: str) -> list[str]:
        out = subprocess.run(["iptables", "-w", "-S", self.chain], capture_output=True, text=True).stdout
        addr = self.hosts[node].address
        return [line for line in out.splitlines() if line.startswith("-A ") and f"-d {addr}/32" in line]

    def teardown(self) -> None:
        if self._ready or self._token is not None:
            remove_chain(self.chain)
        self.active = {}
        self._ready = False
        self._disarmed()


def remove_chain(chain: str) -> None:
    """Remove a chain and every INPUT/OUTPUT jump to it (no error if it does not exist or we are not root)."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return
    subprocess.run(
        [
            "sh",
            "-c",
            f"while iptables -w -D INPUT -j {chain} 2>/dev/null; do :; done; "
            f"while iptables -w -D OUTPUT -j {chain} 2>/dev/null; do :; done; "
            f"iptables -w -F {chain} 2>/dev/null; iptables -w -X {chain} 2>/dev/null; true",
        ],
        capture_output=True,
        timeout=60,
    )


def _chains() -> list[str]:
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return []
    out = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout
    return [line.split()[1] for line in out.splitlines() if line.startswith(f"-N {CHAIN_PREFIX}")]


def destroy(cluster_id: str, base_dir: Path | None = None) -> list[str]:
    """Kill the cluster's processes (by pidfile), remove its chain and directory; what was removed."""
    removed = []
    d = (base_dir or BASE_DIR) / cluster_id
    if d.exists():
        removed += _kill_pidfiles(d)
    chain = chain_name(cluster_id)
    if chain in _chains():
        remove_chain(chain)
        removed.append(f"chain {chain}")
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"dir {d}")
    return removed


def _kill_pidfiles(directory: Path) -> list[str]:
    """SIGKILL every daemon with a pidfile in directory/<node>/; what was killed."""
    killed = []
    control = NetnsTransport("local", None, use_agent=False)
    for pidfile in sorted(directory.glob("*/*.pid")):
        with contextlib.suppress(Exception):
            if control.kill_daemon(str(pidfile), timeout=5) is not None:
                killed.append(f"process {pidfile}")
    return killed


def leftovers(base_dir: Path | None = None) -> list[str]:
    """Directories and iptables chains of any local cluster that still exist."""
    d = base_dir or BASE_DIR
    found = [f"dir {p}" for p in sorted(d.iterdir())] if d.exists() else []
    return found + [f"chain {c}" for c in _chains()]


def down(cluster_id: str | None = None, base_dir: Path | None = None) -> list[str]:
    """Remove one local cluster, or every one (processes, chains, directories)."""
    if cluster_id is not None:
        return destroy(cluster_id, base_dir)
    d = base_dir or BASE_DIR
    ids = {p.name for p in d.iterdir() if p.is_dir()} if d.exists() else set()
    ids |= {c[len(CHAIN_PREFIX) :] for c in _chains()}
    removed = []
    for cid in sorted(ids):
        removed += destroy(cid, base_dir)
    return removed
