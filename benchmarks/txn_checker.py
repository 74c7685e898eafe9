"""Transactional queue checker throughput (checkers/txn_queue.py) on valid synthetic histories.

    .venv/bin/python benchmarks/txn_checker.py [--entries 1000000] [--seed 1] [--full-graph]

The history comes from `synthetic_history` (10 processes, up to 10 transactions in flight, 1-4
send/poll micro-ops each, 5 % aborted, final polls). Generation and pairing of invocations with
completions are not timed; the check is. `--full-graph` turns off the fast path (no cycle search
when every ww/wr edge follows completion order), so the whole dependency graph (ww, wr, process and
realtime edges, Tarjan's SCCs) is built and searched.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project, before benchmarks/checkers.py

from checkers.txn_queue import check_txn_queue, synthetic_history  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--full-graph", action="store_true")
    args = ap.parse_args()
    history = synthetic_history(args.entries, args.seed)
    operations = len(history.operations())
    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    result = check_txn_queue(history, fast_path=not args.full_graph)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    assert result["valid"] is True, result["anomaly-types"]
    print(
        f"full-graph={args.full_graph} entries={len(history):,} operations={operations:,} "
        f"txns={result['stats']['txns']} "
        f"pairs-read={result['stats']['pairs-read']:,} seconds={elapsed:.2f} "
        f"entries/s={len(history) / elapsed:,.0f} operations/s={operations / elapsed:,.0f} load1={load:.1f} "
        f"cpu-seconds={cpu:.2f} entries/cpu-s={len(history) / cpu:,.0f}"
    )


if __name__ == "__main__":
    main()
