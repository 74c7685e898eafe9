"""Test configurations: what makes two runs "the same test" (every option but the seed), and its label.

Shared by `kraftwerk suite` (JUnit classnames) and the pipeline (verdicts per configuration), so a
configuration is spelled the same everywhere. Works on a run's `test.json` as well as on the options
a suite plans to pass to `kraftwerk test`. No Spark import here: the harness imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Keys of test.json (or option names) that do not define the configuration.
NOT_CONFIG = frozenset({"name", "seed", "argv", "start-time", "store", "quiet", "check-time-limit", "help"})
_ALIASES = {"nemeses": "nemesis", "bug": "bugs"}


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "+".join(_fmt(v) for v in value)
    if value is None:
        return "none"
    return str(value)


def config_of(test: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration part of a test.json-like mapping: normalised names, seed and bookkeeping dropped.

    `nemesis` (or `nemeses`) becomes a list in the given order, `bugs` (or `bug`) a sorted list, other
    keys keep their value with `_` in names turned into `-` (so argparse names and test.json agree).
    """
    out: dict[str, Any] = {}
    for raw_key, value in test.items():
        key = raw_key.replace("_", "-")
        key = _ALIASES.get(key, key)
        if key in NOT_CONFIG:
            continue
        if key == "nemesis":
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip() and v.strip() != "none"]
            value = list(value or [])
        elif key == "bugs":
            value = sorted(set(value or []))
        elif isinstance(value, int) and not isinstance(value, bool) and key in ("time-limit", "interval"):
            value = float(value)
        out[key] = value
    out.setdefault("nemesis", [])
    out.setdefault("bugs", [])
    return out


def config_label(test: Mapping[str, Any]) -> str:
    """A stable, human-readable label: `workload/backend/nemeses/opt=v,…[/bugs=a+b]`.

    Example: `register/sim/partition+kill/concurrency=10,interval=5,nodes=5,time-limit=60/bugs=stale-read`.
    """
    c = config_of(test)
    parts = [str(c.pop("workload", "?")), str(c.pop("backend", "?")), _fmt(c.pop("nemesis")) or "none"]
    bugs = c.pop("bugs")
    parts.append(",".join(f"{k}={_fmt(v)}" for k, v in sorted(c.items())) or "-")
    if bugs:
        parts.append(f"bugs={_fmt(bugs)}")
    return "/".join(parts)
