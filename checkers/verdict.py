"""Verdicts: composing checker results and mapping them to exit codes (Jepsen's conventions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Valid = bool | str  # True, False or "unknown"

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_INPUT = 254
EXIT_INTERNAL = 255


def merge_valid(values: Iterable[Valid]) -> Valid:
    """false beats unknown beats true (an empty set of results is true)."""
    out: Valid = True
    for v in values:
        if v is False:
            return False
        if v != True:  # noqa: E712 - "unknown" or anything not exactly True
            out = "unknown"
    return out


def compose(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Compose named checker results: {"valid": merged, name: result, …}."""
    out: dict[str, Any] = {"valid": merge_valid(r.get("valid", "unknown") for r in results.values())}
    types: list[str] = []
    for name, r in results.items():
        out[name] = dict(r)
        for t in r.get("anomaly-types", []):
            if t not in types:
                types.append(t)
    if types:
        out["anomaly-types"] = types
    return out


def exit_code(valid: Valid) -> int:
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


_SEVERITY = {EXIT_VALID: 0, EXIT_UNKNOWN: 1, EXIT_INVALID: 2, EXIT_BAD_INPUT: 3, EXIT_INTERNAL: 4}


def worst_exit(codes: Iterable[int]) -> int:
    """Worst of several exit codes: 255 > 254 > 1 (invalid) > 2 (unknown) > 0."""
    worst = EXIT_VALID
    for c in codes:
        if _SEVERITY.get(c, 4) > _SEVERITY[worst]:
            worst = c
    return worst


def failing_key(results: dict[str, Any]) -> str | None:
    """The key (register or partition) a checker blamed first, if any."""
    failure = results.get("linearizable", {}).get("failure") or {}
    if failure.get("key") is not None:
        return str(failure["key"])
    for _, found in sorted(results.get("queue", {}).get("anomalies", {}).items()):
        for example in found.get("examples", []):
            if isinstance(example, dict) and example.get("key") is not None:
                return str(example["key"])
    for found in results.get("partition-logs", {}).get("anomalies", {}).values():
        for example in found:
            if isinstance(example, dict) and example.get("partition") is not None:
                return str(example["partition"])
    return None


class AnomalyCounts:
    """Anomalies found so far: a count per name, and the first `keep` examples of each."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[dict[str, Any]]] = {}

    def add(self, name: str, example: dict[str, Any]) -> None:
        n = self.counts.get(name, 0)
        self.counts[name] = n + 1
        if n < self.keep:
            self.examples.setdefault(name, []).append(example)
