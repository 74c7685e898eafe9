"""``python -m nodes``: run a node process or dump its committed log (``nodes/runtime/cli.py``)."""

import sys

from .runtime.cli import main

if __name__ == "__main__":
    sys.exit(main())
