#!/bin/sh
# Build (or reuse) the kraftwerk node image; same as `kraftwerk image build`. Options: --help.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-"$root/.venv/bin/python"}
[ -x "$py" ] || py=python3
cd "$root" && exec "$py" -m harness.commands.image build "$@"
