"""Rebalance time after a consumer crash, with librdkafka (confluent-kafka) consumers.

Starts `kraftwerk cluster up --backend local --nodes 3`, a topic of 3 partitions, and two consumers
of one group (session.timeout.ms as given, everything else default): one in a child process, one
here. Once they split the partitions, the child is SIGKILLed (no LeaveGroup: a crash) and the
survivor polls until it owns every partition. Prints one JSON line per run: seconds from the kill
to the survivor's full assignment.

    python benchmarks/rebalance_after_crash.py [--runs 3] [--session-ms 6000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys, confluent_kafka
c = confluent_kafka.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                              "session.timeout.ms": int(sys.argv[3]), "log_level": 0})
c.subscribe(["rb"])
while True:
    c.poll(0.2)
"""


def kraftwerk(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=180
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--session-ms", type=int, default=6000)
    args = ap.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="group-bench-")) / "cluster"
    up = kraftwerk("cluster", "up", "--backend", "local", "--nodes", "3", "--dir", str(directory))
    if up.returncode != 0:
        raise SystemExit(up.stderr)
    bootstrap = json.loads(up.stdout)["bootstrap"]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("rb", 3, 3)]).values():
            f.result(30)
        for run in range(args.runs):
            group = f"rb-{run}"
            child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, group, str(args.session_ms)])
            me = confluent_kafka.Consumer(
                {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": args.session_ms}
            )
            me.subscribe(["rb"])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not 0 < len(me.assignment()) < 3:
                me.poll(0.1)
            time.sleep(2)  # settled
            child.send_signal(signal.SIGKILL)
            child.wait()
            killed = time.monotonic()
            while len(me.assignment()) < 3 and time.monotonic() < killed + 120:
                me.poll(0.05)
            took = time.monotonic() - killed
            me.close()
            print(json.dumps({"run": run, "session_ms": args.session_ms, "rebalance_s": round(took, 2)}), flush=True)
    finally:
        kraftwerk("cluster", "down", "--dir", str(directory))


if __name__ == "__main__":
    main()
