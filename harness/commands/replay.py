"""`kraftwerk replay RUN_DIR`: drive a stored run again from its schedule (harness.tools.replay)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.argtypes import positive_int
from harness.core.spec import add_arguments as add_test_arguments
from harness.core.spec import given
from harness.tools.replay import Settings, replay

HELP = "drive a stored run again from its schedule (simulator: identical history; real cluster: reproduce)"
DESCRIPTION = (
    "Re-run a stored run from its schedule.json (every fault and client operation) and judge it as `kraftwerk "
    "test` judged it. Any test option given replaces the stored one (e.g. --backend docker, --bug NAME, "
    "--settle 0). On the simulator the new history must equal the stored one, byte for byte, unless an option "
    "changed the test. On a real backend (the run's own, or --backend docker|netns|local|ssh, also for simulator "
    "runs such as RUN_DIR/minimal) the schedule is driven in real time on a fresh cluster up to --times N times; "
    "each attempt is stored as a normal run, and the output says in how many attempts the stored run's anomaly "
    "class came back."
)
EPILOG = (
    "Exit code, simulator: the replayed verdict (0/1/2); 255 if the history differs. Real cluster: 1 the "
    "anomaly class came back in some attempt, 0 every attempt was valid, 2 not reproduced but some attempt was "
    "unknown or invalid in another way. Both: 254 bad arguments or input, 255 the harness failed."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a stored run (store/<test>/<time>/ or its minimal/)")
    p.add_argument("--times", type=positive_int, default=1, metavar="N", help="replay up to N times (default 1)")
    r = p.add_argument_group("real backends (docker, netns, local, ssh)")
    r.add_argument(
        "--all",
        action="store_true",
        help="run all N attempts (default: stop at the first attempt that reproduces the anomaly class)",
    )
    r.add_argument("--store", default="store", metavar="DIR", help="where the attempts are stored (default ./store)")
    r.add_argument(
        "--keep-node-names",
        action="store_true",
        help="do not rename nodes in the schedule so that the fresh cluster's leaders (quorum leader; on a "
        "queue run the partition leaders) stand where the stored run's did",
    )
    r.add_argument(
        "--no-order",
        action="store_true",
        help="drive operations and faults by their times alone (default: each also waits for what had completed "
        "before it started in the stored run, so slower real operations keep the stored order)",
    )
    r.add_argument(
        "--keep-unsynced",
        action="store_true",
        help="kills keep what a node wrote but did not fsync (a process crash). Default: lose it, as a power loss "
        "and the simulator's crashes do, when replaying a simulator run or a run made with --lose-unsynced",
    )
    r.add_argument("-q", "--quiet", action="store_true", help="no progress output from the attempts")
    add_test_arguments(p, defaults=False, title="test options (each one given replaces the stored run's)")


def run(args: argparse.Namespace) -> int:
    settings = Settings(
        times=args.times,
        store=args.store,
        all=args.all,
        keep_node_names=args.keep_node_names,
        ordered=not args.no_order,
        keep_unsynced=args.keep_unsynced,
        quiet=args.quiet,
    )
    return replay(Path(args.run_dir), given(args), settings)
