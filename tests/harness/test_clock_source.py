"""clock.source in stored simulator runs: schedule.json records it, and runs stored before it replay as they ran."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.errors import InputError
from harness.core.interpreter import SCHEDULE_FORMAT
from harness.sim.runs import from_schedule


def doc(**extra: Any) -> dict[str, Any]:
    base = {"format": SCHEDULE_FORMAT, "seed": 1, "nodes": 3, "concurrency": 2, "time-limit": 5.0}
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
    assert spec.clock_source == source


def test_unknown_clock_source_is_bad_input() -> None:
    with pytest.raises(InputError, match="clock-source 'tsc'"):
        from_schedule(doc(clocks="wall", **{"clock-source": "tsc"}))
