"""Run a command and report the CPU seconds its whole process tree used, next to its wall time.

On a shared machine a wall-clock rate says how much of the CPU the command got as much as how fast
it is; CPU seconds say what it costs. `time` misses descendants nobody waits for (a JVM that a
Python driver starts, the Python workers a Spark daemon forks), so this polls /proc every
--interval seconds and keeps, for every process of the tree seen, the last user+system time read.
A process that lives shorter than the interval may be missed; one that exits loses at most an
interval's worth. Linux only.

Usage: .venv/bin/python benchmarks/cputime.py [--interval 0.2] -- COMMAND [ARG…]
Prints one line to stderr at the end; the command's exit code is this one's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds) of `pid`, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Update `seen` (pid → CPU seconds) with `root` and every descendant alive now."""
    parents: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents.setdefault(stat[0], []).append(int(entry))
                times[int(entry)] = stat[1]
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in times:
            seen[pid] = max(seen.get(pid, 0.0), times[pid])
        todo.extend(parents.get(pid, []))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=float, default=0.2, help="seconds between polls (default 0.2)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.interval <= 0:
        p.print_usage(sys.stderr)
        print("cputime.py: give a command after -- and a positive --interval", file=sys.stderr)
        return 254
    started = time.monotonic()
    proc = subprocess.Popen(command)
    seen: dict[int, float] = {}
    while proc.poll() is None:
        tree_cpu(proc.pid, seen)
        time.sleep(args.interval)
    wall = time.monotonic() - started
    cpu = sum(seen.values())
    print(f"cputime: {wall:.1f} s wall, {cpu:.1f} CPU s over {len(seen)} processes", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
