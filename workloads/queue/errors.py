"""The Kafka error codes (nodes/broker/errors.py) that several of the queue client's paths read, and
what a produce answer's code says about the records (the codes one path alone reads are in its module)."""

from __future__ import annotations

# produce errors after which nothing was appended for sure
DEFINITE_PRODUCE_ERRORS = frozenset({2, 3, 5, 17, 19, 21, 42, 74, 75})
# ... and the ones after which the records may already be in a log and commit later
INDETERMINATE_PRODUCE_ERRORS = frozenset({6, 7, 8, 20})
REFRESH = frozenset({3, 5, 6, 74, 75})  # answers that mean "ask someone else who leads this partition"
OFFSET_OUT_OF_RANGE = 1
COORDINATOR_ERRORS = frozenset({14, 15, 16})  # load in progress, not available, not coordinator: find it again


def produce_outcome(error: int) -> str:
    """ok, fail or info for a produce answered with Kafka error code `error`."""
    if error == 0:
        return "ok"
    if error in DEFINITE_PRODUCE_ERRORS:
        return "fail"
    return "info"
