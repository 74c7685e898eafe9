"""Network-namespace backend: each node a namespace with a veth into a bridge; needs root, no images.

Layout for cluster <id> (all names start with `kw-<id>-` or `kw<id>`):

    kw-<id>-sw       a "switch" namespace holding bridge br0 (so the host's own
                     firewall and bridge-netfilter settings never see node traffic)
    kw-<id>-n1 …     one namespace per node: lo, and eth0 = 10.213.X.i/24 wired to br0
    kw<id>h          a veth on the host, 10.213.X.254/24, wired to br0: the harness
                     (and its clients) reach the nodes through it

The /24 is chosen among 10.213.1-254.0 so that it is not routed on this host. Each
node also gets a directory of its own (default under /var/tmp/kraftwerk/netns/<id>/).
Processes run on the host's file system and pid space, started through
`ip netns exec`; teardown kills every process in the namespaces before deleting them.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness import ROOT
from harness.real.backends.base import Backend, BackendError, Host
from harness.real.control.netns import NetnsTransport

BASE_DIR = Path(os.environ.get("KRAFTWERK_NETNS_DIR", "/var/tmp/kraftwerk/netns"))
LOCK = Path("/tmp/kraftwerk-netns.lock")
SUPERNET = "10.213"
NS_RE = re.compile(r"^kw-([0-9a-f]{6})-")
LINK_RE = re.compile(r"^kw([0-9a-f]{6})h(@|$)")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise BackendError(f"`ip {' '.join(args)}` failed: {r.stderr.strip()}")
    return r


def require_root() -> None:
    """Raise BackendError unless we can manage network namespaces here."""
    if os.geteuid() != 0:
        raise BackendError(
            "the netns backend needs root (it runs `ip netns add`, veth and bridge setup); "
            "run as root, or use --backend docker or local"
        )
    if shutil.which("ip") is None:
        raise BackendError("the netns backend needs iproute2 (`ip`): apt-get install iproute2")


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    with LOCK.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def namespaces() -> list[str]:
    """Every network namespace on this host."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _used_subnets() -> set[int]:
    used = set()
    out = _ip("-4", "route", "show", "table", "all", check=False).stdout
    out += _ip("-4", "-o", "addr", "show", check=False).stdout
    for m in re.finditer(rf"\b{re.escape(SUPERNET)}\.(\d+)\.", out):
        used.add(int(m.group(1)))
    for d in BASE_DIR.glob("*/cluster.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            used.add(int(json.loads(d.read_text())["subnet"].split(".")[2]))
    return used


class NetnsBackend(Backend):
    """Nodes as network namespaces on this machine (root). `base_dir` holds the per-node directories."""

    kind = "netns"

    def __init__(self, cluster_id: str | None = None, base_dir: str | os.PathLike[str] | None = None) -> None:
        require_root()
        super().__init__(cluster_id)
        self.base_dir = Path(base_dir) if base_dir is not None else BASE_DIR
        self.dir = self.base_dir / self.cluster_id
        self.switch = f"kw-{self.cluster_id}-sw"
        self.host_link = f"kw{self.cluster_id}h"
        self.subnet: ipaddress.IPv4Network | None = None

    def ns(self, name: str) -> str:
        return namespace(self.cluster_id, name)

    def _create(self, names: list[str]) -> list[Host]:
        if len(names) > 250:
            raise BackendError("the netns backend allots one /24 per cluster: at most 250 nodes")
        for name in names:
            if not re.fullmatch(r"[a-z0-9]{1,8}", name):
                raise BackendError(f"netns node names must be 1-8 lowercase letters or digits, not {name!r}")
        cid = self.cluster_id
        with _lock():
            free = [x for x in range(1, 255) if x not in _used_subnets()]
            if not free:
                raise BackendError(f"no free /24 left in {SUPERNET}.0.0/16")
            third = free[int(cid, 16) % len(free)]
            self.subnet = ipaddress.ip_network(f"{SUPERNET}.{third}.0/24")
            self.dir.mkdir(parents=True, exist_ok=True)
            state = {"cluster": cid, "subnet": str(self.subnet), "nodes": names, "created": time.time()}
            (self.dir / "cluster.json").write_text(json.dumps(state) + "\n")
            prefix = f"{SUPERNET}.{third}"
            # the switch: a namespace with a bridge, and a veth to the host
            _ip("netns", "add", self.switch)
            sw = ["-n", self.switch]
            _ip(*sw, "link", "set", "lo", "up")
            _ip(*sw, "link", "add", "br0", "type", "bridge")
            _ip(*sw, "link", "set", "br0", "up")
            _ip("link", "add", self.host_link, "type", "veth", "peer", "name", f"kw{cid}p")
            _ip("link", "set", f"kw{cid}p", "netns", self.switch)
            _ip(*sw, "link", "set", f"kw{cid}p", "name", "host")
            _ip(*sw, "link", "set", "host", "master", "br0", "up")
            _ip("addr", "add", f"{prefix}.254/24", "dev", self.host_link)
            _ip("link", "set", self.host_link, "up")
        hosts = []
        for i, name in enumerate(names, start=1):
            ns = self.ns(name)
            a, b = f"kw{cid}{i}a", f"kw{cid}{i}b"
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            _ip("link", "set", a, "netns", ns)
            _ip("-n", ns, "link", "set", a, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{prefix}.{i}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("link", "set", b, "netns", self.switch)
            _ip(*sw, "link", "set", b, "name", name)
            _ip(*sw, "link", "set", name, "master", "br0", "up")
            workdir = self.dir / name
            workdir.mkdir(parents=True, exist_ok=True)
            hosts.append(
                Host(
                    name=name,
                    address=f"{prefix}.{i}",
                    control=NetnsTransport(name, ns),
                    workdir=str(workdir),
                    python=sys.executable,
                    pythonpath=str(ROOT),
                    faketime_sitedir=str(ROOT / "docker" / "rootfs" / "opt" / "kraftwerk" / "faketime"),
                )
            )
        return hosts

    def _destroy(self) -> None:
        destroy(self.cluster_id, self.base_dir)


def namespace(cluster_id: str, name: str) -> str:
    """The network namespace of node `name` in cluster `cluster_id`."""
    return f"kw-{cluster_id}-{name}"


def control(cluster_id: str, name: str) -> NetnsTransport:
    """Node `name`'s control transport in running cluster `cluster_id`, rebuilt in another process than the
    one that created it (`kraftwerk cluster kill/start`)."""
    return NetnsTransport(name, namespace(cluster_id, name))


def _kill_namespace_processes(ns: str) -> None:
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
        if not pids:
            return
        for pid in pids:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        time.sleep(0.05)


def destroy(cluster_id: str, base_dir: Path | None = None) -> list[str]:
    """Kill processes in, and delete, every namespace, host link and directory of one cluster."""
    removed = []
    for ns in namespaces():
        if ns.startswith(f"kw-{cluster_id}-"):
            _kill_namespace_processes(ns)
            _ip("netns", "del", ns, check=False)
            removed.append(f"netns {ns}")
    link = f"kw{cluster_id}h"
    if _ip("link", "show", link, check=False).returncode == 0:
        _ip("link", "del", link, check=False)
        removed.append(f"link {link}")
    d = (base_dir or BASE_DIR) / cluster_id
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"dir {d}")
    return removed


def leftovers(base_dir: Path | None = None) -> list[str]:
    """Namespaces, host links and directories of any kraftwerk netns cluster that still exist."""
    found = [f"netns {ns}" for ns in namespaces() if NS_RE.match(ns)]
    links = _ip("-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        parts = line.split(": ")
        if len(parts) > 1 and LINK_RE.match(parts[1]):
            found.append(f"link {parts[1].split('@')[0]}")
    d = base_dir or BASE_DIR
    if d.exists():
        found += [f"dir {p}" for p in sorted(d.iterdir())]
    return found


def down(cluster_id: str | None = None, base_dir: Path | None = None) -> list[str]:
    """Remove one cluster, or every kraftwerk netns cluster (namespaces, links, directories)."""
    require_root()
    if cluster_id is not None:
        return destroy(cluster_id, base_dir)
    ids = {m.group(1) for ns in namespaces() if (m := NS_RE.match(ns))}
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(": ")
        if len(parts) > 1 and (m := LINK_RE.match(parts[1])):
            ids.add(m.group(1))
    d = base_dir or BASE_DIR
    if d.exists():
        ids |= {p.name for p in d.iterdir() if re.fullmatch(r"[0-9a-f]{6}", p.name)}
    removed = []
    for cid in sorted(ids):
        removed += destroy(cid, base_dir)
    return removed
