"""Real cluster backends: `docker` (containers on a private network), `netns` (network namespaces, root)
and `local` (processes on 127.0.0.x); `harness.real.backends.registry` names every backend, ssh and sim included.

Each creates N hosts with addresses and a control transport per host, and tears
them down again; `python -m harness.real.backends down` removes what crashed runs left.
"""

from harness.real.backends.base import Backend, BackendError, Host

__all__ = ["Backend", "BackendError", "Host"]
