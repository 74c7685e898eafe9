"""`LiveLine` (the progress of real runs, explore and shrink): redrawn in place on a terminal, a plain line at
most every few seconds in a log, nothing with -q; messages always stay."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from harness.core.live import LiveLine


def test_in_a_log_the_status_is_a_plain_line_at_most_every_few_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    with LiveLine(every=60.0) as live:
        assert not live.animated  # pytest's captured stderr is no terminal
        live.status("attempt 1")
        live.status("attempt 2")  # within 60 s of the last line: not printed
        live.say("found one")
        live.status("attempt 3", force=True)
    err = capsys.readouterr().err.splitlines()
    assert err == ["attempt 1", "found one", "attempt 3"]


def test_quiet_shows_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with LiveLine(quiet=True) as live:
        live.status("attempt 1", force=True)
        live.say("found one")
    assert capsys.readouterr().err == ""


def test_on_a_terminal_the_status_is_redrawn_and_gone_at_the_end() -> None:
    out = io.StringIO()
    live = LiveLine(every=0.0)
    live._console = Console(file=out, force_terminal=True, width=80)
    with live:
        assert live.animated
        for i in range(3):
            live.status(f"attempt {i}")
        live.say("found one")
    text = out.getvalue()
    assert "found one" in text and "attempt 2" in text
    assert "\x1b[" in text  # cursor movements: the line was redrawn, not appended
    assert text.count("found one") == 1
