"""Work spread over forked processes: each group of items in its own process, results back in order.

A fork costs about a millisecond here, where a multiprocessing pool costs tens (its imports, its
manager thread, its pickled task queue), so even a check of two small files gains from it. The first
group runs in this process while the others run in children; a child sends its pickled results back
through a pipe and leaves with `os._exit` (no atexit handlers, no flushing of inherited buffers).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def balanced(weights: Sequence[int], jobs: int) -> list[list[int]]:
    """Indexes of `weights` in `jobs` groups of about equal total weight (heaviest first, each to the lightest
    group); each group keeps its indexes in ascending order, and empty groups are dropped."""
    groups: list[list[int]] = [[] for _ in range(max(1, jobs))]
    loads = [0] * len(groups)
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        j = loads.index(min(loads))
        groups[j].append(i)
        loads[j] += weights[i]
    return [sorted(g) for g in groups if g]


def map_forked(fn: Callable[[T], R], groups: Sequence[Sequence[T]]) -> list[list[R] | None]:
    """`fn` over every item, each group in its own process (the first in this one): per group, its results in
    order, or None when its process died or `fn` raised there."""
    children: list[tuple[int, int]] = []
    for group in groups[1:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read)
            code = 0
            try:
                payload = pickle.dumps([fn(item) for item in group], protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write, "wb") as out:
                    out.write(payload)
            except BaseException:  # noqa: BLE001 - reported by the exit status
                code = 1
            finally:
                os._exit(code)
        os.close(write)
        children.append((pid, read))
    results: list[list[R] | None] = []
    try:
        if groups:
            results.append([fn(item) for item in groups[0]])
    finally:  # the children are read and reaped even when this process's own group raised
        for pid, read in children:
            with os.fdopen(read, "rb") as source:
                data = source.read()
            _, status = os.waitpid(pid, 0)
            results.append(pickle.loads(data) if os.waitstatus_to_exitcode(status) == 0 and data else None)
    return results
