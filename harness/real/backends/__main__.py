"""`python -m harness.real.backends down|leftovers [--backend docker|netns|local|all] [--cluster ID]`."""

from __future__ import annotations

import argparse
import sys

from harness.real.backends import registry
from harness.real.backends.base import BackendError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.real.backends", description=__doc__)
    parser.add_argument("action", choices=("down", "leftovers"), help="remove, or only list, leftover clusters")
    parser.add_argument("--backend", choices=(*registry.CLEANABLE, "all"), default="all")
    parser.add_argument("--cluster", default=None, help="only this cluster id (default: every kraftwerk cluster)")
    args = parser.parse_args(argv)
    kinds = list(registry.CLEANABLE) if args.backend == "all" else [args.backend]
    status = 0
    for kind in kinds:
        try:
            items = registry.down(kind, args.cluster) if args.action == "down" else registry.leftovers(kind)
        except BackendError as e:
            print(f"{kind}: {e}", file=sys.stderr)
            status = 255 if args.backend != "all" else status
            continue
        for item in items:
            print(f"{kind}: {item}")
    return status


if __name__ == "__main__":
    sys.exit(main())
