"""One control interface over three transports: docker exec, SSH (paramiko) and `ip netns exec`.

    t.run(["iptables", "-w", "-S"], timeout=10)     -> Result(exit_status, stdout, stderr)
    t.put_file(path, data) / t.get_file(path)
    t.start_daemon(DaemonSpec(argv, pidfile, logfile, env=…)) / kill_daemon / pause_daemon /
    resume_daemon / stop_daemon / daemon_status

Transports import their libraries lazily: `from harness.real.control.docker import DockerTransport`,
`harness.real.control.ssh.SSHTransport`, `harness.real.control.netns.NetnsTransport`.
"""

from harness.real.control.base import (
    CommandError,
    CommandTimeout,
    ControlError,
    DaemonSpec,
    DaemonStatus,
    Result,
    Transport,
)

__all__ = [
    "CommandError",
    "CommandTimeout",
    "ControlError",
    "DaemonSpec",
    "DaemonStatus",
    "Result",
    "Transport",
]
