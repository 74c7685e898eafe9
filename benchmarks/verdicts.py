"""One run, one verdict: the verdict each command gives the same stored runs, as a table for RESULTS.md.

For each case (the cases of tests/test_verdict_consistency.py, and more seeds with --seeds) a run is made with
`kraftwerk test --backend sim`, then judged again by `kraftwerk check RUN_DIR`, `kraftwerk replay RUN_DIR` and
`kraftwerk analyze` (Spark, local[1]); a row per run, and the count of runs on which all four agree.

    python benchmarks/verdicts.py --seeds 3 --store /tmp/verdicts
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_verdict_consistency import SIM_CASES, VERDICT_EXITS  # noqa: E402

NAMES = {"true": "valid", "false": "invalid"}


def kraftwerk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=ROOT)


def seeded(options: list[str], seed: int) -> list[str]:
    """The case's options with another seed."""
    out = list(options)
    out[out.index("--seed") + 1] = str(seed)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=1, help="runs per case: its own seed, then the next ones")
    p.add_argument("--store", default="/tmp/kraftwerk-verdicts", help="where the runs go (emptied first)")
    args = p.parse_args()
    store = Path(args.store)
    subprocess.run(["rm", "-rf", str(store)], check=True)
    started = time.monotonic()
    rows = []
    for name, (options, _) in SIM_CASES.items():
        first = int(options[options.index("--seed") + 1])
        for seed in range(first, first + args.seeds):
            r = kraftwerk("test", "--backend", "sim", "--store", str(store), *seeded(options, seed))
            line = next(x for x in r.stderr.splitlines() if x.startswith("run directory "))
            run = Path(line.removeprefix("run directory "))
            check = kraftwerk("check", "-q", str(run)).returncode
            replay = kraftwerk("replay", str(run)).returncode
            rows.append((name, seed, run, r.returncode, check, replay))
    from checkers.pipeline.job import analyze, read_table, spark_session
    from harness.core.checks import judging

    spark = spark_session("local[1]", app="kraftwerk-verdicts", shuffle_partitions=2)
    try:
        analyze(store, store / "analysis", resolve=judging, spark=spark)
        by_run = {r["run_dir"]: r["valid"] for r in read_table(spark, store / "analysis", "verdicts").collect()}
    finally:
        spark.stop()
    print("| case | seed | test | check RUN_DIR | analyze | replay --backend sim |")
    print("|---|---|---|---|---|---|")
    agree = 0
    for name, seed, run, test, check, replay in rows:
        verdicts = (
            VERDICT_EXITS.get(test, f"exit {test}"),
            VERDICT_EXITS.get(check, f"exit {check}"),
            NAMES.get(by_run.get(str(run.resolve()), ""), "unknown"),
            VERDICT_EXITS.get(replay, f"exit {replay}"),
        )
        agree += len(set(verdicts)) == 1
        print(f"| {name} | {seed} | " + " | ".join(verdicts) + " |")
    print(f"\n{agree} of {len(rows)} runs get one verdict from all four ({time.monotonic() - started:.0f} s)")
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
