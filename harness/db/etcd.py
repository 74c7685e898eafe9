"""etcd as a DB (harness.db.protocol): a static-peer etcd cluster, its v3 client, and its raft status.

A real system nobody here wrote, tested as Jepsen tests it. Each host runs one `etcd` (Debian's
etcd-server 3.4: in the node image on docker, from the host's PATH on netns and local) with its
own data directory (`<workdir>/etcd.data`) and its output in `<workdir>/etcd.log`; every member is
named after its host (n1, n2, …) and the cluster is bootstrapped from a static peer list
(`--initial-cluster`). Restarts after a kill reuse the data directory (etcd then ignores the
bootstrap flags). With clock faults in the test each member runs under `clocktrace`
(harness.real.faults.clocktrace), which moves the wall clock etcd (a Go program: libfaketime cannot
reach it) sees from the clock nemesis's faketime file. On docker and netns each member listens on
2380 (peers) and 2379 (clients); on the local backend on the two free ports the backend chose for
the host.

Clients (`EtcdTransport`) speak the v3 JSON gateway on the client port: a register read is a
range (`serializable` when `--etcd-read serializable`: answered from the member's local state,
which etcd documents may be stale), a write a put, a cas a txn comparing the key's value. No
gRPC stack is needed (see `harness.db.etcd_http`).

Leader safety: the probe of `harness.db.base.ProbedDB` is each member's raft status (`GET /debug/vars`,
the `raft.status` entry: id, term, vote, lead, raftState in one consistent snapshot taken by the raft
goroutine), read as (epoch = raft term, role, leader and voted_for as host names); its status poller
records each change as a `state` event (docs/formats.md "Node events"), so the epochs checker can
report two leaders in one term or two votes in one term, and leaders and readiness come from the same
probe. `/v3/maintenance/status` is not used for this: its `raftTerm` is the term of the last *applied*
entry and its `leader` is read separately, so a new leader reports itself in the previous term until
its first entry applies, which would look like two leaders in one term.
"""

from __future__ import annotations

import base64
import email.utils
import json
import shlex
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.db.base import POLL_INTERVAL, ProbedDB, Status
from harness.db.etcd_http import HttpConnection, NotSent, get_json
from harness.db.protocol import EnvSource
from harness.db.registry import DBContext, DBKind
from harness.real.backends.base import Host
from harness.real.control.base import ControlError, DaemonSpec
from harness.real.faults import clocktrace
from harness.real.faults.common import on_hosts
from workloads.options import option
from workloads.protocol import Answer, Failure, Reply, Request
from workloads.register import KvReply, KvRequest

__all__ = ["CLIENT_PORT", "KIND", "PEER_PORT", "READS", "EtcdDB", "EtcdOptions", "EtcdTransport", "role_of", "why_not"]

PEER_PORT = 2380
CLIENT_PORT = 2379
READS = ("linearizable", "serializable")
ROLES = {
    "StateLeader": "leader",
    "StateCandidate": "candidate",
    "StateFollower": "follower",
    # a pre-candidate neither raises its term nor votes: for the epochs checker it is a follower without a leader
    "StatePreCandidate": "follower",
}


def role_of(raft_state: str) -> str:
    """The docs/formats.md "Node events" role of an etcd raft state (StateLeader → leader, …)."""
    return ROLES.get(raft_state, "unattached")


def why_not(backend: str, nemeses: Sequence[str] = ()) -> str | None:
    """Why `--db etcd` cannot run on `backend` here (a message naming the option), or None."""
    if backend in ("netns", "local") and shutil.which("etcd") is None:
        return f"--db etcd --backend {backend}: no etcd on this machine (apt-get install etcd-server, or ./run setup)"
    if backend == "local" and "partition" in nemeses:
        return (
            "--db etcd --backend local --nemesis partition: etcd's peer connections leave from 127.0.0.1, not from "
            "each member's own address, so loopback partitions cannot cut them; use --backend docker or netns"
        )
    return None


@dataclass(frozen=True)
class EtcdOptions:
    """etcd's own options (`{"etcd": {...}}` in test.json)."""

    read: str = option(
        "linearizable",
        "--etcd-read",
        "register reads as linearizable ranges (read index) or serializable ones (any member's "
        "local state, which etcd documents may be stale)",
        choices=READS,
    )

    def problem(self) -> str | None:
        if self.read not in READS:
            return f"--etcd-read {self.read}: unknown (known: {', '.join(READS)})"
        return None


def build(ctx: DBContext) -> EtcdDB:
    """etcd on the run's hosts; members under clocktrace when the run has clock faults."""
    return EtcdDB(
        ctx.hosts,
        token=f"kraftwerk-{ctx.cluster_id}",
        ports=ctx.ports,
        listen_any=ctx.listen_any,
        read=ctx.options.read,
        clock="clock" in ctx.nemeses,
    )


KIND = DBKind(
    name="etcd",
    summary="etcd (Debian's etcd-server 3.4): register workload, on docker, netns or local",
    options=EtcdOptions,
    backends=("docker", "netns", "local"),
    apis=("kv",),
    nemeses=("partition", "kill", "pause", "clock", "packet"),  # disk faults damage our nodes' log format only
    ports=2,  # (peer, client)
    why_not=why_not,
    factory=build,
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _value(raw: str | None) -> Any:
    return None if raw is None else json.loads(base64.b64decode(raw))


class EtcdDB(ProbedDB):
    """An etcd cluster on a set of hosts (named n<id>), as a harness.db.protocol.DB."""

    label = "etcd"

    def __init__(
        self,
        hosts: Sequence[Host],
        *,
        token: str = "kraftwerk",
        ports: Mapping[str, tuple[int, ...]] | None = None,
        listen_any: bool = True,
        env: EnvSource | None = None,
        read: str = "linearizable",
        poll_interval: float = POLL_INTERVAL,
        clock: bool = False,
    ) -> None:
        if read not in READS:
            raise ValueError(f"--etcd-read must be one of {', '.join(READS)}, got {read!r}")
        super().__init__(hosts, env=env, poll_interval=poll_interval)
        self.token = token
        self.ports = dict(ports or {})  # {host: (peer port, client port)} (the local backend's free ports)
        self.listen_any = listen_any
        self.read = read
        self.clock = clock  # clock faults in the test: members run under clocktrace
        self.binary: dict[str, str] = {}
        self.ids: dict[str, str] = {}  # raft member id (hex) → host name, learnt from each member's own status
        # (lowest, highest) wall-clock skew each member showed, from the Date header of its status answers
        self.skews: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ layout
    def peer_port(self, h: Host) -> int:
        return self.ports.get(h.name, (PEER_PORT, CLIENT_PORT))[0]

    def client_port(self, h: Host) -> int:
        return self.ports.get(h.name, (PEER_PORT, CLIENT_PORT))[1]

    @staticmethod
    def data_dir(h: Host) -> str:
        return f"{h.workdir}/etcd.data"

    @staticmethod
    def pidfile(h: Host) -> str:
        return f"{h.workdir}/etcd.pid"

    @staticmethod
    def logfile(h: Host) -> str:
        return f"{h.workdir}/etcd.log"

    def endpoints(self) -> dict[str, tuple[str, int]]:
        """Client port of every member: {name: (address, port)}."""
        return {h.name: (h.address, self.client_port(h)) for h in self.hosts}

    def initial_cluster(self) -> str:
        return ",".join(f"{h.name}=http://{h.address}:{self.peer_port(h)}" for h in self.hosts)

    def argv(self, h: Host) -> list[str]:
        """The etcd command line of one member."""
        bind = "0.0.0.0" if self.listen_any else h.address
        return [
            self.binary.get(h.name, "etcd"),
            "--name", h.name,
            "--data-dir", self.data_dir(h),
            "--listen-peer-urls", f"http://{bind}:{self.peer_port(h)}",
            "--initial-advertise-peer-urls", f"http://{h.address}:{self.peer_port(h)}",
            "--listen-client-urls", f"http://{bind}:{self.client_port(h)}",
            "--advertise-client-urls", f"http://{h.address}:{self.client_port(h)}",
            "--initial-cluster", self.initial_cluster(),
            "--initial-cluster-state", "new",
            "--initial-cluster-token", self.token,
            "--logger", "zap",
            "--log-outputs", "stderr",
        ]  # fmt: skip

    def spec(self, h: Host) -> DaemonSpec:
        """How to (re)start this host's member: under clocktrace when the test has clock faults (it reads the
        clock nemesis's faketime file, FAKETIME_TIMESTAMP_FILE of the nemesis's environment)."""
        env = dict(self.env(h)) if self.env is not None else {}
        env.pop("KRAFTWERK_BIND_ADDRESS", None)  # the local backend's hint for Python nodes
        argv = clocktrace.wrap(h, self.argv(h)) if self.clock else self.argv(h)
        return DaemonSpec(argv, pidfile=self.pidfile(h), logfile=self.logfile(h), cwd=h.workdir, env=env)

    def log_files(self, h: Host) -> dict[str, str]:
        """{path on the host: name under nodes/<node>/ in the run directory}."""
        return {self.logfile(h): "etcd.log"}

    def setup(self) -> None:
        """Find etcd on every host and make its working directory (etcd creates its data directory); with clock
        faults, copy clocktrace there too."""

        def prepare(h: Host) -> str:
            r = h.control.run(f"mkdir -p {shlex.quote(h.workdir)} && command -v etcd", timeout=30)
            path = r.stdout.strip().splitlines()[-1] if r.ok and r.stdout.strip() else ""
            if not path:
                raise ControlError(f"{h.name}: etcd not found (apt-get install etcd-server)")
            return path

        self.binary = on_hosts(self.hosts, prepare)
        if self.clock:
            clocktrace.install(self.hosts)

    def transport(self, seed: int) -> EtcdTransport:
        """The workloads' transport to this cluster (harness.real's Interpreter)."""
        return EtcdTransport(self.endpoints(), self.read)

    # ------------------------------------------------------------------ raft status (ProbedDB's probe)
    def raft_status(self, name: str, timeout: float = 0.5) -> dict[str, Any] | None:
        """One member's raft status (id, term, vote, lead, raftState) or None if it does not answer."""
        host, port = self.endpoints()[name]
        headers: dict[str, str] = {}
        try:
            sent = time.time()
            doc = get_json(host, port, "/debug/vars", timeout, headers)
            skew = _skew(headers.get("Date"), (sent + time.time()) / 2)
            status = doc["raft.status"]
            if not isinstance(status, dict) or "term" not in status:
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        with self._lock:
            self.ids[str(status.get("id"))] = name
            if skew is not None:
                low, high = self.skews.get(name, (skew, skew))
                self.skews[name] = (min(low, skew), max(high, skew))
        return status

    def name_of(self, member: Any) -> str | None:
        """The host name of a raft member id (hex), None for none (0) or one not seen yet."""
        return None if member in (None, "0", 0) else self.ids.get(str(member))

    def status_of(self, raft: Mapping[str, Any]) -> Status:
        """A raft status as the harness reads it (epoch = raft term; leader and vote as host names)."""
        return Status(
            int(raft["term"]),
            role_of(str(raft.get("raftState"))),
            self.name_of(raft.get("lead")),
            self.name_of(raft.get("vote")),
        )

    def probe(self, name: str, timeout: float = 0.5) -> Status | None:
        raft = self.raft_status(name, timeout)
        return None if raft is None else self.status_of(raft)

    # ------------------------------------------------------------------ collection (ProbedDB.collect)
    # collect stops the members, then writes nodes/<node>/{etcd.log,events.jsonl}: (polled state events, no
    # log dumps, notes). A member whose log shows a Go panic is noted under "fatal"; with clock faults, the
    # lowest and highest wall-clock skew each member's answers showed under "clock-skew-s" (etcd's clock
    # minus this machine's, from the HTTP Date header: whole seconds, so -1 to 0 for a true clock).
    def collect_notes(self) -> dict[str, Any]:
        notes = super().collect_notes()
        if self.clock:
            notes["clock-skew-s"] = {n: [round(lo, 1), round(hi, 1)] for n, (lo, hi) in sorted(self.skews.items())}
        return notes

    def fatal(self, h: Host, out: Path) -> list[str]:
        log = out / "etcd.log"
        if not log.exists():
            return []
        return [ln[:300] for ln in log.read_text(errors="replace").splitlines() if _panic(ln)][:3]


def _skew(date: str | None, now: float) -> float | None:
    """A Date header minus `now` in seconds (None without a parseable header)."""
    if not date:
        return None
    try:
        return email.utils.parsedate_to_datetime(date).timestamp() - now
    except (TypeError, ValueError):
        return None


def _panic(line: str) -> bool:
    return line.startswith("panic: ") or '"level":"panic"' in line


class EtcdConnection:
    """One client process's HTTP connections to the members (one per member, opened on first use)."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], read: str) -> None:
        self.endpoints = endpoints
        self.serializable = read == "serializable"
        self._conns: dict[str, HttpConnection] = {}

    def body(self, req: KvRequest) -> tuple[str, dict[str, Any]]:
        """The gateway path and JSON body of a register request."""
        key = _b64(req.key)
        if req.f == "read":
            return "/v3/kv/range", {"key": key, **({"serializable": True} if self.serializable else {})}
        if req.f == "write":
            return "/v3/kv/put", {"key": key, "value": _b64(json.dumps(req.value))}
        if req.f == "cas":
            expected, new = req.value
            return "/v3/kv/txn", {
                "compare": [{"key": key, "target": "VALUE", "result": "EQUAL", "value": _b64(json.dumps(expected))}],
                "success": [{"requestPut": {"key": key, "value": _b64(json.dumps(new))}}],
            }
        raise ValueError(f"etcd cannot serve register operation {req.f!r}")

    @staticmethod
    def reply(req: KvRequest, status: int, doc: Any) -> KvReply:
        """A gateway answer in history terms. An error answer of a read is `fail` (a read changes nothing);
        of a write or cas `info` (etcd may have committed it anyway, e.g. after a leader change)."""
        if status != 200 or not isinstance(doc, dict) or "error" in doc:
            error = str(doc.get("error") or doc.get("message") or f"HTTP {status}") if isinstance(doc, dict) else ""
            return KvReply("fail" if req.f == "read" else "info", None, error or f"HTTP {status}")
        if req.f == "read":
            kvs = doc.get("kvs") or []
            return KvReply("ok", _value(kvs[0].get("value")) if kvs else None)
        if req.f == "write":
            return KvReply("ok", req.value)
        if doc.get("succeeded"):
            return KvReply("ok", req.value)
        return KvReply("fail", req.value, "cas-mismatch")  # compared, and the value was not the expected one

    async def call(self, request: Request) -> Answer:
        req = request.body
        if not isinstance(req, KvRequest):
            raise TypeError(f"etcd cannot serve a {type(req).__name__} (only the register workload)")
        path, body = self.body(req)
        conn = self._conns.get(request.node)
        if conn is None:
            conn = self._conns[request.node] = HttpConnection(*self.endpoints[request.node])
        try:
            status, doc = await conn.post(path, body, request.timeout_s)
        except NotSent as e:
            return Failure(f"connect-failed: {e}", sent=False)
        except TimeoutError:
            return Failure("timeout", sent=True)
        except ConnectionError as e:
            return Failure(f"disconnected: {e}", sent=True)
        return Reply(self.reply(req, status, doc))

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns = {}


class EtcdTransport:
    """Opens an `EtcdConnection` per client process (the runner's transport port)."""

    def __init__(self, endpoints: Mapping[str, tuple[str, int]], read: str = "linearizable") -> None:
        if read not in READS:
            raise ValueError(f"--etcd-read must be one of {', '.join(READS)}, got {read!r}")
        self.endpoints = dict(endpoints)
        self.read = read

    def __call__(self) -> EtcdConnection:
        return EtcdConnection(self.endpoints, self.read)
