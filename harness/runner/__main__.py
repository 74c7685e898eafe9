"""`python -m harness.runner down|leftovers [--cluster ID]`: clean up after crashed runs on every backend
(the same as `python -m harness.backends`, kept for the commands people already know)."""

from __future__ import annotations

import sys

from harness.backends.__main__ import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
