"""Node-side daemon helper, run as `python3 -c <this source> OP ARGS…` by every transport.

Standard library only: it runs inside bare node images and on SSH hosts. Each
operation prints one JSON line. A pidfile holds "<pid> <start-time>"; a pid
whose /proc start time differs (recycled) or that is a zombie counts as dead.
Daemons are session leaders, so signals go to the whole process group.

`python3 -u -c <this source> agent` is the control agent instead: it stays up,
reads one JSON request per line on stdin and answers each with one JSON line on
stdout (by "id", in any order: requests run on threads of their own), so a
fault costs no new process on the node — `docker exec` alone takes ~80 ms and a
Python start ~40 ms more. Requests: {"id", "op": "sh", "command", "timeout"}
→ {"id", "status", "stdout", "stderr"} (base64; "timeout": true when killed
past its timeout); {"id", "op": "daemon", "args": [OP, ARGS…]} → {"id",
"reply"}; {"id", "op": "write", "path", "data" (base64), "mode"} → {"id"} once
the file is replaced atomically. A daemon `start` runs in a helper process of its
own, so the daemon is not the agent's child. Stdin closing ends the agent.
"""

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
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
        time.sleep(0.005)
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


def _agent_sh(command, timeout):
    proc = subprocess.Popen(
        ["sh", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"timeout": True}
    return {
        "status": proc.returncode,
        "stdout": base64.b64encode(out).decode(),
        "stderr": base64.b64encode(err).decode(),
    }


def _agent_daemon(args):
    if args[0] != "start":
        return {"reply": main(args)}
    # a daemon started by the agent would be its child, and a zombie in it once killed
    helper = subprocess.run(
        [sys.executable, "-c", _SOURCE, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
    )
    if helper.returncode != 0:
        return {"error": helper.stderr.decode(errors="replace")[-2000:]}
    return {"reply": json.loads(helper.stdout.decode().strip().splitlines()[-1])}


def _agent_write(path, data, mode):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return {}


def agent():
    out = threading.Lock()

    def serve(request):
        try:
            if request["op"] == "sh":
                answer = _agent_sh(request["command"], request.get("timeout"))
            elif request["op"] == "daemon":
                answer = _agent_daemon(request["args"])
            elif request["op"] == "write":
                answer = _agent_write(request["path"], base64.b64decode(request["data"]), int(request["mode"]))
            else:
                answer = {"error": f"unknown op {request['op']!r}"}
        except BaseException as e:  # noqa: BLE001 - every request gets an answer
            answer = {"error": f"{type(e).__name__}: {e}"}
        line = json.dumps({"id": request.get("id"), **answer}) + "\n"
        with out:
            sys.stdout.write(line)
            sys.stdout.flush()

    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=serve, args=(json.loads(line),), daemon=True).start()


_SOURCE = None  # this file's text, for the helper processes the agent starts (set by the control side)

if __name__ == "__main__":
    if sys.argv[1:2] == ["agent"]:
        _SOURCE = sys.argv[2] if len(sys.argv) > 2 else None
        agent()
    else:
        print(json.dumps(main(sys.argv[1:])))
