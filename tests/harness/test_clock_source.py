"""clock.source in stored simulator runs: schedule.json records it, and runs stored before it replay as they ran."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.errors import InputError
from harness.core.spec import TestSpec
from harness.sim.runs import from_schedule
from harness.store.schedule import document


def doc(**extra: Any) -> dict[str, Any]:
    """A schedule.json of format 3 (before the test was embedded), whose copies of the options are read."""
    base = {"format": 3, "seed": 1, "nodes": 3, "concurrency": 2, "time-limit": 5.0}
    return {**base, "nemesis": [], "ops": [], "links": "tcp", "start": "ready", **extra}


@pytest.mark.parametrize(
    ("fields", "source"),
    [
        ({"clocks": "wall", "clock-source": "wall"}, "wall"),
        ({"clocks": "wall", "clock-source": "monotonic"}, "monotonic"),
        ({"clocks": "wall"}, "monotonic"),  # stored before clock.source: timers on the true time
        ({"clocks": "timers"}, "wall"),  # stored before "clocks": timers followed the skewed clock
        ({}, "wall"),
    ],
)
def test_stored_clock_source(fields: dict[str, str], source: str) -> None:
    spec, _ = from_schedule(doc(**fields))
    assert spec.db_options.clock_source == source


def test_unknown_clock_source_is_bad_input() -> None:
    with pytest.raises(InputError, match="clock-source must be one of wall, monotonic, got 'tsc'"):
        from_schedule(doc(clocks="wall", **{"clock-source": "tsc"}))


@pytest.mark.parametrize("source", ["wall", "monotonic"])
def test_a_schedule_of_format_4_holds_its_test(source: str) -> None:
    """schedule.json embeds test.json: the clock source (and every other option) is the test's own."""
    spec = TestSpec.of(seed=1, nodes=3, concurrency=2, time_limit=5.0, clock_source=source)
    stored, _ = from_schedule(document(spec, nemesis=[], ops=[], links="tcp", start="ready", clocks="wall"))
    assert stored == spec
