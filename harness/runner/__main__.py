"""`python -m harness.runner down|leftovers [--cluster ID]`: clean up after crashed runs on every backend.

docker and netns are delegated to harness.backends; local clusters (processes, iptables
chains, directories) are handled by harness.runner.local.
"""

from __future__ import annotations

import argparse
import sys

from harness.backends.base import BackendError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.runner", description=__doc__)
    parser.add_argument("action", choices=("down", "leftovers"))
    parser.add_argument("--backend", choices=("docker", "netns", "local", "all"), default="all")
    parser.add_argument("--cluster", default=None, help="only this cluster id (default: every kraftwerk cluster)")
    args = parser.parse_args(argv)
    kinds = ["docker", "netns", "local"] if args.backend == "all" else [args.backend]
    status = 0
    for kind in kinds:
        try:
            if kind == "docker":
                from harness.backends import docker as mod
            elif kind == "netns":
                from harness.backends import netns as mod  # type: ignore[no-redef]
            else:
                from harness.runner import local as mod  # type: ignore[no-redef]
            items = mod.down(args.cluster) if args.action == "down" else mod.leftovers()
        except BackendError as e:
            print(f"{kind}: {e}", file=sys.stderr)
            status = 255 if args.backend != "all" else status
            continue
        for item in items:
            print(f"{kind}: {item}")
    return status


if __name__ == "__main__":
    sys.exit(main())
