"""Human summaries on stderr (rich), kept apart from the JSON on stdout."""

from __future__ import annotations

from typing import Any

SHOWN = 20


def _reason(result: dict[str, Any]) -> str:
    if "error" in result:
        return str(result["error"])
    failure = result.get("failure")
    if isinstance(failure, dict):
        key = failure.get("key")
        where = f"key {key}: " if key is not None else ""
        return where + str(failure.get("summary", "not linearizable"))
    types = result.get("bad-anomaly-types") or result.get("anomaly-types")
    if types:
        return "anomalies: " + ", ".join(map(str, types))
    if result.get("cause"):
        return f"cause: {result['cause']}"
    return ""


def print_check_summary(results: list[dict[str, Any]]) -> None:
    """One line per non-valid file (at most SHOWN) and a tally."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    tally = {"valid": 0, "invalid": 0, "unknown": 0, "error": 0}
    shown = 0
    for r in results:
        v = r.get("valid")
        kind = "error" if "error" in r else ("valid" if v is True else "invalid" if v is False else "unknown")
        tally[kind] += 1
        if kind == "valid" and len(results) > 1:
            continue
        if shown >= SHOWN:
            continue
        shown += 1
        style = {"valid": "green", "invalid": "bold red", "unknown": "yellow", "error": "red"}[kind]
        label = {"valid": "valid", "invalid": "INVALID", "unknown": "unknown", "error": "bad input"}[kind]
        model = r.get("model")
        model_s = f" ({model})" if model else ""
        reason = _reason(r)
        console.print(
            f"[{style}]{label}[/{style}] {escape(str(r.get('file')))}{escape(model_s)}"
            + (f" — {escape(reason)}" if reason else "")
        )
    if shown < sum(tally[k] for k in ("invalid", "unknown", "error")):
        console.print(f"… and {sum(tally.values()) - tally['valid'] - shown} more not shown")
    if len(results) > 1 or tally["valid"] == 0:
        parts = [f"{n} {k}" for k, n in tally.items() if n]
        console.print(f"{len(results)} file(s): " + ", ".join(parts))
