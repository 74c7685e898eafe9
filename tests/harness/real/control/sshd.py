"""SSH test hosts: kraftwerk node containers running sshd, with a fresh key and a known_hosts file."""

from __future__ import annotations

import contextlib
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko

from harness.real.backends.base import Backend, Host
from harness.real.control.ssh import SSHTransport
from tests.harness.real.backends import clusters

SUDO_USER = "kw"


def _wait_port(address: str, port: int = 22, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((address, port), 0.5) as s:
            if s.recv(4) == b"SSH-":
                return
        time.sleep(0.1)
    raise AssertionError(f"sshd on {address} did not come up")


@contextlib.contextmanager
def ssh_cluster(
    image: str, n: int, user: str = "root"
) -> Iterator[tuple[Backend, list[Host], dict[str, dict[str, object]]]]:
    """n containers with sshd; yields (backend, hosts controlled over SSH, SSH parameters per node)."""
    from harness.real.backends.docker import DockerBackend

    key = paramiko.ECDSAKey.generate(bits=256)
    pub = f"{key.get_name()} {key.get_base64()}"
    backend = DockerBackend(image=image, env={"KRAFTWERK_SSHD": "1", "KRAFTWERK_AUTHORIZED_KEYS": pub})
    with tempfile.TemporaryDirectory(prefix="kraftwerk-ssh-") as tmp, backend:
        docker_hosts = backend.create(n)
        known = Path(tmp) / "known_hosts"
        lines = []
        params: dict[str, dict[str, object]] = {}
        for h in docker_hosts:
            _wait_port(h.address)
            # the host key, read over a trusted channel (docker exec), not trusted on first use
            host_key = h.control.get_file("/etc/ssh/ssh_host_ed25519_key.pub").decode().split()
            lines.append(f"{h.address} {host_key[0]} {host_key[1]}")
            if user != "root":
                h.control.run(
                    f"useradd -m {user} && install -d -m 700 -o {user} -g {user} /home/{user}/.ssh && "
                    f"install -m 600 -o {user} -g {user} /root/.ssh/authorized_keys /home/{user}/.ssh/ && "
                    f"echo '{user} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{user} && chmod 440 /etc/sudoers.d/{user}",
                    check=True,
                )
            params[h.name] = {"host": h.address, "user": user, "pkey": key, "known_hosts": str(known)}
        known.write_text("\n".join(lines) + "\n")
        ssh_hosts = [
            Host(
                name=h.name,
                address=h.address,
                control=SSHTransport(h.name, **params[h.name]),  # type: ignore[arg-type]
                workdir=h.workdir,
                pythonpath=h.pythonpath,
                faketime_sitedir=h.faketime_sitedir,
            )
            for h in docker_hosts
        ]
        try:
            yield backend, ssh_hosts, params
        finally:
            for h in ssh_hosts:
                h.control.close()
    assert clusters.leftovers("docker", backend.cluster_id) == []
