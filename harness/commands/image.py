"""`kraftwerk image`: build (or reuse) the docker node image."""

from __future__ import annotations

import argparse
import os
import sys

from harness.real.image import BASE_MODES, ImageError, build, node_tag, prune

HELP = "build (or reuse) the docker node image"
DESCRIPTION = "Build the kraftwerk node image (offline debootstrap base when no registry is reachable)."
EPILOG = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="image_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="build the node image unless the current one exists (prints its tag)")
    b.add_argument("--force", action="store_true", help="rebuild the base and the node image")
    b.add_argument(
        "--base",
        choices=BASE_MODES,
        default=os.environ.get("KRAFTWERK_IMAGE_BASE", "auto"),
        help="base image source: debian:bookworm-slim from a registry, an offline debootstrap, "
        "or auto (registry if reachable, else debootstrap; default, or $KRAFTWERK_IMAGE_BASE)",
    )
    b.add_argument("-q", "--quiet", action="store_true", help="print only the tag")
    sub.add_parser("tag", help="print the tag the current sources build to")
    sub.add_parser("prune", help="remove kraftwerk images other than the current ones")


def run(args: argparse.Namespace) -> int:
    """Run `kraftwerk image ACTION` from parsed arguments; exit code."""
    try:
        if args.image_command == "tag":
            print(node_tag())
            return 0
        if args.image_command == "prune":
            for t in prune():
                print(f"removed {t}")
            return 0
        log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
        result = build(force=args.force, base_mode=args.base, log=log)
    except ImageError as e:
        print(f"kraftwerk image: {e}", file=sys.stderr)
        return 255
    if not args.quiet:
        how = "built" if result.built else "up to date"
        base = f"base {result.base_method}" if result.base_built else "base reused"
        print(f"{result.tag} {how} in {result.seconds:.1f}s ({base})", file=sys.stderr)
    print(result.tag)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraftwerk image", description="Build the kraftwerk node image.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
