"""Human summaries on stderr (rich), kept apart from the JSON on stdout."""

from __future__ import annotations

from pathlib import Path
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
    from checkers.registry import allowed_anomalies, bad_anomalies

    words = []
    bad, allowed = bad_anomalies(result), allowed_anomalies(result)
    if bad:
        words.append("anomalies: " + ", ".join(map(str, bad)))
    if allowed:
        words.append("allowed: " + ", ".join(map(str, allowed)))
    never = (result.get("stats") or {}).get("never-ok")
    if never:
        words.append("never succeeded in the main phase: " + ", ".join(map(str, never)))
    if result.get("cause"):
        words.append(f"cause: {result['cause']}")
    for name, part in result.items():
        if isinstance(part, dict) and part.get("error") and name != "stats":
            words.append(f"{name}: {part['error']}")
    return "; ".join(words)


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


def print_verdict(results: dict[str, Any], run_dir: Path, reproduce: str) -> None:
    """A judged run's verdict on stderr (the anomalies that fail it, those the test allows, why it is unknown),
    where its results are, how to run it again; then its report.html (which never changes the verdict)."""
    from rich.console import Console
    from rich.markup import escape

    from checkers.registry import allowed_anomalies, bad_anomalies

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    valid = results["valid"]
    allowed = allowed_anomalies(results)
    if valid is True:
        console.print("[green]Everything looks good![/green]")
    elif valid is False:
        console.print(f"[bold red]Analysis invalid![/bold red] anomalies: {', '.join(bad_anomalies(results))}")
        lin = results.get("linearizable", {})
        queue = results.get("queue", {})
        if queue.get("valid") is False:
            bad = set(bad_anomalies(queue))
            counts = {k: v.get("count") for k, v in queue.get("anomalies", {}).items() if k in bad}
            console.print(f"  queue: {', '.join(f'{k} ×{n}' for k, n in counts.items())}")
        if lin.get("valid") is False:
            console.print(f"  linearizability: key {lin['failure'].get('key')}: {lin['failure'].get('summary')}")
    else:
        why = [
            f"{name}: {part.get('error') or part.get('cause') or 'unknown'}"
            for name, part in results.items()
            if isinstance(part, dict) and part.get("valid") not in (True, False) and "valid" in part
        ]
        never = (results.get("stats") or {}).get("never-ok")
        if never:
            why = [w for w in why if not w.startswith("stats:")]
            why.append(f"never succeeded in the main phase: {', '.join(never)} (the test tested nothing of it)")
        console.print(f"[yellow]Unknown:[/yellow] no anomaly found, but {escape('; '.join(why) or 'no verdict')}")
    if allowed:
        console.print(f"  allowed by the test (not failing it): {', '.join(allowed)}")
    console.print(f"results: {run_dir / 'results.json'}")
    console.print(f"reproduce: {reproduce}")
    try:  # report.html, plots and timelines (sim and real runs alike), after results.json
        from harness.store.report import write_report

        console.print(f"report: {escape(str(write_report(run_dir)))}")
    except Exception as e:  # noqa: BLE001 - the report never changes the verdict or the exit code
        console.print(f"[yellow]kraftwerk test: warning: could not write the report: {escape(str(e))}[/yellow]")
