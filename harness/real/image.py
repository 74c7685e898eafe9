"""Build (or reuse) the node image: `kraftwerk image build` / `python -m harness.commands.image build`.

Two layers, each tagged with a hash of what went into it so an unchanged image
is never rebuilt:

- the **base** (`kraftwerk-base:<hash>`): Debian bookworm with python3, iptables,
  iproute2, libfaketime, procps, openssh-server and sudo (docker/packages.txt).
  From `debian:bookworm-slim` (docker/Dockerfile.base) when a registry is
  reachable, else bootstrapped offline: debootstrap from Debian's package mirror,
  then `docker import` (docker/bootstrap-base.sh, ~1.5 min cold);
- the **node** image (`kraftwerk-node:<hash>`, also `:latest`): the base plus our
  standard-library-only `nodes/` package and the container init
  (docker/Dockerfile: COPY only, a few seconds).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import ROOT

DOCKER_DIR = ROOT / "docker"
BASE_REPO = "kraftwerk-base"
NODE_REPO = "kraftwerk-node"
LABEL_HASH = "org.kraftwerk.content-hash"
REGISTRY_PROBE = ("registry-1.docker.io", 443)
BASE_MODES = ("auto", "registry", "debootstrap")
LOCK_FILE = Path("/tmp/kraftwerk-image.lock")

Log = Callable[[str], None]


class ImageError(RuntimeError):
    """The image could not be built."""


@dataclass(frozen=True)
class BuildResult:
    tag: str
    base_tag: str
    built: bool  # False: the image with this content hash already existed
    base_built: bool
    base_method: str | None  # "registry", "debootstrap" or None (reused)
    seconds: float


def _hash_files(files: list[tuple[str, Path]], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for arcname, path in sorted(files):
        h.update(arcname.encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0" + str(path.stat().st_mode & 0o111).encode() + b"\0")
    return h.hexdigest()[:16]


def base_files() -> list[tuple[str, Path]]:
    return [(n, DOCKER_DIR / n) for n in ("packages.txt", "Dockerfile.base", "bootstrap-base.sh")]


def node_files() -> list[tuple[str, Path]]:
    """(name in the build context, local path) for the node image: Dockerfile, rootfs/, nodes/."""
    files = [("Dockerfile", DOCKER_DIR / "Dockerfile")]
    for top, prefix in ((DOCKER_DIR / "rootfs", "rootfs"), (ROOT / "nodes", "nodes")):
        for path in sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                files.append((f"{prefix}/{path.relative_to(top).as_posix()}", path))
    return files


def base_tag() -> str:
    return f"{BASE_REPO}:{_hash_files(base_files(), 'bookworm')}"


def node_tag(base: str | None = None) -> str:
    """The tag the node image of the current sources has (whether or not it is built yet)."""
    return f"{NODE_REPO}:{_hash_files(node_files(), base or base_tag())}"


def _client() -> Any:
    import docker

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as e:
        raise ImageError(f"no docker engine reachable: {e}") from e
    return client


def _exists(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def registry_reachable(timeout: float = 3.0) -> bool:
    """Whether Docker Hub answers a TCP connect within `timeout` (DNS included)."""
    box: dict[str, bool] = {}

    def probe() -> None:
        try:
            with socket.create_connection(REGISTRY_PROBE, timeout=timeout):
                box["ok"] = True
        except OSError:
            box["ok"] = False

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return box.get("ok", False)


def _context(files: list[tuple[str, Path]]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for arcname, path in files:
            info = tar.gettarinfo(str(path), arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            with path.open("rb") as f:
                tar.addfile(info, f)
    buf.seek(0)
    return buf


def _docker_build(client: Any, files: list[tuple[str, Path]], tag: str, log: Log, **kwargs: Any) -> None:
    stream = client.api.build(
        fileobj=_context(files), custom_context=True, tag=tag, rm=True, forcerm=True, decode=True, **kwargs
    )
    for chunk in stream:
        if "error" in chunk:
            raise ImageError(f"docker build of {tag} failed: {chunk['error'].strip()}")
        line = chunk.get("stream", "").rstrip()
        if line:
            log(line)


def _ensure_debootstrap(log: Log) -> None:
    if shutil.which("debootstrap"):
        return
    if os.geteuid() != 0:
        raise ImageError("debootstrap is missing and we are not root: apt-get install debootstrap")
    log("installing debootstrap (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
    r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"], env=env)
    if r.returncode != 0 or not shutil.which("debootstrap"):
        raise ImageError("could not install debootstrap with apt-get")


def _build_base(client: Any, tag: str, mode: str, log: Log) -> str:
    if mode not in BASE_MODES:
        raise ImageError(f"unknown base mode {mode!r} (expected one of {', '.join(BASE_MODES)})")
    use_registry = mode == "registry" or (
        mode == "auto" and (_exists(client, "debian:bookworm-slim") or registry_reachable())
    )
    if use_registry:
        log("building the base from debian:bookworm-slim (docker/Dockerfile.base)")
        try:
            files = [("Dockerfile", DOCKER_DIR / "Dockerfile.base"), ("packages.txt", DOCKER_DIR / "packages.txt")]
            _docker_build(client, files, tag, log, labels={LABEL_HASH: tag.split(":")[1]})
            return "registry"
        except Exception as e:
            if mode == "registry":
                raise ImageError(f"building the base from the registry failed: {e}") from e
            log(f"registry build failed ({e}); bootstrapping offline instead")
    if os.geteuid() != 0:
        raise ImageError("no registry reachable, and the offline bootstrap (debootstrap) needs root")
    _ensure_debootstrap(log)
    log("no registry: bootstrapping the base offline (debootstrap from Debian's mirror, then docker import)")
    r = subprocess.run([str(DOCKER_DIR / "bootstrap-base.sh"), tag], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for line in r.stdout.decode(errors="replace").splitlines():
        log(line)
    if r.returncode != 0:
        raise ImageError(f"docker/bootstrap-base.sh failed with exit status {r.returncode}")
    return "debootstrap"


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time on this machine (parallel test sessions share the cache)."""
    with LOCK_FILE.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(force: bool = False, base_mode: str = "auto", log: Log | None = None) -> BuildResult:
    """Build the node image unless the one with the current content hash exists; return its tag."""
    say: Log = log or (lambda s: None)
    started = time.monotonic()
    client = _client()
    with _build_lock():
        btag = base_tag()
        base_method = None
        if force or not _exists(client, btag):
            base_method = _build_base(client, btag, base_mode, say)
        client.images.get(btag).tag(BASE_REPO, "latest")
        tag = node_tag(btag)
        built = False
        if force or base_method is not None or not _exists(client, tag):
            say(f"building {tag} on {btag}")
            _docker_build(
                client,
                node_files(),
                tag,
                say,
                buildargs={"BASE": btag},
                labels={LABEL_HASH: tag.split(":")[1], "org.kraftwerk.base": btag},
            )
            built = True
        client.images.get(tag).tag(NODE_REPO, "latest")
    return BuildResult(tag, btag, built, base_method is not None, base_method, time.monotonic() - started)


def prune(keep: str | None = None) -> list[str]:
    """Remove kraftwerk-node/base images other than the current ones; the tags removed."""
    client = _client()
    keep_tags = {keep or node_tag(), base_tag(), f"{NODE_REPO}:latest", f"{BASE_REPO}:latest"}
    removed = []
    for repo in (NODE_REPO, BASE_REPO):
        for image in client.images.list(name=repo):
            for t in image.tags:
                if t not in keep_tags:
                    client.images.remove(t)
                    removed.append(t)
    return removed


def ensure_base(base_mode: str = "auto", log: Log | None = None) -> str:
    """Build the base image (Debian with the system packages, no kraftwerk code) unless it exists; its tag."""
    say: Log = log or (lambda s: None)
    client = _client()
    with _build_lock():
        btag = base_tag()
        if not _exists(client, btag):
            _build_base(client, btag, base_mode, say)
        return btag
