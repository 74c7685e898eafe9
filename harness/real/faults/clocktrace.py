"""Clock faults for programs libfaketime cannot reach (Go: etcd): build and install `clocktrace`.

Go reads the wall clock through the vDSO from its own assembly, never through libc, so the
LD_PRELOAD of libfaketime (`real_clock.ClockNemesis.env`) leaves a Go program's clock alone.
`clocktrace` (clocktrace.c, next to this file) runs such a program as its traced child: it hides
the vDSO so the program asks the kernel, and answers its CLOCK_REALTIME reads itself (seccomp
stops) from the very faketime file the clock nemesis writes for our nodes — so bump, strobe,
drift and reset reach the program with no branch in the Faults port.

The program is static (gcc -O2 -static), built here on the control machine from the C source
the first time it is needed (cached under build/ by the source's hash), and copied to each host
at setup, so the node image and the hosts need no compiler. x86_64 Linux only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness import ROOT
from harness.real.backends.base import Host
from harness.real.faults.common import NemesisError, on_hosts

SOURCE = Path(__file__).with_name("clocktrace.c")
NAME = "clocktrace"


class ClocktraceError(NemesisError):
    """clocktrace could not be built or installed."""


def _cache_dir() -> Path:
    for d in (ROOT / "build", Path(tempfile.gettempdir()) / "kraftwerk-build"):
        with contextlib.suppress(OSError):
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
    raise ClocktraceError(f"no writable directory to build {NAME} in (tried {ROOT / 'build'})")


def binary() -> Path:
    """The static clocktrace binary of the current source, built with gcc on first use."""
    source = SOURCE.read_bytes()
    out = _cache_dir() / f"{NAME}-{hashlib.sha256(source).hexdigest()[:16]}"
    if out.exists():
        return out
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ClocktraceError(f"gcc is needed to build {NAME} for clock faults on Go programs (apt-get install gcc)")
    with (out.parent / f".{NAME}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        r = subprocess.run(
            [gcc, "-O2", "-static", "-Wall", "-o", str(tmp), str(SOURCE), "-lm"], capture_output=True, text=True
        )
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise ClocktraceError(f"building {NAME} failed (gcc -static needs libc6-dev): {r.stderr.strip()[-2000:]}")
        os.replace(tmp, out)
        for old in out.parent.glob(f"{NAME}-*"):  # builds of earlier sources
            if old != out:
                old.unlink(missing_ok=True)
    return out


def path(host: Host) -> str:
    """Where clocktrace lives on a host (its working directory)."""
    return f"{host.workdir}/{NAME}"


def install(hosts: Sequence[Host]) -> dict[str, str]:
    """Build clocktrace if needed and copy it to every host; {host: its path there}."""
    data = binary().read_bytes()

    def put(h: Host) -> str:
        h.control.makedirs(h.workdir)
        h.control.put_file(path(h), data, mode=0o755)
        return path(h)

    return on_hosts(hosts, put)


def wrap(host: Host, argv: Sequence[str], control_file: str | None = None) -> list[str]:
    """`argv` run under clocktrace on `host`, its wall clock read from `control_file` (default: the
    FAKETIME_TIMESTAMP_FILE of the program's environment, which clocktrace also removes libfaketime from)."""
    return [path(host), *(["--file", control_file] if control_file else []), "--", *argv]
