"""A stand-in node process for backend and nemesis tests (standard library only, copied onto hosts).

    python3 probe_daemon.py HOST PORT CLOCKFILE

Serves a line echo on HOST:PORT and, every 50 ms, writes "<time.time()> <time.monotonic()>"
to CLOCKFILE — so a test can see partitions, pauses, kills and the process's own (faked) clock.
"""

import os
import socket
import sys
import threading
import time


def clock(path):
    while True:
        with open(path + ".tmp", "w") as f:
            f.write(f"{time.time()!r} {time.monotonic()!r}\n")
        os.replace(path + ".tmp", path)
        time.sleep(0.05)


def echo(conn):
    with conn:
        while True:
            data = conn.recv(4096)
            if not data:
                return
            conn.sendall(data)


def main():
    host, port, clock_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    threading.Thread(target=clock, args=(clock_path,), daemon=True).start()
    server = socket.create_server((host, port), reuse_port=False)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
