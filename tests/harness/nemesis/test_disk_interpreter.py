"""The nemesis interpreter's disk events: targets resolved once, victims kept down until stop-disk, healed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from harness.nemesis.interpreter import NemesisInterpreter


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def disk_fault(self, fault: str, nodes: Sequence[str], seed: int) -> dict[str, Any]:
        self.calls.append(("disk_fault", (fault, list(nodes), seed)))
        return {n: {"fault": fault} for n in nodes}

    def kill(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("kill", list(nodes)))
        return list(nodes)

    def start(self, nodes: Sequence[str]) -> list[str]:
        self.calls.append(("start", list(nodes)))
        return list(nodes)


def test_start_and_stop_disk() -> None:
    faults = Recording()
    nemesis = NemesisInterpreter(faults, ["n1", "n2", "n3"], random.Random(0))  # type: ignore[arg-type]
    event = {"f": "start-disk", "value": {"fault": "corrupt", "nodes": "leader", "seed": 7}}
    assert nemesis.needs_leader(event)
    applied = nemesis.apply(event, "n2")
    assert faults.calls == [("disk_fault", ("corrupt", ["n2"], 7))]
    assert applied.realised == {"fault": "corrupt", "nodes": ["n2"], "seed": 7}
    assert nemesis.in_force()["disk"] and nemesis.heal_events() == [{"f": "stop-disk", "value": None}]
    nemesis.apply({"f": "kill", "value": ["n3"]})
    nemesis.apply({"f": "stop-disk", "value": None})
    assert faults.calls[-1] == ("start", ["n2"])  # the killed node is the kill package's to restart
    assert not nemesis.in_force()["disk"] and nemesis.in_force()["kill"]


def test_unknown_disk_fault_is_a_clear_error() -> None:
    nemesis = NemesisInterpreter(Recording(), ["n1"], random.Random(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown disk fault 'melt'"):
        nemesis.apply({"f": "start-disk", "value": {"fault": "melt", "nodes": ["n1"]}})
