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

Leader safety: from `start_all` until `collect`, one thread per member polls its raft status
(`GET /debug/vars`, the `raft.status` entry: id, term, vote, lead, raftState in one consistent
snapshot taken by the raft goroutine) and records each change as a `state` event in docs/formats.md "Node events"
format (epoch = raft term, leader and voted_for as host names), so the epochs checker can report
two leaders in one term or two votes in one term. `/v3/maintenance/status` is not used for this:
its `raftTerm` is the term of the last *applied* entry and its `leader` is read separately, so a
new leader reports itself in the previous term until its first entry applies, which would look
like two leaders in one term.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import json
import shlex
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.db.daemons import PidfileDaemons
from harness.db.etcd_http import HttpConnection, NotSent, get_json
from harness.db.nodes import merge_events
from harness.db.protocol import ClusterNotReady, EnvSource
from harness.real.backends.base import Host
from harness.real.control.base import ControlError, DaemonSpec
from harness.real.faults import clocktrace
from harness.real.faults.common import on_hosts
from workloads.protocol import Answer, Failure, Reply, Request
from workloads.register import KvReply, KvRequest

__all__ = ["CLIENT_PORT", "PEER_PORT", "READS", "EtcdDB", "EtcdTransport", "role_of", "why_not"]

PEER_PORT = 2380
CLIENT_PORT = 2379
READS = ("linearizable", "serializable")
POLL_INTERVAL = 0.1  # seconds between two raft-status polls of one member
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


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _value(raw: str | None) -> Any:
    return None if raw is None else json.loads(base64.b64decode(raw))


class EtcdDB(PidfileDaemons):
    """An etcd cluster on a set of hosts (named n<id>), as a harness.db.protocol.DB."""

    api = "kv"  # the client API it serves (the register workload)

    def __init__(
        self,
        hosts: Sequence[Host],
        *,
        token: str = "kraftwerk",
        ports: Mapping[str, tuple[int, int]] | None = None,
        listen_any: bool = True,
        env: EnvSource | None = None,
        read: str = "linearizable",
        poll_interval: float = POLL_INTERVAL,
        clock: bool = False,
    ) -> None:
        if read not in READS:
            raise ValueError(f"--etcd-read must be one of {', '.join(READS)}, got {read!r}")
        self.hosts = list(hosts)
        self.by_name = {h.name: h for h in self.hosts}
        self.token = token
        self.ports = dict(ports or {})  # {host: (peer port, client port)} (the local backend's free ports)
        self.listen_any = listen_any
        self.env = env
        self.read = read
        self.poll_interval = poll_interval
        self.clock = clock  # clock faults in the test: members run under clocktrace
        self.partition_logs: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.binary: dict[str, str] = {}
        self.ids: dict[str, str] = {}  # raft member id (hex) → host name, learnt from each member's own status
        self.events: dict[str, list[dict[str, Any]]] = {h.name: [] for h in self.hosts}
        self.polls: dict[str, int] = {h.name: 0 for h in self.hosts}
        # (lowest, highest) wall-clock skew each member showed, from the Date header of its status answers
        self.skews: dict[str, tuple[float, float]] = {}
        self._t0 = time.monotonic_ns()
        self._stop = threading.Event()
        self._pollers: list[threading.Thread] = []
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

    # ------------------------------------------------------------------ life cycle
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

    install = setup

    def teardown(self) -> None:
        self.stop_all()

    def start_all(self) -> None:
        on_hosts(self.hosts, lambda h: h.control.start_daemon(self.spec(h)))
        self._start_polling()

    def stop_all(self, timeout: float = 10.0) -> None:
        self._stop_polling()
        on_hosts(self.hosts, lambda h: h.control.stop_daemon(self.pidfile(h), timeout=timeout))

    def __enter__(self) -> EtcdDB:
        self.start_all()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # the backend's teardown removes what is left
            self.stop_all(timeout=5.0)

    def transport(self, seed: int) -> EtcdTransport:
        """The workloads' transport to this cluster (harness.real's Interpreter)."""
        return EtcdTransport(self.endpoints(), self.read)

    # ------------------------------------------------------------------ raft status
    def status_now(self, name: str, timeout: float = 0.5) -> dict[str, Any] | None:
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

    def statuses_now(self, names: Sequence[str] | None = None, timeout: float = 0.5) -> dict[str, dict | None]:
        names = list(names) if names is not None else [h.name for h in self.hosts]
        with ThreadPoolExecutor(max_workers=max(1, len(names)), thread_name_prefix="etcd-status") as pool:
            return dict(zip(names, pool.map(lambda n: self.status_now(n, timeout), names)))

    def leader_of(self, statuses: Mapping[str, dict | None]) -> str | None:
        """The member that says it leads, in the highest term."""
        best: tuple[int, str | None] = (-1, None)
        for name, s in statuses.items():
            if s and s.get("raftState") == "StateLeader" and int(s.get("term", -1)) > best[0]:
                best = (int(s["term"]), name)
        return best[1]

    async def _statuses(self, names: Sequence[str] | None = None, timeout: float = 0.5) -> dict[str, dict | None]:
        return await asyncio.get_running_loop().run_in_executor(None, self.statuses_now, names, timeout)

    async def leader(self, timeout: float = 1.0) -> str | None:
        return self.leader_of(await self._statuses(timeout=min(timeout, 0.5)))

    def healthy(self, statuses: Mapping[str, dict | None]) -> str | None:
        """The leader if every member answers and follows it in its term, else None."""
        leader = self.leader_of(statuses)
        if leader is None or any(s is None for s in statuses.values()):
            return None
        term = int(statuses[leader]["term"])  # type: ignore[index]
        for s in statuses.values():
            if s is None or int(s.get("term", -1)) != term or self.name_of(s.get("lead")) != leader:
                return None
        return leader

    async def wait_ready(self, timeout: float, names: Sequence[str] | None = None) -> tuple[str, float]:
        started = time.monotonic()
        statuses: dict[str, dict | None] = {}
        while time.monotonic() - started < timeout:
            statuses = await self._statuses(names)
            leader = self.healthy(statuses)
            if leader is not None:
                return leader, time.monotonic() - started
            await asyncio.sleep(0.1)
        summary = {
            n: None if s is None else {"state": s.get("raftState"), "term": s.get("term"), "lead": s.get("lead")}
            for n, s in statuses.items()
        }
        raise ClusterNotReady(f"etcd: no leader known to every member within {timeout:g}s: {summary}")

    async def wait_serving(self, names: Sequence[str], timeout: float = 10.0) -> bool:
        """Wait until each of `names` answers and knows a leader; False if some did not within `timeout`."""
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending and time.monotonic() < deadline:
            statuses = await self._statuses(pending, 0.25)
            pending = [n for n, s in statuses.items() if s is None or s.get("lead") in (None, "0", 0)]
            if pending:
                await asyncio.sleep(0.05)
        return not pending

    # ------------------------------------------------------------------ the status poller
    def _start_polling(self) -> None:
        self._stop.clear()
        self._pollers = [
            threading.Thread(target=self._poll, args=(h.name,), name=f"etcd-poll-{h.name}", daemon=True)
            for h in self.hosts
        ]
        for t in self._pollers:
            t.start()

    def _stop_polling(self) -> None:
        self._stop.set()
        for t in self._pollers:
            t.join(timeout=5.0)
        self._pollers = []

    def event_of(self, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        """A `state` event (docs/formats.md "Node events") from one raft status of member `name` (time filled in by
        the poller)."""
        ev: dict[str, Any] = {
            "node": name,
            "type": "state",
            "epoch": int(status["term"]),
            "role": role_of(str(status.get("raftState"))),
        }
        leader, vote = self.name_of(status.get("lead")), self.name_of(status.get("vote"))
        if leader is not None:
            ev["leader"] = leader
        if vote is not None:
            ev["voted_for"] = vote
        return ev

    def _poll(self, name: str) -> None:
        last: tuple[Any, ...] | None = None
        while not self._stop.is_set():
            began = time.monotonic()
            status = self.status_now(name, timeout=max(self.poll_interval * 4, 0.3))
            if status is not None:
                self.polls[name] += 1
                ev = self.event_of(name, status)
                key = tuple(ev.get(k) for k in ("epoch", "role", "leader", "voted_for"))
                if key != last:
                    last = key
                    ev["time"] = time.monotonic_ns() - self._t0
                    self.events[name].append(ev)
            self._stop.wait(max(0.0, self.poll_interval - (time.monotonic() - began)))

    # ------------------------------------------------------------------ collection
    def collect(self, run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], dict[str, Any]]:
        """Stop the members, then write nodes/<node>/{etcd.log,events.jsonl}: (polled state events, no log
        dumps, notes). A member whose log shows a Go panic is noted under "fatal"; with clock faults, the lowest
        and highest wall-clock skew each member's answers showed under "clock-skew-s" (etcd's clock minus this
        machine's, from the HTTP Date header: whole seconds, so -1 to 0 for a true clock)."""
        notes: dict[str, Any] = {"missing": [], "fatal": {}, "status-polls": dict(self.polls)}
        if self.clock:
            notes["clock-skew-s"] = {n: [round(lo, 1), round(hi, 1)] for n, (lo, hi) in sorted(self.skews.items())}
        self.stop_all()

        def fetch(h: Host) -> None:
            out = run_dir / "nodes" / h.name
            out.mkdir(parents=True, exist_ok=True)
            for remote, local in self.log_files(h).items():
                try:
                    (out / local).write_bytes(h.control.get_file(remote))
                except ControlError:
                    notes["missing"].append(f"{h.name}:{local}")
            text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in self.events[h.name])
            (out / "events.jsonl").write_text(text, encoding="utf-8")
            log = out / "etcd.log"
            if log.exists():
                panics = [ln[:300] for ln in log.read_text(errors="replace").splitlines() if _panic(ln)]
                if panics:
                    notes["fatal"][h.name] = panics[:3]

        on_hosts(self.hosts, fetch)
        return merge_events([self.events[h.name] for h in self.hosts]), {}, notes


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
