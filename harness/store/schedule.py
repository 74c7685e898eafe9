"""schedule.json: what drove a run — its test, its faults and its client operations — to drive it again.

Format 4 embeds the test: `{"format": 4, "test": <test.json's options>, "nemesis": [fault events],
"ops": [client operations], …}` plus what a runtime adds (the simulator: how it simulated the run — the
modes "links", "start", "clocks" — and "main-start", "assignment"; a real run: "heal", the events that
healed it). Formats 2 and 3 (runs stored before the test was embedded) kept a second copy of some options
beside the schedule (seed, nodes, concurrency, time-limit, bugs, the queue's options, …); `spec_of` reads
every format, with the run's test.json for what those copies lacked.

The format number also says what a replay can promise: format 2's lazy-flush runs cannot come back byte
for byte (the bug's flushes moved to whole intervals of the node's clock in format 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checkers.errors import InputError
from harness.core.spec import SpecError, TestSpec
from workloads.options import OptionError

FORMAT = 4
READABLE = (1, 2, 3, 4)  # a real replay reads any; the simulator replays formats 2 and later (sim.runs)
REQUIRED = ("nemesis", "ops")


def document(spec: TestSpec, **fields: Any) -> dict[str, Any]:
    """A schedule.json of a run of `spec`: the test embedded, then the runtime's own `fields`."""
    return {"format": FORMAT, "test": spec.to_json(), **fields}


def check_format(doc: Mapping[str, Any]) -> int:
    """The document's format, if this kraftwerk reads it; InputError naming it otherwise."""
    if not isinstance(doc, Mapping):
        raise InputError("schedule.json: not a JSON object")
    version = doc.get("format", 1)
    if version not in READABLE:
        raise InputError(
            f"schedule.json is format {version}; this kraftwerk reads formats {', '.join(map(str, READABLE))} "
            "(a newer kraftwerk wrote it?)"
        )
    missing = [name for name in REQUIRED if name not in doc]
    if version < 4:
        missing += [name for name in ("seed", "nodes", "concurrency", "time-limit") if name not in doc]
    elif not isinstance(doc.get("test"), Mapping):
        missing.append("test")
    if missing:
        raise InputError(f"schedule.json has no {', '.join(repr(m) for m in missing)} (written by an older kraftwerk?)")
    return int(version)


# format 2 and 3: the options schedule.json kept beside the schedule (test.json's names), read over test.json's
_OLD_COPIES = (
    "workload",
    "seed",
    "nodes",
    "concurrency",
    "time-limit",
    "bugs",
    "fsync-delay-ms",
    "clock-source",
    "lease-reads",
    "acks",
    "partitions",
    "replication-factor",
    "min-isr",
    "unclean",
    "sub-via",
    "txn",
)


def spec_of(doc: Mapping[str, Any], test: Mapping[str, Any] | None = None) -> TestSpec:
    """The test a stored schedule.json ran (its embedded test; for formats 2 and 3 the run's test.json `test`
    overlaid with the copies the schedule kept). InputError if it is not a test this kraftwerk runs."""
    version = check_format(doc)
    if version >= 4:
        stored: dict[str, Any] = dict(doc["test"])
    else:
        stored = dict(test or {})
        stored.update({k: doc[k] for k in _OLD_COPIES if k in doc})
        stored.setdefault("workload", "register")
        # the nemeses that ran are the ones whose events the schedule holds (what the simulator healed)
        stored["nemesis"] = sorted({str(e["package"]) for e in doc["nemesis"] if "package" in e})
        # runs stored before "clock-source": with "clocks": "wall" the nodes' timers ran on the true time
        if "clock-source" not in stored:
            stored["clock-source"] = "monotonic" if doc.get("clocks") == "wall" else "wall"
    try:
        return TestSpec.from_json(stored)
    except (SpecError, OptionError) as e:
        raise InputError(f"schedule.json: {str(e).removeprefix('test.json: ')}") from None
