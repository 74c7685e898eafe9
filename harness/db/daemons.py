"""What every DB whose members are one daemon per host does alike: start, kill, pause and resume a member by
its pidfile through the host's control interface (`harness.real.control`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.real.backends.base import Host
from harness.real.control.base import DaemonSpec
from harness.real.faults.common import on_hosts


class PidfileDaemons:
    """Member process control for a DB that sets `hosts`, `by_name` and defines `spec(h)` and `pidfile(h)`."""

    hosts: Sequence[Host]
    by_name: Mapping[str, Host]

    def spec(self, h: Host) -> DaemonSpec:
        raise NotImplementedError

    def pidfile(self, h: Host) -> str:
        raise NotImplementedError

    def start(self, name: str) -> int | None:
        """Start one member again (same configuration and data); its pid."""
        h = self.by_name[name]
        return h.control.start_daemon(self.spec(h))

    def kill(self, name: str) -> int | None:
        """SIGKILL one member (and wait until it is gone); the pid it had, None if it was not running."""
        h = self.by_name[name]
        return h.control.kill_daemon(self.pidfile(h))

    def pause(self, name: str) -> int | None:
        h = self.by_name[name]
        return h.control.pause_daemon(self.pidfile(h))

    def resume(self, name: str) -> int | None:
        h = self.by_name[name]
        return h.control.resume_daemon(self.pidfile(h))

    def running(self) -> dict[str, bool]:
        return on_hosts(self.hosts, lambda h: h.control.daemon_status(self.pidfile(h)).running)
