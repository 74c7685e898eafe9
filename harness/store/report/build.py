"""`write_report(run_dir)`: plots, per-key pages and report.html for one stored run."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from harness.store.report.data import load_run
from harness.store.report.page import render_report
from harness.store.report.plots import latency_plot, rate_plot
from harness.store.report.timelines import DIR, Page, write_pages

log = logging.getLogger("kraftwerk.report")


def write_report(run_dir: str | os.PathLike[str]) -> Path:
    """Build RUN_DIR/report.html (plus latency.png, rate.png, timelines/) from the run's files only.

    A plot or a page that cannot be built is logged as a warning and noted in the report;
    only a missing run directory raises (FileNotFoundError).
    """
    started = time.monotonic()
    run_path = Path(run_dir)
    if not run_path.is_dir():
        raise FileNotFoundError(f"no run directory at {run_path}")
    run = load_run(run_path)
    notes: list[str] = []
    plots: dict[str, str] = {}
    pages: list[Page] = []
    omitted = 0
    for stale in [run.dir / "latency.png", run.dir / "rate.png", *(run.dir / DIR).glob("*.html")]:
        stale.unlink(missing_ok=True)
    if run.history is not None:
        ops = run.history.operations()
        try:
            points = latency_plot(ops, run.intervals, run.dir / "latency.png", run.end)
            plots["latency.png"] = (
                f"Latency of each completed client operation ({points}) by invocation time; log scale; "
                "ok blue, info orange, fail pink; one marker per f; faults shaded."
            )
        except Exception as e:  # noqa: BLE001 - a plot never decides anything
            log.warning("kraftwerk report: latency plot failed: %s", e)
            notes.append(f"latency plot failed: {e}")
        try:
            width = rate_plot(ops, run.intervals, run.dir / "rate.png", run.end)
            plots["rate.png"] = (
                f"Completed operations per second ({width:g} s buckets) per f and outcome; faults shaded."
            )
        except Exception as e:  # noqa: BLE001
            log.warning("kraftwerk report: rate plot failed: %s", e)
            notes.append(f"rate plot failed: {e}")
        try:
            pages, omitted = write_pages(run)
        except Exception as e:  # noqa: BLE001
            log.warning("kraftwerk report: per-key pages failed: %s", e)
            notes.append(f"per-key pages failed: {e}")
    text = render_report(run, plots, pages, omitted, notes, built_in=time.monotonic() - started)
    path = run.dir / "report.html"
    path.write_text(text, encoding="utf-8")
    return path
