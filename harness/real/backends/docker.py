"""Docker backend: one container per node on a labelled, internal (no outside traffic) bridge network.

Containers get NET_ADMIN (iptables, tc) and nothing more — never --privileged —
and are controlled with docker exec. Everything carries the labels
org.kraftwerk.managed=1 and org.kraftwerk.cluster=<id>, so `down()` finds what
a crashed run left behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.real.backends.base import LABEL, LABEL_CLUSTER, Backend, BackendError, Host
from harness.real.control.docker import DockerTransport

PREFIX = "kraftwerk"
WORKDIR = "/var/lib/kraftwerk"


def _client() -> Any:
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as e:
        raise BackendError(f"docker backend: no docker engine reachable ({e})") from e


def container_name(cluster_id: str, name: str) -> str:
    """The container of node `name` in cluster `cluster_id`."""
    return f"{PREFIX}-{cluster_id}-{name}"


def control(cluster_id: str, name: str) -> DockerTransport:
    """Node `name`'s control transport in running cluster `cluster_id`, rebuilt in another process than the
    one that created it (`kraftwerk cluster kill/start`); BackendError if the engine or container is gone."""
    client = _client()
    try:
        container = client.containers.get(container_name(cluster_id, name))
    except Exception as e:  # noqa: BLE001 - docker.errors.NotFound and friends
        raise BackendError(f"container of node {name} is gone ({e}); the cluster was removed?") from None
    return DockerTransport(name, container)


class DockerBackend(Backend):
    """Containers from the kraftwerk node image (built or reused on demand) on a private network."""

    kind = "docker"

    def __init__(
        self,
        cluster_id: str | None = None,
        image: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(cluster_id)
        self.client = client or _client()
        self.image = image
        self.env = dict(env or {})
        self.network_name = f"{PREFIX}-{self.cluster_id}"

    def labels(self) -> dict[str, str]:
        return {LABEL: "1", LABEL_CLUSTER: self.cluster_id}

    def _create(self, names: list[str]) -> list[Host]:
        if self.image is None:
            from harness.real import image

            self.image = image.build().tag
        network = self.client.networks.create(
            self.network_name, driver="bridge", internal=True, labels=self.labels(), check_duplicate=True
        )
        containers = []
        for name in names:
            containers.append(
                self.client.containers.run(
                    self.image,
                    name=container_name(self.cluster_id, name),
                    hostname=name,
                    detach=True,
                    network=network.name,
                    networking_config={network.name: self.client.api.create_endpoint_config(aliases=[name])},
                    cap_add=["NET_ADMIN"],
                    labels={**self.labels(), "org.kraftwerk.node": name},
                    environment=self.env,
                    stop_signal="SIGTERM",
                )
            )
        hosts = []
        for name, c in zip(names, containers):
            c.reload()
            if c.status != "running":
                raise BackendError(f"container {c.name} is {c.status}: {c.logs(tail=20).decode(errors='replace')}")
            address = c.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
            hosts.append(
                Host(
                    name=name,
                    address=address,
                    control=DockerTransport(name, c),
                    workdir=WORKDIR,
                    pythonpath="/opt/kraftwerk",
                    faketime_sitedir="/opt/kraftwerk/faketime",
                )
            )
        return hosts

    def _destroy(self) -> None:
        remove_labelled(self.client, {LABEL_CLUSTER: self.cluster_id})


def remove_labelled(client: Any, labels: Mapping[str, str]) -> list[str]:
    """Remove every container, then every network, carrying these labels; the names removed."""
    import docker

    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    removed = []
    for c in client.containers.list(all=True, filters=filters):
        try:
            c.remove(force=True, v=True)
            removed.append(f"container {c.name}")
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: its removal is already in progress (another down)
                raise
    for n in client.networks.list(filters=filters):
        try:
            n.remove()
            removed.append(f"network {n.name}")
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:
                raise
    return removed


def leftovers(client: Any = None) -> list[str]:
    """Containers and networks of any kraftwerk docker cluster that still exist."""
    client = client or _client()
    filters = {"label": f"{LABEL}=1"}
    return [f"container {c.name}" for c in client.containers.list(all=True, filters=filters)] + [
        f"network {n.name}" for n in client.networks.list(filters=filters)
    ]


def down(cluster_id: str | None = None, client: Any = None) -> list[str]:
    """Remove the containers and networks of one cluster, or of every kraftwerk cluster."""
    client = client or _client()
    return remove_labelled(client, {LABEL_CLUSTER: cluster_id} if cluster_id else {LABEL: "1"})
