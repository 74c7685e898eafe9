"""PID 1 of a kraftwerk node container.

Reaps orphans (daemons the harness starts detached end up here, and a killed
one must not linger as a zombie), optionally starts sshd, optionally starts the
node process from environment variables (for docker/compose.yaml), and on
SIGTERM stops everything and exits.

Environment:
  KRAFTWERK_SSHD=1                 make host keys, start sshd
  KRAFTWERK_AUTHORIZED_KEYS=...    root's authorized_keys (with KRAFTWERK_SSHD)
  KRAFTWERK_AUTOSTART=1            write node.properties and start `python3 -m nodes` under libfaketime:
  KRAFTWERK_NODE_ID, KRAFTWERK_VOTERS (1@n1:9093,…), KRAFTWERK_BUGS (optional)
"""

import glob
import os
import signal
import subprocess
import sys
import time

WORKDIR = "/var/lib/kraftwerk"


def reap(*_):
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def terminate(*_):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.kill(-1, signal.SIGTERM)
        os.kill(-1, signal.SIGCONT)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    sys.exit(0)


def start_sshd():
    keys = os.environ.get("KRAFTWERK_AUTHORIZED_KEYS")
    if keys:
        os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
        with open("/root/.ssh/authorized_keys", "w") as f:
            f.write(keys.strip() + "\n")
        os.chmod("/root/.ssh/authorized_keys", 0o600)
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run(["ssh-keygen", "-A"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["/usr/sbin/sshd"], check=True)


def start_node():
    node_id = os.environ["KRAFTWERK_NODE_ID"]
    data = f"{WORKDIR}/data"
    os.makedirs(data, exist_ok=True)
    props = [
        f"node.id={node_id}",
        "process.roles=controller,broker",
        f"controller.quorum.voters={os.environ['KRAFTWERK_VOTERS']}",
        "listeners=CONTROLLER://0.0.0.0:9093,CLIENT://0.0.0.0:9092",
        f"log.dirs={data}",
    ]
    if os.environ.get("KRAFTWERK_BUGS"):
        props.append(f"kraftwerk.bugs={os.environ['KRAFTWERK_BUGS']}")
    with open(f"{WORKDIR}/node.properties", "w") as f:
        f.write("\n".join(props) + "\n")
    with open(f"{WORKDIR}/faketime", "w") as f:
        f.write("+0\n")
    env = dict(os.environ)
    libs = glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
    if libs:
        env.update(
            LD_PRELOAD=libs[0],
            FAKETIME_TIMESTAMP_FILE=f"{WORKDIR}/faketime",
            FAKETIME_NO_CACHE="1",
            FAKETIME_DONT_FAKE_MONOTONIC="1",
            FAKETIME_FORCE_MONOTONIC_FIX="0",
            FAKETIME_DISABLE_SHM="1",
            NO_FAKE_STAT="1",
            PYTHONPATH="/opt/kraftwerk/faketime:" + env.get("PYTHONPATH", "/opt/kraftwerk"),
        )
    log = open(f"{WORKDIR}/node.log", "ab")  # noqa: SIM115 - handed to the child
    subprocess.Popen(
        ["python3", "-m", "nodes", "--config", f"{WORKDIR}/node.properties"],
        cwd=WORKDIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def main():
    os.makedirs(WORKDIR, exist_ok=True)
    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    if os.environ.get("KRAFTWERK_SSHD") == "1":
        start_sshd()
    if os.environ.get("KRAFTWERK_AUTOSTART") == "1":
        start_node()
    print("kraftwerk node ready", flush=True)
    while True:
        signal.pause()
        reap()


if __name__ == "__main__":
    main()
