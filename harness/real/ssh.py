"""The `ssh` backend: hosts you already have, driven over SSH (harness.real.control.ssh, paramiko).

`--ssh-hosts FILE` lists one host per line, `[user@]address[:port]` (`#` comments); they
become nodes n1, n2, … in that order. Each host needs python3 (3.11+), and for the faults,
iptables (partitions) and libfaketime (clock); a non-root user needs passwordless sudo.
Host keys are checked against `--ssh-known-hosts` (default ~/.ssh/known_hosts).

Nothing is installed system-wide: the `nodes` package and the libfaketime sleep shim are
unpacked under /var/tmp/kraftwerk-ssh/<cluster>/<node>/, which teardown removes together
with anything still running from it.
"""

from __future__ import annotations

import io
import os
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness import ROOT
from harness.real.backends.base import Backend, BackendError, Host
from harness.real.control.base import ControlError
from harness.real.control.ssh import SSHTransport
from harness.real.faults.common import on_hosts

REMOTE_BASE = "/var/tmp/kraftwerk-ssh"
FAKETIME_SHIM = ROOT / "docker" / "rootfs" / "opt" / "kraftwerk" / "faketime" / "sitecustomize.py"


@dataclass(frozen=True)
class SshTarget:
    address: str
    port: int = 22
    user: str | None = None


def parse_hosts(text: str) -> list[SshTarget]:
    """Parse a hosts file: `[user@]address[:port]` per line; ValueError names a bad line."""
    targets = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if len(line.split()) != 1:
            raise ValueError(f"line {no}: expected [user@]address[:port], got {raw.strip()!r}")
        user = None
        if "@" in line:
            user, line = line.split("@", 1)
        port = 22
        if line.count(":") == 1:
            line, port_text = line.split(":")
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ValueError(f"line {no}: bad port {port_text!r}")
            port = int(port_text)
        if not line:
            raise ValueError(f"line {no}: no address")
        targets.append(SshTarget(line, port, user or None))
    return targets


def read_hosts(path: str | os.PathLike[str]) -> list[SshTarget]:
    try:
        targets = parse_hosts(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    if not targets:
        raise ValueError(f"{path} lists no hosts")
    return targets


def package_archive() -> bytes:
    """A tar.gz of the standard-library-only `nodes` package and the libfaketime sleep shim."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted((ROOT / "nodes").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                tar.add(str(path), f"nodes/{path.relative_to(ROOT / 'nodes').as_posix()}")
        tar.add(str(FAKETIME_SHIM), "faketime/sitecustomize.py")
    return buf.getvalue()


class SshBackend(Backend):
    """Existing machines as nodes. `create(n)` needs exactly n hosts in the list."""

    kind = "ssh"

    def __init__(
        self,
        targets: list[SshTarget],
        *,
        user: str = "root",
        key_filename: str | None = None,
        known_hosts: str | None = None,
        cluster_id: str | None = None,
    ) -> None:
        super().__init__(cluster_id)
        self.targets = targets
        self.user = user
        self.key_filename = key_filename
        self.known_hosts = known_hosts
        self.root = f"{REMOTE_BASE}/{self.cluster_id}"
        self._transports: list[SSHTransport] = []

    def _create(self, names: list[str]) -> list[Host]:
        if len(names) != len(self.targets):
            raise BackendError(f"--ssh-hosts lists {len(self.targets)} hosts but the test needs {len(names)}")
        hosts = []
        for name, t in zip(names, self.targets):
            control = SSHTransport(
                name,
                t.address,
                user=t.user or self.user,
                port=t.port,
                key_filename=self.key_filename,
                known_hosts=self.known_hosts,
            )
            self._transports.append(control)
            workdir = f"{self.root}/{name}"
            hosts.append(
                Host(
                    name=name,
                    address=t.address,
                    control=control,
                    workdir=workdir,
                    python="python3",
                    pythonpath=f"{workdir}/lib",
                    faketime_sitedir=f"{workdir}/lib/faketime",
                )
            )
        archive = package_archive()

        def install(h: Host) -> None:
            check = h.control.run(["python3", "-c", "import sys; sys.exit(sys.version_info < (3, 11))"], timeout=30)
            if not check.ok:
                raise BackendError(f"{h.name} ({h.address}): needs python3 >= 3.11 ({check.stderr.strip()[-200:]})")
            h.control.put_file(f"{h.workdir}/kraftwerk.tar.gz", archive)
            lib = shlex.quote(f"{h.workdir}/lib")
            h.control.run(
                f"mkdir -p {lib} && tar -xzf {shlex.quote(h.workdir + '/kraftwerk.tar.gz')} -C {lib}",
                check=True,
                timeout=60,
            )

        try:
            on_hosts(hosts, install)
        except ControlError as e:
            raise BackendError(f"ssh backend: {e}") from e
        return hosts

    def _destroy(self) -> None:
        """Kill whatever still runs from this cluster's directories and remove them."""
        root = shlex.quote(self.root)
        for control in self._transports:
            try:
                listing = control.run(f"ls -1 {root}/*/*.pid 2>/dev/null; true", timeout=30).stdout.split()
                for pidfile in listing:
                    control.kill_daemon(pidfile, timeout=5)
                control.run(f"rm -rf {root}; rmdir {shlex.quote(REMOTE_BASE)} 2>/dev/null; true", timeout=30)
            except ControlError:
                pass
            finally:
                control.close()
        self._transports = []
