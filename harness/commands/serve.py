"""`kraftwerk serve STORE_DIR`: browse the store over HTTP (read only)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.verdict import EXIT_BAD_INPUT, EXIT_VALID
from harness.store.serve import make_server

HELP = "browse the store in a web browser: runs, verdicts, files, nightly reports"
DESCRIPTION = "Serve the store over HTTP (read only; nothing outside the store is reachable)."
EPILOG = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", metavar="STORE_DIR", help="the run store to serve")
    p.add_argument("--port", type=int, default=8080, metavar="P", help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(f"kraftwerk serve: --port must be 0..65535, got {args.port}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        server = make_server(args.store, args.host, args.port)
    except ValueError as e:
        print(f"kraftwerk serve: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"kraftwerk serve: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    host, port = server.server_address[:2]
    print(
        f"kraftwerk serve: http://{host}:{port}/ (store {Path(args.store).resolve()}; Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_VALID
