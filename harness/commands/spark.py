"""`kraftwerk spark up|down|status`: a standalone Spark cluster on this machine's containers."""

from __future__ import annotations

import argparse
import sys

from checkers.verdict import EXIT_BAD_INPUT, EXIT_INTERNAL

HELP = "start or remove a standalone Spark cluster on this machine's containers (for explore/suite/analyze)"
DESCRIPTION = (
    "Start a Spark master and N workers, each its own container on a private docker network, with the "
    "store mounted at the same path in every container; print the master URL to pass as --master."
)
EPILOG = (
    "Example: kraftwerk explore --runs 200 --master $(kraftwerk spark up --workers 2 --store store); "
    "kraftwerk spark down. Exit code: 0 done, 254 bad arguments, 255 Docker or Spark failed."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="spark_command", metavar="ACTION", required=True)
    u = sub.add_parser("up", help="start a master and --workers workers; print the master URL")
    u.add_argument("--workers", type=int, default=2, metavar="N", help="worker containers (default 2)")
    u.add_argument("--cores", type=int, default=1, metavar="N", help="cores each worker offers (default 1)")
    u.add_argument("--memory", default="2g", metavar="SIZE", help="memory each worker offers (default 2g)")
    u.add_argument("--store", default="store", metavar="DIR", help="the store every host sees (default ./store)")
    u.add_argument("--name", default="kwspark", help="the cluster's name (default kwspark)")
    d = sub.add_parser("down", help="remove the cluster's containers and network")
    d.add_argument("--name", default="kwspark", help="the cluster's name (default kwspark)")
    sub.add_parser("status", help="list kraftwerk Spark clusters and their containers")


def run(args: argparse.Namespace) -> int:
    from harness.tools.spark_cluster import SparkClusterError, clusters, down, up

    try:
        if args.spark_command == "up":
            if args.workers < 1 or args.cores < 1:
                print("kraftwerk spark up: --workers and --cores must be at least 1", file=sys.stderr)
                return EXIT_BAD_INPUT
            info = up(
                args.workers,
                args.store,
                name=args.name,
                cores=args.cores,
                memory=args.memory,
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
            print(f"store {info.store} is mounted at the same path on every host", file=sys.stderr)
            print(f"remove it with: kraftwerk spark down --name {info.name}", file=sys.stderr)
            print(info.master_url)
            return 0
        if args.spark_command == "down":
            removed = down(args.name)
            for name in removed:
                print(f"removed {name}", file=sys.stderr)
            if not removed:
                print(f"no Spark cluster named {args.name!r}", file=sys.stderr)
            return 0
        for name, containers in sorted(clusters().items()):
            print(f"{name}: {', '.join(sorted(containers))}")
        return 0
    except SparkClusterError as e:
        print(f"kraftwerk spark {args.spark_command}: {e}", file=sys.stderr)
        return EXIT_INTERNAL
