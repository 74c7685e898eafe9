"""`python -m harness.backends down|leftovers [--backend docker|netns|all] [--cluster ID]`."""

from __future__ import annotations

import argparse
import sys

from harness.backends.base import BackendError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.backends", description=__doc__)
    parser.add_argument("action", choices=("down", "leftovers"), help="remove, or only list, leftover clusters")
    parser.add_argument("--backend", choices=("docker", "netns", "all"), default="all")
    parser.add_argument("--cluster", default=None, help="only this cluster id (default: every kraftwerk cluster)")
    args = parser.parse_args(argv)
    kinds = ["docker", "netns"] if args.backend == "all" else [args.backend]
    status = 0
    for kind in kinds:
        try:
            if kind == "docker":
                from harness.backends import docker as mod
            else:
                from harness.backends import netns as mod  # type: ignore[no-redef]
            if args.action == "down":
                items = mod.down(args.cluster)
            else:
                items = mod.leftovers()
        except BackendError as e:
            print(f"{kind}: {e}", file=sys.stderr)
            status = 255 if args.backend != "all" else status
            continue
        for item in items:
            print(f"{kind}: {item}")
    return status


if __name__ == "__main__":
    sys.exit(main())
