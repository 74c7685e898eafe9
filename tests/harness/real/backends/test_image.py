"""The node image: content-hash caching, what is inside it, and the `kraftwerk image` command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.real import image
from tests.harness.real.backends import clusters

ROOT = Path(__file__).resolve().parents[4]


def test_content_hash_follows_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "docker", tmp_path / "docker")
    shutil.copytree(ROOT / "nodes", tmp_path / "nodes", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(image, "ROOT", tmp_path)
    monkeypatch.setattr(image, "DOCKER_DIR", tmp_path / "docker")
    base, node = image.base_tag(), image.node_tag()
    (tmp_path / "nodes" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "nodes" / "__pycache__" / "x.pyc").write_bytes(b"junk")  # caches do not count
    assert (image.base_tag(), image.node_tag()) == (base, node)
    (tmp_path / "nodes" / "extra.py").write_text("X = 1\n")
    assert image.base_tag() == base and image.node_tag() != node
    (tmp_path / "docker" / "packages.txt").write_text("python3\n")
    assert image.base_tag() != base
    names = [n for n, _ in image.node_files()]
    assert "Dockerfile" in names and "nodes/extra.py" in names and "rootfs/opt/kraftwerk/init.py" in names


@pytest.mark.docker
def test_build_is_cached_and_image_has_the_tools(node_image: str) -> None:
    again = image.build()
    if again.tag == node_image:  # (unless nodes/ changed in between)
        assert not again.built and again.seconds < 10
    client = clusters.docker_client()
    script = (
        "set -e; python3 -c 'import sys, nodes; print(sys.version_info[:2] >= (3, 11))'; "
        "iptables -V; ip -V; tc -V; ps --version; /usr/sbin/sshd -V 2>&1 | head -1; sudo -V | head -1; "
        "ls /usr/lib/*/faketime/libfaketimeMT.so.1; ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l"
    )
    out = client.containers.run(node_image, entrypoint=["sh", "-c", script], remove=True, network_mode="none").decode()
    lines = out.splitlines()
    assert lines[0] == "True"
    assert "iptables" in out and "iproute2" in out and "OpenSSH" in out and "libfaketimeMT.so.1" in out
    assert lines[-1] == "0"  # no ssh host keys baked into the image: each container makes its own
    labels = client.images.get(node_image).labels
    assert labels[image.LABEL_HASH] == node_image.split(":")[1]


def test_image_command() -> None:
    r = subprocess.run([sys.executable, "-m", "harness.cli", "image", "tag"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().startswith("kraftwerk-node:")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "image"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 254 and "ACTION" in r.stderr
