"""Node-side daemon helper, run as `python3 -c <this source> OP ARGS…` by every transport.

Standard library only: it runs inside bare node images and on SSH hosts. Each
operation prints one JSON line. A pidfile holds "<pid> <start-time>"; a pid
whose /proc start time differs (recycled) or that is a zombie counts as dead.
Daemons are session leaders, so signals go to the whole process group.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time


def _stat(pid):
    """(state letter, start time) of a pid, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], fields[19]


def _group_states(pgid):
    """State letters of every process in a process group (a paused daemon may have children mid-fork)."""
    states = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields[2] == str(pgid):
            states.append(fields[0])
    return "".join(sorted(states))


def _live(pidfile):
    """(pid, state) of the daemon owning pidfile, or (None, None)."""
    try:
        with open(pidfile) as f:
            pid_text, start = f.read().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None, None
    st = _stat(pid)
    if st is None or st[1] != start or st[0] in ("Z", "X", "x"):
        return None, None
    return pid, st[0]


def _signal(pid, sig):
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def _wait_gone(pidfile, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _live(pidfile)[0] is None:
            return True
        time.sleep(0.02)
    return _live(pidfile)[0] is None


def _spawn(spec, env, log, null):
    return subprocess.Popen(
        spec["argv"],
        cwd=spec.get("cwd") or None,
        env=env,
        stdin=null,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
    )


def start(spec_json):
    spec = json.loads(spec_json)
    pid, _ = _live(spec["pidfile"])
    if pid is not None:
        return {"error": f"already running as pid {pid} ({spec['pidfile']})", "pid": pid}
    for path in (spec["pidfile"], spec["logfile"]):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    with open(spec["logfile"], "ab") as log, open(os.devnull, "rb") as null:
        try:
            proc = _spawn(spec, env, log, null)
        except OSError as e:
            return {"error": f"cannot start {spec['argv'][0]!r}: {e}", "pid": None}
    st = _stat(proc.pid)
    tmp = spec["pidfile"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{proc.pid} {st[1] if st else 0}\n")
    os.replace(tmp, spec["pidfile"])
    return {"pid": proc.pid}


def main(argv):
    op = argv[0]
    if op == "start":
        return start(argv[1])
    pidfile = argv[1]
    pid, state = _live(pidfile)
    if op == "status":
        return {"pid": pid, "state": state, "group": _group_states(pid) if pid is not None else ""}
    if op == "signal":
        if pid is not None:
            _signal(pid, int(argv[2]))
        return {"pid": pid}
    if op == "kill":
        if pid is not None:
            _signal(pid, signal.SIGKILL)
            if not _wait_gone(pidfile, float(argv[2])):
                return {"pid": pid, "error": "still alive after SIGKILL"}
        return {"pid": pid}
    if op == "stop":
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            _signal(pid, signal.SIGCONT)  # a paused process must run to handle SIGTERM
            if not _wait_gone(pidfile, float(argv[2])):
                _signal(pid, signal.SIGKILL)
                _wait_gone(pidfile, 10.0)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pidfile)
        return {"pid": pid}
    raise SystemExit(f"unknown op {op!r}")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
