"""A standalone Spark cluster on this machine's own containers, for tests and small users.

`up` starts a master and N workers, each its own container (its own host name and address) on a
private docker network, from the offline node base image. The containers run Spark from this
machine's pyspark installation with this machine's Java and Python, mounted read-only at the same
paths, so executors find the same interpreter and libraries as the driver (kraftwerk's own code is
shipped by the driver: see `checkers.pipeline.job.ship_packages`). The store directory is mounted
read-write at the same path in every container: it is the shared volume that runs and their
analysis land in. `down` removes every container and the network, by label.

A real cluster needs the same from its hosts: Python 3.11 with kraftwerk's dependencies at the
path PYSPARK_PYTHON names (default: the driver's), and the store at a path every host sees (an NFS
mount, or a Hadoop-compatible filesystem for `analyze`'s output).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.pipeline.job import log4j_properties

LABEL = "org.kraftwerk.spark"
STORE_LABEL = "org.kraftwerk.spark.store"  # on the master: the store whose `.spark/` the cluster's config is in
MASTER_PORT = 7077
UI_PORT = 8080
LOG4J = log4j_properties("warn")  # the master's and workers' (mounted into their containers)

Log = Callable[[str], None]


class SparkClusterError(RuntimeError):
    """The cluster could not be started or found."""


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    master_url: str
    master_ip: str
    workers: list[str]
    store: str


def _client() -> Any:
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure to reach the engine
        raise SparkClusterError(f"Docker is not usable here: {e}") from None
    return client


def _java_home() -> Path:
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    if java is None:
        raise SparkClusterError("no java on PATH (Java 17 runs Spark): install openjdk-17-jre-headless")
    return Path(java).resolve().parent.parent


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _mounts(store: Path, log4j: Path) -> dict[str, dict[str, str]]:
    """Host paths every container sees at the same place: Python, the venv, Java, its config, the store."""
    java = _java_home()
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), java, _spark_home()}
    # Debian's JDK keeps its security config and CA store outside the JDK directory, behind symlinks
    for extra in (Path(f"/etc/java-{_java_major(java)}-openjdk"), Path("/etc/ssl/certs/java")):
        if extra.exists():
            paths.add(extra)
    mounts = {str(p): {"bind": str(p), "mode": "ro"} for p in sorted(paths)}
    mounts[str(store)] = {"bind": str(store), "mode": "rw"}
    mounts[str(log4j)] = {"bind": "/etc/kraftwerk-spark-log4j2.properties", "mode": "ro"}
    return mounts


def _java_major(java_home: Path) -> str:
    release = java_home / "release"
    if release.exists():
        for line in release.read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                return line.split("=", 1)[1].strip('"').split(".")[0]
    return "17"


def _command(main_class: str, *args: str, memory: str = "512m") -> list[str]:
    java = _java_home() / "bin" / "java"
    jars = _spark_home() / "jars" / "*"
    return [
        str(java),
        f"-Xmx{memory}",
        "-Dlog4j2.configurationFile=file:/etc/kraftwerk-spark-log4j2.properties",
        "-cp",
        str(jars),
        main_class,
        *args,
    ]


def up(
    workers: int,
    store: str | os.PathLike[str],
    *,
    name: str = "kwspark",
    cores: int = 1,
    memory: str = "2g",
    log: Log | None = None,
    timeout: float = 240.0,
) -> ClusterInfo:
    """Start `name`'s master and `workers` workers; wait until every worker has registered."""
    say = log or (lambda _m: None)
    if workers < 1:
        raise SparkClusterError("--workers must be at least 1")
    client = _client()
    if client.containers.list(all=True, filters={"label": f"{LABEL}={name}"}):
        raise SparkClusterError(f"a Spark cluster named {name!r} exists: `kraftwerk spark down --name {name}` first")
    from harness.real.image import ImageError, ensure_base

    try:
        image = ensure_base(log=say)
    except ImageError as e:
        raise SparkClusterError(f"cannot build the base image: {e}") from None
    store_path = Path(store).resolve()
    store_path.mkdir(parents=True, exist_ok=True)
    conf_dir = store_path / ".spark"
    conf_dir.mkdir(exist_ok=True)
    log4j = conf_dir / "log4j2.properties"
    log4j.write_text(LOG4J, encoding="utf-8")
    labels = {LABEL: name}
    network = client.networks.create(f"{name}-net", driver="bridge", labels=labels)
    # SPARK_SCALA_VERSION: a pip-installed Spark has no RELEASE file, and workers building executor
    # command lines would otherwise look for a source build
    env = {"SPARK_HOME": str(_spark_home()), "JAVA_HOME": str(_java_home()), "SPARK_SCALA_VERSION": "2.13"}
    mounts = _mounts(store_path, log4j)
    master_host = f"{name}-master"
    try:
        say(f"starting the Spark master {master_host} ({image})")
        client.containers.run(
            image,
            _command(
                "org.apache.spark.deploy.master.Master",
                "--host",
                master_host,
                "--port",
                str(MASTER_PORT),
                "--webui-port",
                str(UI_PORT),
            ),
            name=master_host,
            hostname=master_host,
            network=network.name,
            labels={**labels, STORE_LABEL: str(store_path)},
            environment=env,
            volumes=mounts,
            detach=True,
        )
        master_ip = _ip(client, master_host, network.name)
        worker_names = [f"{name}-worker-{i + 1}" for i in range(workers)]
        for worker in worker_names:
            say(f"starting the Spark worker {worker} ({cores} core(s), {memory})")
            client.containers.run(
                image,
                _command(
                    "org.apache.spark.deploy.worker.Worker",
                    f"spark://{master_host}:{MASTER_PORT}",
                    "--host",
                    worker,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--work-dir",
                    "/tmp/spark-work",
                ),
                name=worker,
                hostname=worker,
                network=network.name,
                labels=labels,
                environment=env,
                volumes=mounts,
                detach=True,
            )
        _wait_for_workers(client, name, master_ip, workers, timeout, say)
    except BaseException:
        down(name)
        raise
    info = ClusterInfo(name, f"spark://{master_ip}:{MASTER_PORT}", master_ip, worker_names, str(store_path))
    (conf_dir / f"{name}.json").write_text(json.dumps(info.__dict__, indent=2), encoding="utf-8")
    return info


def _ip(client: Any, container: str, network: str) -> str:
    c = client.containers.get(container)
    c.reload()
    ip = c.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
    if not ip:
        raise SparkClusterError(f"{container} has no address on {network}")
    return str(ip)


def _wait_for_workers(client: Any, name: str, master_ip: str, workers: int, timeout: float, say: Log) -> None:
    deadline = time.monotonic() + timeout
    alive = 0
    while time.monotonic() < deadline:
        for c in client.containers.list(all=True, filters={"label": f"{LABEL}={name}"}):
            if c.status == "exited":
                tail = c.logs(tail=20).decode(errors="replace")
                raise SparkClusterError(f"{c.name} exited:\n{tail}")
        try:
            with urllib.request.urlopen(f"http://{master_ip}:{UI_PORT}/json/", timeout=2) as r:
                state = json.load(r)
            alive = sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
            if alive >= workers:
                say(f"Spark master spark://{master_ip}:{MASTER_PORT}: {alive} worker(s) alive")
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    raise SparkClusterError(f"only {alive} of {workers} Spark worker(s) registered within {timeout:.0f} s")


def down(name: str = "kwspark") -> list[str]:
    """Remove `name`'s containers and network, and the config `up` wrote into the store; the names
    removed (nothing is an empty list)."""
    client = _client()
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}={name}"}):
        store = c.labels.get(STORE_LABEL)
        c.remove(force=True)
        removed.append(c.name)
        if store:
            shutil.rmtree(Path(store) / ".spark", ignore_errors=True)
    for n in client.networks.list(filters={"label": f"{LABEL}={name}"}):
        n.remove()
        removed.append(n.name)
    return removed


def clusters() -> dict[str, list[str]]:
    """Every kraftwerk Spark cluster on this engine: name → its containers."""
    client = _client()
    found: dict[str, list[str]] = {}
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        found.setdefault(c.labels[LABEL], []).append(f"{c.name} ({c.status})")
    return found
