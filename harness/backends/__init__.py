"""Real cluster backends: `docker` (containers on a private network) and `netns` (network namespaces, root).

Each creates N hosts with addresses and a control transport per host, and tears
them down again; `python -m harness.backends down` removes what crashed runs left.
"""

from harness.backends.base import Backend, BackendError, Host

__all__ = ["Backend", "BackendError", "Host", "make"]


def make(kind: str, **kwargs: object) -> Backend:
    """A backend by name: "docker" or "netns"."""
    if kind == "docker":
        from harness.backends.docker import DockerBackend

        return DockerBackend(**kwargs)  # type: ignore[arg-type]
    if kind == "netns":
        from harness.backends.netns import NetnsBackend

        return NetnsBackend(**kwargs)  # type: ignore[arg-type]
    raise BackendError(f"unknown backend {kind!r} (expected docker or netns)")
