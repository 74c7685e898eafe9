"""Per-run reports: latency and throughput plots with fault bands, per-key pages and report.html.

Built from the files of a run directory only, so simulator runs and real-cluster runs get the
same report: `write_report(run_dir)` (also `kraftwerk report RUN_DIR`).
"""

from harness.store.report.build import write_report

__all__ = ["write_report"]
