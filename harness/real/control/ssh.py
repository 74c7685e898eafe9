"""Control over SSH (paramiko): key authentication, host keys checked, one connection per node, sudo if not root."""

from __future__ import annotations

import os
import shlex
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import paramiko

from harness.real.control.base import CommandTimeout, ControlError, Transport


class SSHTransport(Transport):
    """Control of one host over SSH.

    Host keys are checked against `known_hosts` (default: ~/.ssh/known_hosts) and an
    unknown or changed key is refused, unless `check_host_key=False`. The connection
    is opened on first use and reused by every later call (and by concurrent
    threads). A non-root `user` runs everything through `sudo -n` unless
    `sudo=False`.
    """

    def __init__(
        self,
        node: str,
        host: str,
        *,
        user: str = "root",
        port: int = 22,
        key_filename: str | os.PathLike[str] | None = None,
        pkey: paramiko.PKey | None = None,
        known_hosts: str | os.PathLike[str] | None = None,
        check_host_key: bool = True,
        sudo: bool | None = None,
        connect_timeout: float = 10.0,
        python: str = "python3",
    ) -> None:
        super().__init__(node, python=python)
        self.host, self.user, self.port = host, user, port
        self.key_filename = None if key_filename is None else str(key_filename)
        self.pkey = pkey
        self.known_hosts = None if known_hosts is None else str(known_hosts)
        self.check_host_key = check_host_key
        self.sudo = (user != "root") if sudo is None else sudo
        self.connect_timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ connection
    def client(self) -> paramiko.SSHClient:
        """The node's one SSH connection, (re)opened when needed."""
        with self._lock:
            c = self._client
            transport = c.get_transport() if c is not None else None
            if c is not None and transport is not None and transport.is_active():
                return c
            if c is not None:
                c.close()
            self._client = self._connect()
            return self._client

    def _connect(self) -> paramiko.SSHClient:
        c = paramiko.SSHClient()
        if self.check_host_key:
            if self.known_hosts is not None:
                c.load_host_keys(self.known_hosts)
            else:
                c.load_system_host_keys()
            c.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            c.connect(
                self.host,
                port=self.port,
                username=self.user,
                pkey=self.pkey,
                key_filename=self.key_filename,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                allow_agent=False,
                look_for_keys=self.pkey is None and self.key_filename is None,
            )
        except (paramiko.SSHException, OSError) as e:
            c.close()
            raise ControlError(f"{self.node}: ssh {self.user}@{self.host}:{self.port}: {e}") from e
        transport = c.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        return c

    def close(self) -> None:
        super().close()
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # ------------------------------------------------------------------ primitives
    def _wrap(self, command: str) -> str:
        return f"sudo -n -- sh -c {shlex.quote(command)}" if self.sudo else command

    def _exec(self, command: str, timeout: float | None) -> tuple[int, bytes, bytes]:
        transport = self.client().get_transport()
        if transport is None:
            raise ControlError(f"{self.node}: ssh connection lost")
        try:
            chan = transport.open_session(timeout=self.connect_timeout)
            chan.exec_command(self._wrap(command))
        except (paramiko.SSHException, OSError) as e:
            raise ControlError(f"{self.node}: ssh exec failed: {e}") from e
        out, err = bytearray(), bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                progressed = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    progressed = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    progressed = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise CommandTimeout(self.node, command, timeout or 0.0)
                if not progressed:
                    time.sleep(0.005)
            status = chan.recv_exit_status()
        finally:
            chan.close()
        return status, bytes(out), bytes(err)

    def put_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        parent = str(Path(path).parent)
        try:
            sftp = self.client().open_sftp()
        except (paramiko.SSHException, OSError) as e:
            raise ControlError(f"{self.node}: sftp failed: {e}") from e
        try:
            if self.sudo:
                # upload as the login user, then move into place as root (same-directory rename: atomic)
                staging = f"/tmp/.kraftwerk-{uuid.uuid4().hex[:12]}"
                self._sftp_write(sftp, staging, raw, mode)
                tmp = self.temp_name(path)
                self.run(
                    f"mkdir -p {shlex.quote(parent)} && cp {shlex.quote(staging)} {shlex.quote(tmp)} && "
                    f"chmod {mode:o} {shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}; "
                    f"s=$?; rm -f {shlex.quote(staging)}; exit $s",
                    check=True,
                )
            else:
                self.makedirs(parent)
                tmp = self.temp_name(path)
                self._sftp_write(sftp, tmp, raw, mode)
                sftp.posix_rename(tmp, path)
        except OSError as e:
            raise ControlError(f"{self.node}: cannot write {path}: {e}") from e
        finally:
            sftp.close()

    @staticmethod
    def _sftp_write(sftp: Any, path: str, raw: bytes, mode: int) -> None:
        with sftp.open(path, "wb") as f:
            f.write(raw)
        sftp.chmod(path, mode)

    def get_file(self, path: str) -> bytes:
        if self.sudo:
            status, out, err = self._exec(f"cat -- {shlex.quote(path)}", 60.0)
            if status != 0:
                raise ControlError(f"{self.node}: cannot read {path}: {err.decode(errors='replace').strip()}")
            return out
        try:
            sftp = self.client().open_sftp()
            try:
                with sftp.open(path, "rb") as f:
                    return f.read()
            finally:
                sftp.close()
        except (paramiko.SSHException, OSError) as e:
            raise ControlError(f"{self.node}: cannot read {path}: {e}") from e
