"""Undo actions run on every way out: in order, once, despite errors, and on SIGTERM/SIGINT of the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.real.control import cleanup

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Isolate from undo actions other tests' live clusters registered in this process."""
    monkeypatch.setattr(cleanup, "_actions", {})


def test_run_all_is_lifo_once_and_survives_errors() -> None:
    done: list[str] = []
    cleanup.register("a", lambda: done.append("a"))
    cleanup.register("boom", lambda: 1 / 0)
    token = cleanup.register("b", lambda: done.append("b"))
    cleanup.register("c", lambda: done.append("c"))
    cleanup.unregister(token)
    assert cleanup.pending()[-3:] == ["a", "boom", "c"]
    ran = cleanup.run_all()
    assert done == ["c", "a"] and ran[-2:] == ["c", "a"]
    assert cleanup.run_all() == []


def test_undo_block_runs_on_exception() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), cleanup.undo("x", lambda: done.append("x")):
        raise KeyboardInterrupt
    assert done == ["x"] and "x" not in cleanup.pending()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_signals_unwind_and_undo(tmp_path: Path, sig: signal.Signals) -> None:
    marker = tmp_path / "undone"
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from harness.real.control import cleanup
        cleanup.register("atexit-only", lambda: Path({str(marker)!r} + ".atexit").write_text("1"))
        with cleanup.undo("block", lambda: Path({str(marker)!r}).write_text("1")):
            print("ready", flush=True)
            time.sleep(60)
        """
    )
    # as from a terminal: under nohup the parent ignores SIGHUP, and cleanup leaves an ignored signal alone
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),  # noqa: PLW1509 - no threads started here
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, sig)
    assert proc.wait(timeout=20) != 0
    assert marker.exists() and Path(f"{marker}.atexit").exists()
