"""checkers.forked: groups of work in forked processes come back in order; a dead child is reported, not lost."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.forked import balanced, map_forked


@given(st.lists(st.integers(0, 1000), max_size=30), st.integers(1, 5))
def test_balanced_groups_cover_every_index_once_in_order(weights: list[int], jobs: int) -> None:
    groups = balanced(weights, jobs)
    assert sorted(i for g in groups for i in g) == list(range(len(weights)))
    assert all(g == sorted(g) and g for g in groups) and len(groups) <= jobs
    if weights and jobs > 1:  # greedy: no group outweighs the lightest by more than its heaviest item
        loads = [sum(weights[i] for i in g) for g in groups]
        assert max(loads) - min(loads, default=0) <= max(weights) or len(groups) < jobs


@settings(max_examples=10, deadline=None)
@given(st.lists(st.lists(st.integers(), max_size=4), min_size=1, max_size=4))
def test_each_group_runs_in_its_own_process_and_returns_in_order(groups: list[list[int]]) -> None:
    here = os.getpid()
    done = map_forked(lambda x: (x * 2, os.getpid()), groups)
    assert [[v for v, _ in r] for r in done] == [[x * 2 for x in g] for g in groups]
    pids = [{p for _, p in r} for r in done]
    assert pids[0] <= {here}
    assert all(here not in p for p in pids[1:])


def test_a_child_that_dies_or_raises_gives_none_and_the_rest_come_back() -> None:
    def work(x: int) -> int:
        if x == 1:
            os._exit(9)
        if x == 2:
            raise ValueError("boom")
        return x

    assert map_forked(work, [[0], [1], [2], [3, 4]]) == [[0], None, None, [3, 4]]


def test_an_error_in_this_process_still_reaps_the_children() -> None:
    def work(x: int) -> int:
        if x == 0:
            raise ValueError("here")
        return x

    with pytest.raises(ValueError, match="here"):
        map_forked(work, [[0], [1], [2]])
    assert not zombies()


def zombies() -> list[int]:
    """This process's children that ended and were never waited for."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == os.getpid():
                found.append(int(entry))
    return found
