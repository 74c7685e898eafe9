"""SSH specifics: host keys are checked, one connection is reused, a non-root user goes through sudo."""

from __future__ import annotations

import pytest

from harness.real.control import ControlError
from harness.real.control.ssh import SSHTransport
from tests.harness.real.control import sshd

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_host_keys_checked_connection_reused_and_sudo(node_image: str, tmp_path) -> None:  # noqa: ANN001
    with sshd.ssh_cluster(node_image, 1, user=sshd.SUDO_USER) as (_backend, hosts, params):
        h = hosts[0]
        p = dict(params[h.name])
        t = h.control
        assert isinstance(t, SSHTransport) and t.sudo
        # a non-root login runs everything as root through sudo, files included
        assert t.sh("id -u").strip() == "0"
        assert t.run(["sh", "-c", "whoami; echo $SUDO_USER"]).stdout.split() == ["root", sshd.SUDO_USER]
        t.put_file("/etc/kraftwerk-test/owned-by-root", b"x\n", mode=0o640)
        assert t.sh("stat -c '%U %a' /etc/kraftwerk-test/owned-by-root").split() == ["root", "640"]
        assert t.get_file("/etc/kraftwerk-test/owned-by-root") == b"x\n"
        # one connection per node, reused by every call
        first = t.client()
        for _ in range(3):
            t.run("true")
        assert t.client() is first
        # after the connection drops, the next call reconnects by itself
        first.close()
        assert t.sh("echo again").strip() == "again"

        # an unknown host key is refused ...
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        strict = SSHTransport(h.name, str(p["host"]), user=str(p["user"]), pkey=p["pkey"], known_hosts=empty)
        with pytest.raises(ControlError, match="not found in known_hosts|Server .* not found"):
            strict.run("true")
        # ... and so is a changed one
        wrong = tmp_path / "wrong_hosts"
        other = h.control.sh("cat /etc/ssh/ssh_host_rsa_key.pub").split()
        wrong.write_text(f"{p['host']} ssh-ed25519 {other[1]}\n")
        with pytest.raises(ControlError):
            SSHTransport(h.name, str(p["host"]), user=str(p["user"]), pkey=p["pkey"], known_hosts=wrong).run("true")
        # unless checking is turned off explicitly
        lax = SSHTransport(h.name, str(p["host"]), user=str(p["user"]), pkey=p["pkey"], check_host_key=False)
        assert lax.sh("echo ok").strip() == "ok"
        lax.close()
