"""ZooKeeper as a DB (harness.db.protocol): a static ensemble, a register client on its wire protocol, its probe.

Each host runs one ZooKeeper server (Debian's `zookeeper` package, 3.8) as Debian's init script runs it:
`java -cp $CLASSPATH … org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg`, with `JAVA` and
`CLASSPATH` read from the package's `/etc/zookeeper/conf/environment`, plus the slf4j→log4j binding jars
(Debian's classpath has none, so the server would log nothing) and `zookeeper.root.logger=INFO,CONSOLE`
(the package's log4j.properties), so its log is its output, `<workdir>/zookeeper.log`. Each host gets
`<workdir>/zoo.cfg` (every member's `server.N=address:peer:election`, N = the host's position, 1-based) and
`<workdir>/zookeeper.data/myid`; the AdminServer is off (Debian's classpath lacks the servlet API it needs),
the four-letter words srvr, mntr and stat are on. Restarts after a kill reuse the data directory. On netns
each member listens on 2181 (clients), 2888 (peers) and 3888 (election); on the local backend on the three
free ports the backend chose for the host. With clock faults in the test the JVM runs under the clock
nemesis's libfaketime like our nodes (the environment the runner gives every daemon): it moves
`System.currentTimeMillis` and the log's timestamps; ZooKeeper times sessions and elections on the
monotonic clock, which that leaves alone. Not on docker: the node image (158 MB) would need the package
and a JRE (it depends on default-jre; openjdk-17-jre-headless alone is 188 MB installed), built offline
into the one image every `./run demo` builds, and the probe reads a file on the host every 100 ms, which
on docker is an API call per read.

Clients (`ZooKeeperTransport`) speak ZooKeeper's own protocol (jute over TCP, `ZkSession`: one session
per member and client process, asyncio, pinging every third of the session timeout). A register read is
`getData` (after a `sync` with `--zk-sync-reads`: a plain read is answered from the member's own state,
sequentially consistent and possibly stale; sync first makes it see every write committed before the
read began, unless the member's leader was deposed without knowing it yet: sync is no quorum operation,
ZOOKEEPER-1675); a write is `setData` (`create` if the node is absent); a cas is `getData`, a comparison,
and `setData` with the version read (`BADVERSION`: someone wrote in between, a definite `fail`). Why not
kazoo: it runs each session on threads of its own (three per client) where the runner is asyncio, its
`stop()` blocks for up to ten seconds, and it fails a request queued while disconnected with the same
`ConnectionLoss` as one already sent, so every such failure would be `info`; here a request that never
left is a definite `fail`, one lost after it left `info`.

Leader safety (ProbedDB's probe): `srvr` on the client port says the member's mode (leader, follower,
or "not currently serving" while it elects or syncs) and its last zxid; the epoch is the Zab epoch in
`zookeeper.data/version-2/currentEpoch`, which a server writes when it accepts a new leader's epoch
(before it serves in it), read before and after `srvr` (a change in between: no answer this time). Not the
zxid's high 32 bits: a follower's last zxid stays in the previous epoch until the first transaction
of the new one commits, so it would name the new leader in the old epoch. A leader's zxid is in its
own epoch from the moment it serves (ZooKeeper sets it to (epoch, 0) then); the probe checks the
two agree. Neither srvr nor mntr names a follower's leader, so the probe names the member it last saw
leading that epoch (None until it has seen it): a follower's `leader` is inferred, and the epochs
checker's evidence of two leaders in one epoch comes from the leaders' own `srvr` answers. A server
not serving is `unattached` (no leader, no vote recorded): ZooKeeper's election votes are not counted
in Zab epochs, so none is recorded.

`collect` notes a member whose process ended on an error under "fatal" (the run is then invalid, as for
our nodes and etcd) and one whose critical thread died ("Severe unrecoverable error": ZooKeeper stops
that server instance and the process elects again) under "critical-errors", which is reported but does
not decide the verdict.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import socket
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.db.base import POLL_INTERVAL, Collected, ProbedDB, Status
from harness.db.protocol import EnvSource
from harness.db.registry import DBContext, DBKind
from harness.real.backends.base import Host
from harness.real.control.base import ControlError, DaemonSpec
from harness.real.faults.common import on_hosts
from workloads.options import option
from workloads.protocol import Answer, Failure, Reply, Request
from workloads.register import KvReply, KvRequest

__all__ = ["KIND", "ZkSession", "ZooKeeperDB", "ZooKeeperOptions", "ZooKeeperTransport", "status_of", "why_not"]

CLIENT_PORT, PEER_PORT, ELECTION_PORT = 2181, 2888, 3888
ENVIRONMENT = "/etc/zookeeper/conf/environment"  # Debian's: JAVA, CLASSPATH (its conf dir and zookeeper.jar)
LOG_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")  # dependencies of the package
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
TICK_MS = 1000  # a follower that hears nothing from its leader for SYNC_LIMIT ticks looks for another
SYNC_LIMIT, INIT_LIMIT = 5, 10
SESSION_MS = 4000  # the clients' session timeout (ZooKeeper allows 2 to 20 ticks)
FATAL = ("exiting abnormally", "OutOfMemoryError")  # the server process ends
CRITICAL = "Severe unrecoverable error"  # a critical thread died: that server instance stops, the process elects again


def why_not(backend: str, nemeses: Sequence[str] = ()) -> str | None:
    """Why `--db zookeeper` cannot run on `backend` here (a message naming the option), or None."""
    if backend in ("netns", "local"):
        if not Path(ENVIRONMENT).is_file():
            return f"--db zookeeper --backend {backend}: no ZooKeeper here (apt-get install zookeeper, or ./run setup)"
        if shutil.which("java") is None:
            return f"--db zookeeper --backend {backend}: no java here (apt-get install default-jre-headless)"
    if backend == "local" and "partition" in nemeses:
        return (
            "--db zookeeper --backend local --nemesis partition: ZooKeeper's peer connections leave from 127.0.0.1, "
            "not from each member's own address, so loopback partitions cannot cut them; use --backend netns"
        )
    return None


@dataclass(frozen=True)
class ZooKeeperOptions:
    """ZooKeeper's own options (`{"zookeeper": {...}}` in test.json)."""

    sync_reads: bool = option(
        False,
        "--zk-sync-reads",
        "a sync() before each register read, so it sees every write committed before it began (unless the "
        "member's leader was deposed and does not know it yet: sync is no quorum operation); without it ZooKeeper "
        "answers a read from the member's own state (sequentially consistent, possibly stale)",
    )

    def problem(self) -> str | None:
        return None


def build(ctx: DBContext) -> ZooKeeperDB:
    return ZooKeeperDB(ctx.hosts, ports=ctx.ports, listen_any=ctx.listen_any, sync_reads=ctx.options.sync_reads)


KIND = DBKind(
    name="zookeeper",
    summary="ZooKeeper (Debian's zookeeper 3.8): register workload, on netns or local",
    options=ZooKeeperOptions,
    backends=("netns", "local"),
    apis=("kv",),
    nemeses=("partition", "kill", "pause", "clock", "packet"),  # disk faults damage our nodes' log format only
    ports=3,  # (client, peer, election)
    why_not=why_not,
    factory=build,
)


class ZooKeeperDB(ProbedDB):
    """A ZooKeeper ensemble on a set of hosts (named n<id>), as a harness.db.protocol.DB."""

    label = "zookeeper"

    def __init__(
        self,
        hosts: Sequence[Host],
        *,
        ports: Mapping[str, tuple[int, ...]] | None = None,
        listen_any: bool = True,
        env: EnvSource | None = None,
        sync_reads: bool = False,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        super().__init__(hosts, env=env, poll_interval=poll_interval)
        self.ports = dict(ports or {})  # {host: (client, peer, election)} (the local backend's free ports)
        self.listen_any = listen_any
        self.sync_reads = sync_reads
        self.java: dict[str, tuple[str, str]] = {}  # {host: (java, classpath)}, found by setup
        self.led: dict[int, str] = {}  # {epoch: the member seen leading it}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ layout
    def port(self, h: Host, which: int) -> int:
        return self.ports.get(h.name, (CLIENT_PORT, PEER_PORT, ELECTION_PORT))[which]

    @staticmethod
    def data_dir(h: Host) -> str:
        return f"{h.workdir}/zookeeper.data"

    @staticmethod
    def pidfile(h: Host) -> str:
        return f"{h.workdir}/zookeeper.pid"

    @staticmethod
    def logfile(h: Host) -> str:
        return f"{h.workdir}/zookeeper.log"

    def endpoints(self) -> dict[str, tuple[str, int]]:
        return {h.name: (h.address, self.port(h, 0)) for h in self.hosts}

    def config(self, h: Host) -> str:
        """The zoo.cfg of one member."""
        lines = [
            f"tickTime={TICK_MS}",
            f"initLimit={INIT_LIMIT}",
            f"syncLimit={SYNC_LIMIT}",
            f"dataDir={self.data_dir(h)}",
            f"clientPort={self.port(h, 0)}",
            f"clientPortAddress={'0.0.0.0' if self.listen_any else h.address}",
            f"quorumListenOnAllIPs={'true' if self.listen_any else 'false'}",
            "maxClientCnxns=0",  # every client comes from one address
            "standaloneEnabled=false",  # one member is an ensemble of one, with a leader, too
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,mntr,stat",
        ]
        lines += [f"server.{i}={m.address}:{self.port(m, 1)}:{self.port(m, 2)}" for i, m in enumerate(self.hosts, 1)]
        return "\n".join(lines) + "\n"

    def spec(self, h: Host) -> DaemonSpec:
        env = dict(self.env(h)) if self.env is not None else {}
        env.pop("KRAFTWERK_BIND_ADDRESS", None)  # the local backend's hint for Python nodes
        java, classpath = self.java.get(h.name, ("java", ":".join(("/usr/share/java/zookeeper.jar", *LOG_JARS))))
        argv = [
            java, "-cp", classpath,
            f"-Dzookeeper.log.dir={h.workdir}", "-Dzookeeper.root.logger=INFO,CONSOLE",
            "-XX:+HeapDumpOnOutOfMemoryError", "-XX:OnOutOfMemoryError=kill -9 %p",
            MAIN, f"{h.workdir}/zoo.cfg",
        ]  # fmt: skip
        return DaemonSpec(argv, pidfile=self.pidfile(h), logfile=self.logfile(h), cwd=h.workdir, env=env)

    def log_files(self, h: Host) -> dict[str, str]:
        return {self.logfile(h): "zookeeper.log", f"{h.workdir}/zoo.cfg": "zoo.cfg"}

    def setup(self) -> None:
        """Every host's zoo.cfg and myid; java and the classpath from the package's environment file."""

        def prepare(h: Host) -> tuple[str, str]:
            i = self.hosts.index(h) + 1
            jars = " ".join(LOG_JARS)
            r = h.control.run(
                f"mkdir -p {shlex.quote(self.data_dir(h))} && echo {i} > {shlex.quote(self.data_dir(h))}/myid && "
                f'. {ENVIRONMENT} && echo "$JAVA" && echo "$CLASSPATH" && '
                f'for j in {jars}; do if [ -r "$j" ]; then echo "$j"; fi; done',
                timeout=30,
            )
            lines = r.stdout.strip().splitlines() if r.ok else []
            if len(lines) < 2:
                raise ControlError(f"{h.name}: no ZooKeeper ({ENVIRONMENT}: apt-get install zookeeper): {r.stderr}")
            h.control.put_file(f"{h.workdir}/zoo.cfg", self.config(h))
            return lines[0], ":".join(lines[1:])

        self.java = on_hosts(self.hosts, prepare)

    def transport(self, seed: int) -> ZooKeeperTransport:
        return ZooKeeperTransport(self.endpoints(), self.sync_reads)

    # ------------------------------------------------------------------ the probe (ProbedDB)
    def current_epoch(self, h: Host) -> int | None:
        """The Zab epoch this member last accepted (0 before its first; None if unreadable)."""
        try:
            return int(h.control.get_file(f"{self.data_dir(h)}/version-2/currentEpoch").strip() or 0)
        except ControlError:
            return 0  # not written yet
        except ValueError:
            return None

    def probe(self, name: str, timeout: float = 0.5) -> Status | None:
        h = self.by_name[name]
        before = self.current_epoch(h)
        text = four_letter_word(h.address, self.port(h, 0), b"srvr", timeout)
        after = self.current_epoch(h)
        if text is None or before is None or before != after:
            return None
        with self._lock:
            status = status_of(text, after, self.led)
            if status is not None and status.role == "leader":
                self.led[status.epoch] = name
                status = status._replace(leader=name)
        return status

    # ------------------------------------------------------------------ collection (ProbedDB.collect)
    # A member whose process ended on an error is noted under "fatal" (node-fatal: the run is invalid); one whose
    # critical thread died (ZooKeeper stops that server instance and its process elects again) under
    # "critical-errors", which does not decide the verdict.
    def fatal(self, h: Host, out: Path) -> list[str]:
        return _lines(out / "zookeeper.log", FATAL)

    def collect(self, run_dir: Path) -> Collected:
        events, logs, notes = super().collect(run_dir)
        found = {h.name: _lines(run_dir / "nodes" / h.name / "zookeeper.log", (CRITICAL,)) for h in self.hosts}
        if any(found.values()):
            notes["critical-errors"] = {name: lines for name, lines in found.items() if lines}
        return events, logs, notes


def _lines(log: Path, words: Sequence[str]) -> list[str]:
    """The first three lines of `log` holding one of `words` (cut to 300 characters)."""
    if not log.exists():
        return []
    return [ln[:300] for ln in log.read_text(errors="replace").splitlines() if any(w in ln for w in words)][:3]


def four_letter_word(address: str, port: int, word: bytes, timeout: float) -> str | None:
    """A four-letter word's answer (the server closes the connection after it), None without one."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(word)
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode(errors="replace") or None


def status_of(srvr: str, epoch: int, led: Mapping[int, str]) -> Status | None:
    """A `srvr` answer as a Status in `epoch` (the member's currentEpoch); a leader's zxid must be in it.
    `led`: {epoch: the member seen leading it}, a follower's leader. None: an answer it cannot read."""
    if "not currently serving" in srvr:
        return Status(epoch, "unattached", None)
    fields = dict(line.split(": ", 1) for line in srvr.splitlines() if ": " in line)
    mode = fields.get("Mode", "").strip()
    if mode in ("leader", "standalone"):
        try:
            zxid = int(fields.get("Zxid", "").strip(), 16)
        except ValueError:
            return None
        return Status(epoch, "leader", None) if zxid >> 32 == epoch else None
    if mode in ("follower", "observer"):
        return Status(epoch, "follower", led.get(epoch))
    return None


# ---------------------------------------------------------------------- the client: ZooKeeper's wire protocol
# Jute over TCP: every frame is a big-endian int32 length and its bytes; a request is (xid, op) and its body, an
# answer (xid, zxid, err) and its body. Answers of one session come in request order; xid -2 is a ping.
CREATE, GET_DATA, SET_DATA, SYNC, PING = 1, 4, 5, 9, 11
ERRORS = {-101: "no-node", -103: "bad-version", -110: "node-exists", -112: "session-expired", -127: "throttled"}
OPEN_ACL = struct.pack(">ii", 1, 31) + b"".join(struct.pack(">i", len(s)) + s for s in (b"world", b"anyone"))


class NotSent(ConnectionError):
    """The request never left: no session to the member could be made, or it had already ended."""


def _buffer(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _path(key: str) -> bytes:
    return _buffer(f"/{key}".encode())


def _data(payload: bytes) -> tuple[bytes, int]:
    """The data and the Stat's version of a getData answer."""
    (n,) = struct.unpack_from(">i", payload)
    data = payload[4 : 4 + max(n, 0)]
    (version,) = struct.unpack_from(">i", payload, 4 + max(n, 0) + 32)  # czxid mzxid ctime mtime, then version
    return data, version


class ZkSession:
    """One ZooKeeper session over one TCP connection to one member (asyncio)."""

    def __init__(self, address: str, port: int) -> None:
        self.address, self.port = address, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[tuple[int, bytes]]] = {}
        self._xid = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = False
        self.written = 0  # requests written so far

    async def open(self, timeout: float) -> None:
        """Connect and start a session within `timeout` seconds; NotSent if there is none (a member that is not
        serving closes the connection at once)."""
        connect = struct.pack(">iqiq", 0, 0, SESSION_MS, 0) + _buffer(b"\0" * 16) + b"\0"
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(self.address, self.port)
                self._writer.write(_buffer(connect))
                answer = await self._frame()
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            await self.close()
            raise NotSent(f"no session: {type(e).__name__}: {e}") from None
        _, negotiated = struct.unpack_from(">ii", answer)
        if negotiated <= 0:
            await self.close()
            raise NotSent("no session: refused")
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._ping(negotiated / 3000))]

    async def _frame(self) -> bytes:
        assert self._reader is not None
        (n,) = struct.unpack(">i", await self._reader.readexactly(4))
        return await self._reader.readexactly(n)

    async def _read(self) -> None:
        try:
            while True:
                frame = await self._frame()
                xid, _zxid, err = struct.unpack_from(">iqi", frame)
                future = self._pending.pop(xid, None)
                if future is not None and not future.done():
                    future.set_result((err, frame[16:]))
        except (OSError, asyncio.IncompleteReadError, struct.error) as e:
            self._end(ConnectionError(f"connection lost: {type(e).__name__}"))
            if self._writer is not None:
                self._writer.close()

    async def _ping(self, every: float) -> None:
        while not self.closed and self._writer is not None and not self._writer.is_closing():
            self._writer.write(_buffer(struct.pack(">ii", -2, PING)))
            await asyncio.sleep(every)

    def _end(self, error: Exception) -> None:
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def call(self, op: int, body: bytes) -> tuple[int, bytes]:
        """(err, answer body) of one request; NotSent if the session had ended, ConnectionError if it ends
        before the answer."""
        if self.closed or self._writer is None or self._writer.is_closing():
            raise NotSent("session ended")
        self._xid += 1
        xid = self._xid
        future = self._pending[xid] = asyncio.get_running_loop().create_future()
        try:
            self._writer.write(_buffer(struct.pack(">ii", xid, op) + body))
            self.written += 1
            return await future
        finally:
            self._pending.pop(xid, None)

    async def close(self) -> None:
        """Drop the connection at once (no closeSession: the session expires on its own), even one cut off."""
        self._end(ConnectionError("closed"))
        for task in self._tasks:
            task.cancel()
        if self._writer is not None:
            self._writer.transport.abort()


class ZooKeeperConnection:
    """One client process's sessions to the members (one per member, opened on first use and after one ends)."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], sync_reads: bool) -> None:
        self.endpoints = endpoints
        self.sync_reads = sync_reads
        self._sessions: dict[str, ZkSession] = {}

    async def apply(self, session: ZkSession, req: KvRequest) -> KvReply:
        """One register operation on one session, in history terms (module docstring)."""
        path = _path(req.key)
        if req.f == "read":
            if self.sync_reads:
                err, _ = await session.call(SYNC, _buffer(b"/"))
                if err:
                    return KvReply("fail", None, ERRORS.get(err, f"error {err}"))
            err, body = await session.call(GET_DATA, path + b"\0")
            if err == -101:
                return KvReply("ok", None)
            return KvReply("fail", None, ERRORS.get(err, f"error {err}")) if err else KvReply("ok", _value(body))
        if req.f == "write":
            data = _buffer(json.dumps(req.value).encode())
            err, _ = await session.call(SET_DATA, path + data + struct.pack(">i", -1))
            if err == -101:  # absent: create it (or, if someone created it meanwhile, set it)
                err, _ = await session.call(CREATE, path + data + OPEN_ACL + struct.pack(">i", 0))
                if err == -110:
                    err, _ = await session.call(SET_DATA, path + data + struct.pack(">i", -1))
            return KvReply("ok", req.value) if not err else KvReply("info", req.value, ERRORS.get(err, f"error {err}"))
        if req.f == "cas":
            expected, new = req.value
            err, body = await session.call(GET_DATA, path + b"\0")
            if err == -101 or (not err and _value(body) != expected):
                return KvReply("fail", req.value, "cas-mismatch")
            if err:
                return KvReply("fail", req.value, ERRORS.get(err, f"error {err}"))
            _, version = _data(body)
            data = _buffer(json.dumps(new).encode())
            err, _ = await session.call(SET_DATA, path + data + struct.pack(">i", version))
            if err == -103:
                return KvReply("fail", req.value, "cas-mismatch")  # written since we read it: definitely not swapped
            return KvReply("ok", req.value) if not err else KvReply("info", req.value, ERRORS.get(err, f"error {err}"))
        raise ValueError(f"zookeeper cannot serve register operation {req.f!r}")

    async def call(self, request: Request) -> Answer:
        req = request.body
        if not isinstance(req, KvRequest):
            raise TypeError(f"zookeeper cannot serve a {type(req).__name__} (only the register workload)")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.timeout_s
        session = self._sessions.get(request.node)
        if session is None or session.closed:
            if session is not None:
                await session.close()
            session = self._sessions[request.node] = ZkSession(*self.endpoints[request.node])
            try:
                await session.open(request.timeout_s)
            except NotSent as e:
                return Failure(f"connect-failed: {e}", sent=False)
        written = session.written
        try:
            return Reply(await asyncio.wait_for(self.apply(session, req), max(0.0, deadline - loop.time())))
        except NotSent as e:  # before its one step that changes anything was written
            return Failure(f"not-sent: {e}", sent=False)
        except TimeoutError:
            return Failure("timeout", sent=session.written > written)
        except ConnectionError as e:
            return Failure(f"disconnected: {e}", sent=True)

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions = {}


def _value(body: bytes) -> Any:
    data, _ = _data(body)
    return json.loads(data) if data else None


class ZooKeeperTransport:
    """Opens a `ZooKeeperConnection` per client process (the runner's transport port)."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], sync_reads: bool = False) -> None:
        self.endpoints = dict(endpoints)
        self.sync_reads = sync_reads

    def __call__(self) -> ZooKeeperConnection:
        return ZooKeeperConnection(self.endpoints, self.sync_reads)
