"""Heal and tear down on every way out: normal exit, exceptions, Ctrl-C, SIGTERM/SIGHUP, interpreter exit.

Clusters and nemeses register an undo action when they create something
(container, namespace, iptables chain, faketime file, …) and unregister it
once they undid it themselves in `__exit__`. What is still registered runs
(last registered first) from `run_all()`, which is hooked to `atexit`; SIGTERM
and SIGHUP are turned into KeyboardInterrupt so `with` blocks unwind exactly as
on Ctrl-C. While undo actions run, SIGINT/SIGTERM are ignored so a second
Ctrl-C cannot leave things half torn down.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import signal
import threading
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

_lock = threading.RLock()
_actions: dict[int, tuple[str, Callable[[], None]]] = {}
_ids = itertools.count(1)
_installed = False


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM or SIGHUP (a KeyboardInterrupt, so handlers treat it as Ctrl-C)."""


def _on_signal(signum: int, _frame: object) -> None:
    raise Terminated(f"received {signal.Signals(signum).name}")


def install() -> None:
    """Hook `run_all` to interpreter exit and SIGTERM/SIGHUP to unwinding (main thread only; idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        atexit.register(run_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)


def register(label: str, action: Callable[[], None]) -> int:
    """Remember an undo action; returns a token for `unregister`."""
    install()
    with _lock:
        token = next(_ids)
        _actions[token] = (label, action)
        return token


def unregister(token: int | None) -> None:
    if token is not None:
        with _lock:
            _actions.pop(token, None)


def pending() -> list[str]:
    """Labels of the undo actions not yet run (newest last)."""
    with _lock:
        return [label for label, _ in _actions.values()]


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP for the duration (main thread only), so cleanup is not interrupted."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def run_all() -> list[str]:
    """Run every registered undo action, newest first, each at most once; errors are logged, not raised."""
    done = []
    with shielded():
        while True:
            with _lock:
                if not _actions:
                    break
                token = max(_actions)
                label, action = _actions.pop(token)
            try:
                action()
                done.append(label)
            except Exception:  # noqa: BLE001 - best effort: keep undoing the rest
                log.exception("cleanup %s failed", label)
    return done


@contextlib.contextmanager
def undo(label: str, action: Callable[[], None]) -> Iterator[int]:
    """`with undo("x", fn):` — run fn on leaving the block (also if the process is interrupted inside it)."""
    token = register(label, action)
    try:
        yield token
    finally:
        with _lock:
            still = _actions.pop(token, None)
        if still is not None:
            with shielded():
                action()
