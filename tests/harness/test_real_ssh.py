"""`kraftwerk test --backend ssh`: the same register chaos test on hosts reached over SSH only.

The hosts are kraftwerk node containers running sshd (tests/harness/real/control/sshd.py); the harness
knows nothing but their addresses, a key and a known_hosts file, uploads the node package,
and afterwards leaves no process, iptables chain, faketime file or directory on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.real import realtest
from tests.harness.real.backends.clusters import node_image  # noqa: F401 - fixture
from tests.harness.real.control import sshd

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_register_chaos_over_ssh_is_valid_and_leaves_the_hosts_clean(
    node_image: str,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with sshd.ssh_cluster(node_image, 5, user=sshd.SUDO_USER) as (docker_backend, hosts, params):
        key = tmp_path / "id_ecdsa"
        params["n1"]["pkey"].write_private_key_file(str(key))  # type: ignore[attr-defined]
        hosts_file = tmp_path / "hosts"
        hosts_file.write_text("# the five sshd containers\n" + "".join(f"{h.address}\n" for h in hosts))
        r = realtest.kraftwerk_test(
            tmp_path / "store",
            "--backend",
            "ssh",
            "--ssh-hosts",
            str(hosts_file),
            "--ssh-user",
            sshd.SUDO_USER,
            "--ssh-key",
            str(key),
            "--ssh-known-hosts",
            str(params["n1"]["known_hosts"]),
            "--nemesis",
            "partition,kill,pause,clock",
            "--time-limit",
            "20",
            "--seed",
            "7",
            # the ssh transport and the hosts' cleanup are under test, not the final reads (docker's chaos
            # test keeps the default 10 s settle)
            "--settle",
            "0",
        )
        run = realtest.latest(tmp_path / "store")
        assert r.returncode == 0, r.stderr[-3000:]
        res = realtest.results(run)
        assert res["valid"] is True
        with capsys.disabled():
            stats = res["run"]
            print(f"\nssh 5-node cluster ready in {stats['ready-seconds']}s; 20 s run took {stats['wall-seconds']}s")
        schedule = realtest.check_run_layout(run, 5)
        assert {"start-partition", "kill", "pause", "bump-clock"} <= {e["f"] for e in schedule["nemesis"]}
        # through the hosts' own eyes (docker exec, not the harness): nothing of the run is left
        for h in docker_backend.hosts:
            assert h.control.run("pgrep -f '[n]odes --config'").exit_status == 1, h.name
            assert "KRAFTWERK" not in h.control.sh("iptables -w -S"), h.name
            assert not h.control.exists("/var/tmp/kraftwerk-ssh"), h.name
            leftovers = h.control.run("find / -xdev -name 'faketime*' -newer /etc/hostname -not -path '/proc/*'").stdout
            assert leftovers.strip() == "", leftovers
