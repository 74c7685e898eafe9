"""Shared plumbing of the real nemeses: running one step on many hosts at once, undo registration."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from harness.real.backends.base import Host
from harness.real.control import cleanup

T = TypeVar("T")


def parallel(*fns: Callable[[], object]) -> None:
    """Run blocking setup steps in threads at once; re-raise the first error once all are done."""
    if len(fns) <= 1:
        for fn in fns:
            fn()
        return
    with ThreadPoolExecutor(max_workers=len(fns), thread_name_prefix="setup") as pool:
        futures = [pool.submit(fn) for fn in fns]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]


class NemesisError(RuntimeError):
    """A fault could not be applied or healed."""


def on_hosts(hosts: Iterable[Host], fn: Callable[[Host], T]) -> dict[str, T]:
    """Run fn on every host concurrently (faults should land together); raise the first error after all ran."""
    hosts = list(hosts)
    if not hosts:
        return {}
    if len(hosts) == 1:
        return {hosts[0].name: fn(hosts[0])}
    with ThreadPoolExecutor(max_workers=min(16, len(hosts)), thread_name_prefix="nemesis") as pool:
        futures = {h.name: pool.submit(fn, h) for h in hosts}
        results: dict[str, T] = {}
        error: BaseException | None = None
        for name, fut in futures.items():
            try:
                results[name] = fut.result()
            except BaseException as e:  # noqa: BLE001 - re-raised below once every host is done
                error = error or e
    if error is not None:
        raise error
    return results


class Undoable:
    """A nemesis part that registers its teardown while it has something to undo."""

    label = "nemesis"

    def __init__(self) -> None:
        self._token: int | None = None

    def _armed(self) -> None:
        if self._token is None:
            self._token = cleanup.register(self.label, self.teardown)

    def _disarmed(self) -> None:
        cleanup.unregister(self._token)
        self._token = None

    def teardown(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self: T) -> T:
        self.setup()  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        with cleanup.shielded():
            self.teardown()
