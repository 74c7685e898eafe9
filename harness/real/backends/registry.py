"""Every backend by name: how to build it, whether it can run here (and why not), how to clean up after it.

The one place that knows the backends. `kraftwerk test` (its choices and validation), the real
runner, `kraftwerk cluster`, `kraftwerk replay` and the `down`/`leftovers` helpers all ask here.

    registry.NAMES                      # ("docker", "netns", "ssh", "local", "sim"), the CLI's order
    registry.why_not("netns")           # None, or why this machine cannot run it
    backend = registry.build("local", log=print)
    registry.down("docker", cluster_id) # what a crashed run left
    registry.control("netns", cluster_id, "n2")  # a node of a cluster another process left running
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from harness.real.backends.base import Backend, BackendError

Log = Callable[[str], None]


@dataclass(frozen=True)
class BackendKind:
    """One backend: what it is and what it can do."""

    name: str
    summary: str
    module: str | None  # the module with its Backend class, down() and leftovers(); None: the simulator
    real: bool = True  # runs real node processes (the runner), rather than the simulator
    cluster: bool = False  # `kraftwerk cluster up` can start it
    partitions_need_root: bool = False  # partitions are possible only as root


KINDS: dict[str, BackendKind] = {
    k.name: k
    for k in (
        BackendKind("docker", "containers on a private network", "harness.real.backends.docker", cluster=True),
        BackendKind("netns", "processes in network namespaces (root)", "harness.real.backends.netns", cluster=True),
        BackendKind("ssh", "hosts you already have, over SSH", "harness.real.ssh"),
        BackendKind(
            "local",
            "processes on distinct 127.0.0.x addresses (partitions only as root)",
            "harness.real.backends.local",
            cluster=True,
            partitions_need_root=True,
        ),
        BackendKind("sim", "the deterministic simulator", None, real=False),
    )
}
NAMES: tuple[str, ...] = tuple(KINDS)
REAL: tuple[str, ...] = tuple(k for k, v in KINDS.items() if v.real)
CLUSTER: tuple[str, ...] = ("local", "netns", "docker")  # `kraftwerk cluster up --backend` (its help's order)
CLEANABLE: tuple[str, ...] = ("docker", "netns", "local")  # backends that can leave something behind


def kind(name: str) -> BackendKind:
    try:
        return KINDS[name]
    except KeyError:
        raise BackendError(f"unknown backend {name!r} (known: {', '.join(NAMES)})") from None


def why_not(
    name: str,
    *,
    nemeses: Collection[str] = (),
    ssh_hosts: str | None = None,
    nodes: int | None = None,
) -> str | None:
    """None if backend `name` can run here with these faults and options, else why not (a message naming the
    option, for exit 254)."""
    k = kind(name)
    if k.name == "local" and {"partition", "clock"} & set(nemeses):
        from harness.real.backends.local import can_partition

        why = can_partition()
        if why:
            asked = "partition" if "partition" in nemeses else "clock (it cuts the leader off)"
            return f"--backend local --nemesis {asked}: {why}"
    if k.name == "local" and "packet" in nemeses:
        from harness.real.backends.local import can_partition

        why = can_partition()  # the same iptables rules on lo, by source address, and an NFQUEUE shaper
        if why:
            return f"--backend local --nemesis packet: {why.replace('partitions', 'packet faults')}"

    if k.name == "netns" and os.geteuid() != 0:
        return "--backend netns needs root (network namespaces); use --backend docker or local"
    if k.name == "ssh":
        if not ssh_hosts:
            return "--backend ssh needs --ssh-hosts FILE"
        from harness.real.ssh import read_hosts

        try:
            count = len(read_hosts(ssh_hosts))
        except ValueError as e:
            return f"--ssh-hosts: {e}"
        if nodes is not None and count != nodes:
            return f"--ssh-hosts lists {count} hosts but --nodes is {nodes}"
    elif ssh_hosts:
        return "--ssh-hosts is only for --backend ssh"
    return None


def build(
    name: str,
    *,
    log: Log = lambda _m: None,
    ssh_hosts: str | None = None,
    ssh_user: str = "root",
    ssh_key: str | None = None,
    ssh_known_hosts: str | None = None,
    **options: Any,
) -> Backend:
    """A real backend ready to create hosts (BackendError if it cannot run here). `options` go to the
    backend's constructor (e.g. the local backend's `directory`, `first`, `base_port`, `python`)."""
    k = kind(name)
    if k.name == "docker":
        from harness.real import image
        from harness.real.backends.docker import DockerBackend

        try:
            built = image.build(log=log)
        except image.ImageError as e:
            raise BackendError(f"docker backend: {e}") from e
        log(f"node image {built.tag} ({'built' if built.built else 'up to date'} in {built.seconds:.1f}s)")
        return DockerBackend(image=built.tag, **options)
    if k.name == "netns":
        from harness.real.backends.netns import NetnsBackend

        return NetnsBackend(**options)
    if k.name == "local":
        from harness.real.backends.local import LocalBackend

        return LocalBackend(**options)
    if k.name == "ssh":
        from harness.real.ssh import SshBackend, read_hosts

        try:
            targets = read_hosts(ssh_hosts or "")
        except ValueError as e:
            raise BackendError(f"--ssh-hosts: {e}") from e
        return SshBackend(targets, user=ssh_user, key_filename=ssh_key, known_hosts=ssh_known_hosts, **options)
    raise BackendError(f"--backend {name} runs no real cluster (it is the simulator)")


def control(name: str, cluster_id: str, node: str) -> Any:
    """The control transport of node `node` in cluster `cluster_id` of backend `name`, rebuilt in another
    process than the one that created it (`kraftwerk cluster kill/start` on a cluster `cluster up` left
    running). BackendError if that backend's nodes cannot be reached so, or the node is gone."""
    k = kind(name)
    attach = getattr(importlib.import_module(k.module), "control", None) if k.module else None
    if attach is None:
        raise BackendError(f"backend {name!r} cannot reach the nodes of a cluster another process started")
    return attach(cluster_id, node)


def module(name: str) -> ModuleType:
    """The module of a backend that can leave something behind (it has down() and leftovers())."""
    if name not in CLEANABLE:
        raise BackendError(f"backend {name!r} leaves nothing to clean up (cleanable: {', '.join(CLEANABLE)})")
    return importlib.import_module(kind(name).module or "")


def down(name: str, cluster_id: str | None = None) -> list[str]:
    """Remove what runs of backend `name` left (only cluster `cluster_id` if given); what was removed."""
    return list(module(name).down(cluster_id))


def leftovers(name: str) -> list[str]:
    """What runs of backend `name` left on this machine."""
    return list(module(name).leftovers())
