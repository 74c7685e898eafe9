"""Work around libfaketime 0.9.10 (Debian bookworm) breaking `time.sleep` when monotonic time is not faked.

With FAKETIME_DONT_FAKE_MONOTONIC=1, its clock_nanosleep wrapper shifts an absolute
CLOCK_MONOTONIC deadline by the faked wall clock, so CPython's `time.sleep`
(clock_nanosleep with TIMER_ABSTIME) fails with EINVAL. This directory is put on
PYTHONPATH only for processes started under libfaketime; the replacement sleeps
with select(), which libfaketime leaves alone when no rate is set.
"""

import os

if os.environ.get("LD_PRELOAD", "").find("faketime") >= 0 and os.environ.get("FAKETIME_DONT_FAKE_MONOTONIC") == "1":
    import select
    import time

    _monotonic = time.monotonic

    def _sleep(secs: float) -> None:
        if secs < 0:
            raise ValueError("sleep length must be non-negative")
        deadline = _monotonic() + secs
        while True:
            left = deadline - _monotonic()
            if left <= 0:
                return
            select.select([], [], [], left)

    _sleep.__doc__ = time.sleep.__doc__
    time.sleep = _sleep
