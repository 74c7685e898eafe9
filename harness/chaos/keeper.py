"""The fault keeper of a cluster left running: one process per cluster directory that holds its faults.

``kraftwerk cluster pause|resume|partition|heal|clock|packet|status`` are separate processes, but the faults
they inject must outlive each of them: the grudge in force, the paused nodes, the clock offsets, the packet
shaper. So the first of them starts a keeper (``python -m harness.chaos.keeper DIR``, detached, logging to
``DIR/keeper.log``): a `ChaosCluster.attach(DIR)` whose nemesis (the one nemesis interpreter over the real
`Faults` port, as in ``kraftwerk test``) applies every request. Later verbs talk to it over a unix socket
(``DIR/faults.sock``, or a path under the temporary directory when DIR's is too long for one).

One request per connection, one JSON line each way::

    {"verb": "pause", "args": {"target": "leader"}}
    {"ok": true, "result": ["n2"], "faults": {"paused": "n2"}}
    {"ok": false, "error": "…", "code": 254}

``stop`` (sent by ``kraftwerk cluster down``) heals every fault and ends the keeper; so does SIGTERM, and a
keeper whose cluster is gone (``DIR/cluster.json`` removed or marked down) ends by itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.chaos.cluster import ChaosCluster, ChaosError

__all__ = ["KeeperError", "call", "running", "socket_path", "stop", "stop_all"]

LOG = "keeper.log"
LOCK = "keeper.lock"
START_TIMEOUT = 90.0  # attaching sets iptables chains and faketime files up on every host
REQUEST_TIMEOUT = 300.0  # a strobe or a heal of many faults on docker can take a while
IDLE_CHECK = 2.0  # how often an idle keeper looks whether its cluster is still there
EXIT_BAD_INPUT, EXIT_FAILED = 254, 255
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


class KeeperError(RuntimeError):
    """A request failed; ``code`` is the exit code (254: the request or the fault is not possible here, 255: the
    keeper or the cluster failed)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def socket_path(directory: Path) -> Path:
    """Where the keeper of the cluster in ``directory`` listens."""
    directory = Path(directory).resolve()
    path = directory / "faults.sock"
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(str(directory).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kraftwerk-faults-{digest}.sock"


# ---------------------------------------------------------------------- the client side (CLI verbs)


def _connect(directory: Path, timeout: float) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(socket_path(directory)))
    except OSError:
        sock.close()
        return None
    return sock


def running(directory: Path) -> bool:
    """Does a keeper serve the cluster in ``directory``?"""
    sock = _connect(directory, 2.0)
    if sock is None:
        return False
    sock.close()
    return True


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start(directory: Path, say: Callable[[str], None]) -> socket.socket:
    """Start the keeper of ``directory`` (unless one is starting already) and connect to it."""
    directory = Path(directory).resolve()
    if not (directory / "cluster.json").exists():
        raise KeeperError(f"no cluster in {directory} ({directory / 'cluster.json'} does not exist)", EXIT_BAD_INPUT)
    say(f"starting the fault keeper of {directory} (log: {directory / LOG})")
    with open(directory / LOG, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "harness.chaos.keeper", str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # it outlives this command and its terminal's Ctrl-C
            cwd=directory,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        sock = _connect(directory, REQUEST_TIMEOUT)
        if sock is not None:
            return sock
        code = process.poll()
        if code is not None and code != 0:
            raise KeeperError(
                f"the fault keeper of {directory} exited ({code}):\n{_tail(directory / LOG)}",
                EXIT_BAD_INPUT if code == EXIT_BAD_INPUT else EXIT_FAILED,
            )
        time.sleep(0.1)
    raise KeeperError(
        f"the fault keeper of {directory} did not start within {START_TIMEOUT:g} s:\n{_tail(directory / LOG)}"
    )


def _exchange(sock: socket.socket, request: Mapping[str, Any]) -> dict[str, Any]:
    with sock, sock.makefile("rwb") as stream:
        stream.write(json.dumps(request).encode() + b"\n")
        stream.flush()
        line = stream.readline()
    if not line:
        raise KeeperError("the fault keeper closed the connection without answering (see its keeper.log)")
    return json.loads(line)


def call(
    directory: Path, verb: str, args: Mapping[str, Any] | None = None, *, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Have the keeper of the cluster in ``directory`` (started if none runs) do ``verb``; its answer
    ({"result", "faults"}), or KeeperError."""
    sock = _connect(directory, REQUEST_TIMEOUT) or _start(directory, say)
    answer = _exchange(sock, {"verb": verb, "args": dict(args or {})})
    if not answer.get("ok"):
        raise KeeperError(str(answer.get("error")), int(answer.get("code", EXIT_FAILED)))
    return answer


def stop(directory: Path, timeout: float = 60.0) -> dict[str, Any] | None:
    """Heal every fault and end the keeper of ``directory``; its answer, or None if none was running."""
    sock = _connect(directory, timeout)
    if sock is None:
        return None
    answer = _exchange(sock, {"verb": "stop", "args": {}})
    deadline = time.monotonic() + timeout
    while running(directory) and time.monotonic() < deadline:
        time.sleep(0.05)
    return answer


def stop_all() -> list[int]:
    """SIGTERM every keeper on this machine (``kraftwerk cluster down`` without --dir); the pids signalled."""
    signalled = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness.chaos.keeper" in argv:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), 15)
                signalled.append(int(entry.name))
    return signalled


# ---------------------------------------------------------------------- the keeper


def _target(args: Mapping[str, Any], default: Any = "leader") -> Any:
    target = args.get("target", default)
    if isinstance(target, str) and "," in target:
        return [t for t in target.split(",") if t]
    return target


VERBS: dict[str, Callable[[ChaosCluster, Mapping[str, Any]], Any]] = {
    "pause": lambda c, a: c.pause(_target(a), topic=a.get("topic"), partition=int(a.get("partition", 0))),
    "resume": lambda c, a: c.resume(_target(a, None)),
    "partition": lambda c, a: c.partition(a.get("grudge") or a.get("kind", "halves")),
    "heal": lambda c, a: c.heal(),
    "clock": lambda c, a: c.clock(
        _target(a, "leader" if not a.get("reset") else None),
        bump_ms=a.get("bump_ms"),
        drift_ppm=float(a.get("drift_ppm", 0.0)),
        strobe_ms=a.get("strobe_ms"),
        period_ms=float(a.get("period_ms", 10.0)),
        seconds=float(a.get("seconds", 5.0)),
        reset=bool(a.get("reset")),
    ),
    "packet": lambda c, a: c.packet(
        loss=a.get("loss"),
        delay_ms=a.get("delay_ms"),
        jitter_ms=float(a.get("jitter_ms", 0.0)),
        duplicate=a.get("duplicate"),
        reorder=a.get("reorder"),
        nodes=_target({"target": a.get("nodes", "all")}),
        peers=_target({"target": a.get("peers", "all")}),
    ),
    "status": lambda c, a: c.status(),
}


def _answer(cluster: ChaosCluster, request: Mapping[str, Any]) -> dict[str, Any]:
    verb, args = request.get("verb"), request.get("args") or {}
    if verb == "stop":
        return {"ok": True, "result": cluster.heal(), "faults": cluster.nemesis.active()}
    handler = VERBS.get(str(verb))
    if handler is None:
        return {"ok": False, "error": f"unknown request {verb!r} (known: {', '.join([*VERBS, 'stop'])})", "code": 254}
    try:
        result = handler(cluster, args)
    except ChaosError as e:  # its message names the fault already
        return {"ok": False, "error": str(e), "code": EXIT_BAD_INPUT}
    except (ValueError, TypeError, KeyError) as e:
        return {"ok": False, "error": f"{verb}: {e}", "code": EXIT_BAD_INPUT}
    except LookupError as e:  # no leader to name (PartitionLeaderError): an unknown topic is the request's fault
        return {"ok": False, "error": f"{verb}: {e}", "code": EXIT_BAD_INPUT if getattr(e, "bad_input", True) else 255}
    except Exception as e:  # noqa: BLE001 - the keeper must answer and keep serving
        traceback.print_exc()
        return {"ok": False, "error": f"{verb} failed: {type(e).__name__}: {e}", "code": EXIT_FAILED}
    return {"ok": True, "result": result, "faults": cluster.nemesis.active()}


def _cluster_gone(directory: Path) -> bool:
    try:
        doc = json.loads((directory / "cluster.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return not isinstance(doc, dict) or doc.get("state") in ("down", "removed", "failed")


def serve(directory: Path) -> int:
    """Hold the faults of the cluster in ``directory`` until told to stop; the exit code."""
    directory = Path(directory).resolve()
    lock = open(directory / LOCK, "w")  # noqa: SIM115 - held for the keeper's whole life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another keeper serves this cluster (two verbs started one at once)
    path = socket_path(directory)

    def log(message: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)

    try:
        cluster = ChaosCluster.attach(directory, log=log)
    except ChaosError as e:
        log(f"cannot attach: {e}")
        return EXIT_BAD_INPUT
    with cluster:
        unavailable = "; ".join(f"{k}: {v}" for k, v in cluster.unavailable.items())
        log(f"keeping the faults of {directory} (pid {os.getpid()}); not here: {unavailable or 'none'}")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(8)
        server.settimeout(IDLE_CHECK)
        try:
            while True:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    if _cluster_gone(directory):
                        log("the cluster is gone: healing and leaving")
                        return 0
                    continue
                with conn, conn.makefile("rwb") as stream:
                    conn.settimeout(REQUEST_TIMEOUT)
                    try:
                        request = json.loads(stream.readline() or b"{}")
                    except ValueError as e:
                        request = {"verb": None, "error": str(e)}
                    answer = _answer(cluster, request)
                    log(f"{request.get('verb')} {json.dumps(request.get('args') or {})} -> {json.dumps(answer)[:300]}")
                    with contextlib.suppress(OSError):
                        stream.write(json.dumps(answer).encode() + b"\n")
                        stream.flush()
                if request.get("verb") == "stop":
                    log("stopped: every fault healed")
                    return 0
        finally:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.chaos.keeper DIR", file=sys.stderr)
        return EXIT_BAD_INPUT
    return serve(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
