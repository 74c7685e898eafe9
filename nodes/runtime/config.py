"""Node process configuration: a Kafka-style ``node.properties`` file plus ``--override`` pairs.

Accepted keys (anything else is an error naming the key):

==========================================  ========================================================
``node.id``                                 this node's id (int >= 0), required
``process.roles``                           ``controller`` (a quorum voter with the KV service and
                                            the metadata controller), ``controller,broker`` (also
                                            a Kafka-style broker speaking the Kafka protocol) or
                                            ``broker`` (a broker that observes the quorum: it
                                            fetches the metadata log, never votes), required
``controller.quorum.voters``                ``1@host:port,2@host:port,…`` (the controller
                                            listeners of every voter), required. Lists every node
                                            with the controller role and no broker-only node
``listeners``                               with the controller role
                                            ``CONTROLLER://host:port,CLIENT://host:port``: the
                                            controller listener (raft RPCs and the node-to-node
                                            broker requests) and exactly one other listener for
                                            KV clients, admin requests and (with the broker role)
                                            Kafka clients; broker-only
                                            ``BROKER://host:port,CLIENT://host:port``: the
                                            inter-broker listener (replica fetches and transaction
                                            markers from other brokers) and the client listener,
                                            no controller listener (Kafka's rule), required
``advertised.listeners``                    ``CLIENT://host:port`` given to Kafka clients in
                                            Metadata (default: the client listener; a wildcard
                                            host is replaced by this node's voter host, or on a
                                            broker-only node its inter-broker host); a broker-only
                                            node may add ``BROKER://host:port``, registered with
                                            the controller for other brokers (default: the
                                            inter-broker listener, which then needs a concrete host)
``controller.listener.names``               name of the controller listener (default CONTROLLER)
``inter.broker.listener.name``              name of a broker-only node's inter-broker listener
                                            (default BROKER; Kafka's default is PLAINTEXT). Brokers
                                            learn each other's inter-broker endpoint from the
                                            registrations in the metadata log; a combined node
                                            registers its controller listener
``log.dirs``                                one directory for quorum-state, the log and events
``cluster.id``                              carried by every raft request; a node of another cluster
                                            is answered INCONSISTENT_CLUSTER_ID. Also the cluster id
                                            of Metadata answers. Default ``kraftwerk``
``controller.quorum.election.timeout.ms``   default 1000
``controller.quorum.fetch.timeout.ms``      default 2000
``controller.quorum.election.backoff.max.ms``  default 1000
``controller.quorum.request.timeout.ms``    default 1000 (Kafka: 2000; see ``RaftConfig``)
``controller.quorum.retry.backoff.ms``      default 20
``queued.max.requests``                     request queue bound per listener, default 500
``socket.request.max.bytes``                largest accepted request frame, default 100 MiB
``num.network.threads``                     processor threads per listener (socket I/O), default 3
``num.io.threads``                          request handlers per listener, default 8
``connections.max.idle.ms``                 a connection with no request for this long is closed
                                            by the node (both listeners), default 600000 as
                                            Kafka's; -1: never
``clock.source``                            the clock the node's timers read (raft election and fetch
                                            timeouts, broker heartbeats and sessions, purgatory
                                            expiry): ``wall`` (default; Kafka's ``Time.milliseconds()``,
                                            which a wall-clock step or libfaketime moves) or
                                            ``monotonic``
``kraftwerk.bugs``                          comma list of seeded bug names (docs/design.md "Seeded bugs")
``kraftwerk.pre.vote``                      ``true``/``false`` (KIP-996 pre-vote), default false
``kraftwerk.lease.reads``                   ``true``: the leader answers register reads from its state
                                            while its lease lasts (leader leases, ``RaftConfig``),
                                            default false
``kraftwerk.lease.drift.margin.ms``         how much shorter than the election timeout the lease
                                            is (clock-rate drift), default 100; as long as the
                                            election timeout or longer: no lease (reads go through
                                            the log)
``kraftwerk.seed``                          int seed for the election-timeout RNG (default: random)
``kraftwerk.shutdown.timeout.ms``           bound of the graceful shutdown a SIGTERM starts (the
                                            leader resigns and waits for a successor, a candidate
                                            finishes its election; ``RaftNode.shutdown``), default
                                            1000 (an election timeout); 0: stop without waiting.
                                            Kafka has no setting for it
``kraftwerk.volatile.writes``               ``true``: keep log appends in the process until fsync, so a
                                            SIGKILL loses unsynced writes as a power loss would (a
                                            fault-injection mode, like Jepsen's lazyfs), default false
``kraftwerk.fsync.delay.ms``                wait this long before each fsync of the raft and partition
                                            logs (a slow disk: with volatile writes, a kill in that
                                            window loses what followers already hold), default 0
broker keys                                 ``min.insync.replicas``, ``replica.lag.time.max.ms``,
                                            ``broker.session.timeout.ms``,
                                            ``broker.heartbeat.interval.ms``,
                                            ``unclean.leader.election.enable``,
                                            ``default.replication.factor``, ``num.partitions``,
                                            ``replica.fetch.*``, ``request.timeout.ms``
                                            (``nodes.broker.config.PROPERTY_KEYS``; Kafka defaults)
==========================================  ========================================================

The file format is Java's ``.properties``: ``key=value``, ``key: value`` or ``key value``;
``#``/``!`` comment lines; a trailing backslash continues a line; ``\\t \\n \\uXXXX`` escapes.
:class:`ConfigError` carries the offending ``key``; the node process exits 2 with its message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..broker.config import PROPERTY_KEYS as BROKER_KEYS
from ..broker.config import BrokerConfig
from ..raft import RaftConfig
from ..raft.bugs import ALL_BUGS
from ..raft.config import DEFAULT_CLUSTER_ID

__all__ = [
    "CLOCK_SOURCES",
    "ConfigError",
    "Endpoint",
    "KNOWN_KEYS",
    "NodeConfig",
    "config_from_properties",
    "load_config",
    "parse_overrides",
    "parse_properties",
]

MAX_INT = 2**31 - 1
CLOCK_SOURCES = ("wall", "monotonic")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")


class ConfigError(ValueError):
    """A bad or unknown configuration key; ``key`` names it (None for file-level problems)."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class NodeConfig:
    """Everything a node process needs. Build it with :func:`load_config` or directly (tests)."""

    node_id: int
    voters: Mapping[int, Endpoint]
    controller_listener: Endpoint | None  # None on a broker-only node
    client_listener: Endpoint
    log_dir: Path
    raft: RaftConfig = field(default_factory=RaftConfig)
    roles: frozenset[str] = frozenset({"controller"})
    controller_listener_name: str = "CONTROLLER"
    client_listener_name: str = "CLIENT"
    queued_max_requests: int = 500
    socket_request_max_bytes: int = 100 * 1024 * 1024
    num_network_threads: int = 3
    num_io_threads: int = 8
    connections_max_idle_ms: int | None = 600_000  # None: never closed for idleness
    bugs: frozenset[str] = frozenset()
    seed: int | None = None
    volatile_writes: bool = False
    fsync_delay_ms: int = 0
    shutdown_timeout_ms: int = 1000
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    advertised_listener: Endpoint | None = None
    inter_broker_listener: Endpoint | None = None  # a broker-only node's listener for other nodes' requests
    inter_broker_listener_name: str = "BROKER"
    advertised_inter_broker: Endpoint | None = None  # where other brokers reach it (default: the listener)
    clock_source: str = "wall"  # what the core's timers read: "wall" or "monotonic" (CLOCK_SOURCES)

    @property
    def name(self) -> str:
        return f"n{self.node_id}"

    @property
    def is_broker(self) -> bool:
        """True when the node runs the broker (``process.roles`` includes ``broker``)."""
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        """True when the node is a quorum voter (``process.roles`` includes ``controller``)."""
        return "controller" in self.roles

    @property
    def node_listener(self) -> Endpoint:
        """The listener for other nodes' requests: the controller listener (raft RPCs and, on a combined
        node, broker-to-broker requests) or, on a broker-only node, the inter-broker listener."""
        listener = self.controller_listener if self.is_controller else self.inter_broker_listener
        assert listener is not None, "config_from_properties sets the listener of the node's roles"
        return listener


_DEFAULTS: dict[str, str] = {
    "cluster.id": DEFAULT_CLUSTER_ID,
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "BROKER",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.retry.backoff.ms": "20",
    "queued.max.requests": "500",
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "num.network.threads": "3",
    "num.io.threads": "8",
    "connections.max.idle.ms": "600000",
    "kraftwerk.bugs": "",
    "kraftwerk.pre.vote": "false",
    "kraftwerk.seed": "",
    "kraftwerk.volatile.writes": "false",
    "kraftwerk.fsync.delay.ms": "0",
    "kraftwerk.shutdown.timeout.ms": "1000",
    "kraftwerk.lease.reads": "false",
    "kraftwerk.lease.drift.margin.ms": "100",
    "advertised.listeners": "",
    "clock.source": "wall",
}
_REQUIRED = ("node.id", "process.roles", "controller.quorum.voters", "listeners", "log.dirs")
KNOWN_KEYS: frozenset[str] = frozenset(_DEFAULTS) | frozenset(_REQUIRED) | frozenset(BROKER_KEYS)


# --- the .properties format ------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, line_no: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(None, f"line {line_no}: malformed \\u escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip() if pending else raw.lstrip(" \t\f")
        if not pending:
            start = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = []
    if pending:
        yield start, "".join(pending)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text into a dict (a later duplicate key wins)."""
    props: dict[str, str] = {}
    for line_no, line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = _unescape(line[:i], line_no)
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        if not key:
            raise ConfigError(None, f"line {line_no}: missing key")
        props[key] = _unescape(line[i:], line_no).rstrip()
    return props


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """``["key=value", …]`` (command-line ``--override``) into a dict."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(key or None, f"override {pair!r} is not key=value")
        out[key] = value.strip()
    return out


# --- values ----------------------------------------------------------------------------------


def _int(key: str, text: str, lo: int = 0, hi: int = MAX_INT) -> int:
    value = text.strip()
    if not re.fullmatch(r"[+-]?\d+", value):
        raise ConfigError(key, f"expected an integer, got {text!r}")
    number = int(value)
    if not lo <= number <= hi:
        raise ConfigError(key, f"{number} is out of range [{lo}, {hi}]")
    return number


def _bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise ConfigError(key, f"expected true or false, got {text!r}")


def _host_port(key: str, text: str, *, allow_zero: bool) -> Endpoint:
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)|([^\s:\[\]@,]*):(\d+)", text.strip())
    if m is None:
        raise ConfigError(key, f"expected host:port, got {text!r}")
    host = m.group(1) if m.group(1) is not None else m.group(3)
    port = int(m.group(2) or m.group(4))
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise ConfigError(key, f"port {port} is out of range in {text!r}")
    return Endpoint(host, port)


def _cluster_id(key: str, text: str) -> str:
    value = text.strip()
    if not value or len(value) > 255 or not all(c.isascii() and c.isprintable() and c != " " for c in value):
        raise ConfigError(key, f"expected 1 to 255 printable ASCII characters without spaces, got {text!r}")
    return value


def _voters(key: str, text: str) -> dict[int, Endpoint]:
    voters: dict[int, Endpoint] = {}
    for item in (part.strip() for part in text.split(",")):
        node, at, address = item.partition("@")
        if not at or not item:
            raise ConfigError(key, f"expected id@host:port, got {item!r}")
        node_id = _int(key, node)
        if node_id in voters:
            raise ConfigError(key, f"voter {node_id} is listed twice")
        endpoint = _host_port(key, address, allow_zero=False)
        if not endpoint.host:
            raise ConfigError(key, f"voter {node_id} needs a host")
        voters[node_id] = endpoint
    return voters


def _listeners(key: str, text: str) -> dict[str, Endpoint]:
    out: dict[str, Endpoint] = {}
    for item in (part.strip() for part in text.split(",")):
        m = re.fullmatch(r"([A-Za-z][A-Za-z0-9_]*)://(.*)", item)
        if m is None:
            raise ConfigError(key, f"expected NAME://host:port, got {item!r}")
        name = m.group(1).upper()
        if name in out:
            raise ConfigError(key, f"listener {name} is listed twice")
        endpoint = _host_port(key, m.group(2), allow_zero=True)
        out[name] = Endpoint(endpoint.host or "0.0.0.0", endpoint.port)
    return out


def _roles(key: str, text: str) -> frozenset[str]:
    roles = [r.strip().lower() for r in text.split(",")]
    unknown = [r for r in roles if r not in ("controller", "broker")]
    if unknown or not roles:
        raise ConfigError(key, f"expected controller and/or broker, got {text!r}")
    return frozenset(roles)


def _listener_name(key: str, text: str) -> str:
    name = text.strip().upper()
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
        raise ConfigError(key, f"expected one listener name, got {name!r}")
    return name


def _bugs(key: str, text: str) -> frozenset[str]:
    bugs = frozenset(b.strip() for b in text.split(",") if b.strip())
    unknown = sorted(bugs - ALL_BUGS)
    if unknown:
        raise ConfigError(key, f"unknown bug name(s) {unknown}; known: {sorted(ALL_BUGS)}")
    return bugs


def config_from_properties(props: Mapping[str, str]) -> NodeConfig:
    """Validate a key -> value mapping and build a :class:`NodeConfig`."""
    for key in props:
        if key not in KNOWN_KEYS:
            raise ConfigError(key, "unknown configuration key")
    for key in _REQUIRED:
        if not props.get(key, "").strip():
            raise ConfigError(key, "is required")
    p = {**_DEFAULTS, **props}

    node_id = _int("node.id", p["node.id"])
    roles = _roles("process.roles", p["process.roles"])
    voters = _voters("controller.quorum.voters", p["controller.quorum.voters"])
    is_controller = "controller" in roles
    if is_controller and node_id not in voters:
        raise ConfigError(
            "controller.quorum.voters", f"does not list this node (node.id={node_id}), which has the controller role"
        )
    if not is_controller and node_id in voters:
        raise ConfigError(
            "controller.quorum.voters",
            f"lists this broker-only node (node.id={node_id}): a broker is an observer, "
            "only nodes with the controller role vote",
        )

    controller_name = _listener_name("controller.listener.names", p["controller.listener.names"])
    inter_broker_name = _listener_name("inter.broker.listener.name", p["inter.broker.listener.name"])
    if inter_broker_name == controller_name:
        raise ConfigError(
            "inter.broker.listener.name", f"must differ from controller.listener.names ({controller_name})"
        )
    listeners = _listeners("listeners", p["listeners"])
    controller: Endpoint | None = None
    inter_broker: Endpoint | None = None
    if is_controller:
        # a controller (alone or combined) serves raft and broker-to-broker requests on its controller listener
        node_name = controller_name
        if controller_name not in listeners:
            raise ConfigError("listeners", f"no {controller_name} listener (e.g. {controller_name}://127.0.0.1:9093)")
        controller = listeners[controller_name]
        if controller.port != voters[node_id].port:
            raise ConfigError(
                "listeners",
                f"the {controller_name} port {controller.port} differs from this node's entry "
                f"in controller.quorum.voters ({voters[node_id]})",
            )
    else:
        node_name = inter_broker_name
        if controller_name in listeners:
            raise ConfigError("listeners", f"a broker-only node has no {controller_name} listener (it does not vote)")
        if inter_broker_name not in listeners:
            raise ConfigError(
                "listeners",
                f"a broker-only node needs the inter-broker listener {inter_broker_name} "
                f"(e.g. {inter_broker_name}://10.0.0.5:9091)",
            )
        inter_broker = listeners[inter_broker_name]
    others = [name for name in listeners if name != node_name]
    if len(others) != 1:
        raise ConfigError(
            "listeners", f"need exactly one client listener besides the {node_name} one (CLIENT://…), got {others}"
        )
    if others[0] in (controller_name, inter_broker_name):
        raise ConfigError("listeners", f"{others[0]} cannot be the client listener of a {','.join(sorted(roles))} node")

    dirs = [d.strip() for d in p["log.dirs"].split(",") if d.strip()]
    if len(dirs) != 1:
        raise ConfigError("log.dirs", f"exactly one directory is supported, got {len(dirs)}")

    election = _int("controller.quorum.election.timeout.ms", p["controller.quorum.election.timeout.ms"], 10)
    fetch = _int("controller.quorum.fetch.timeout.ms", p["controller.quorum.fetch.timeout.ms"], 10)
    backoff = _int("controller.quorum.election.backoff.max.ms", p["controller.quorum.election.backoff.max.ms"], 1)
    request = _int("controller.quorum.request.timeout.ms", p["controller.quorum.request.timeout.ms"], 10)
    retry = _int("controller.quorum.retry.backoff.ms", p["controller.quorum.retry.backoff.ms"], 1)
    raft = RaftConfig(
        election_timeout_ms=election,
        fetch_timeout_ms=fetch,
        election_backoff_max_ms=backoff,
        request_timeout_ms=request,
        retry_backoff_ms=retry,
        # a parked Fetch must come back well before the follower's request timeout fires
        fetch_max_wait_ms=min(500, request // 2, fetch // 4),
        pre_vote=_bool("kraftwerk.pre.vote", p["kraftwerk.pre.vote"]),
        lease_reads=_bool("kraftwerk.lease.reads", p["kraftwerk.lease.reads"]),
        lease_drift_margin_ms=_int(
            "kraftwerk.lease.drift.margin.ms", p["kraftwerk.lease.drift.margin.ms"], 0, 3_600_000
        ),
        cluster_id=_cluster_id("cluster.id", p["cluster.id"]),
    )
    seed_text = p["kraftwerk.seed"].strip()
    try:
        broker = BrokerConfig.from_properties({k: v for k, v in props.items() if k in BROKER_KEYS})
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        raise ConfigError(key if key in BROKER_KEYS else None, message if key in BROKER_KEYS else str(exc)) from None
    adv: dict[str, Endpoint] = {}
    if p["advertised.listeners"].strip():
        adv = _listeners("advertised.listeners", p["advertised.listeners"])
        allowed = [others[0]] if is_controller else [inter_broker_name, others[0]]
        if not adv or any(name not in allowed for name in adv):
            raise ConfigError(
                "advertised.listeners", f"expected {' and/or '.join(f'{n}://host:port' for n in allowed)}"
            )
        for endpoint in adv.values():
            if endpoint.port == 0 or endpoint.host in WILDCARD_HOSTS:
                raise ConfigError("advertised.listeners", "needs a concrete host and port")
    advertised = adv.get(others[0])
    advertised_inter_broker = adv.get(inter_broker_name)
    if inter_broker is not None and advertised_inter_broker is None and inter_broker.host in WILDCARD_HOSTS:
        raise ConfigError(
            "advertised.listeners",
            f"the {inter_broker_name} listener binds a wildcard host: advertise {inter_broker_name}://host:port "
            "(the address other nodes reach this broker at)",
        )
    idle_ms = _int("connections.max.idle.ms", p["connections.max.idle.ms"], -1)
    if idle_ms == 0:
        raise ConfigError("connections.max.idle.ms", "must be positive, or -1 (never)")
    clock_source = p["clock.source"].strip().lower()
    if clock_source not in CLOCK_SOURCES:
        raise ConfigError("clock.source", f"expected one of {', '.join(CLOCK_SOURCES)}, got {clock_source!r}")
    return NodeConfig(
        clock_source=clock_source,
        node_id=node_id,
        voters=voters,
        controller_listener=controller,
        inter_broker_listener=inter_broker,
        inter_broker_listener_name=inter_broker_name,
        advertised_inter_broker=advertised_inter_broker,
        client_listener=listeners[others[0]],
        log_dir=Path(dirs[0]),
        raft=raft,
        roles=roles,
        controller_listener_name=controller_name,
        client_listener_name=others[0],
        queued_max_requests=_int("queued.max.requests", p["queued.max.requests"], 1),
        socket_request_max_bytes=_int("socket.request.max.bytes", p["socket.request.max.bytes"], 1024),
        num_network_threads=_int("num.network.threads", p["num.network.threads"], 1, 64),
        num_io_threads=_int("num.io.threads", p["num.io.threads"], 1, 256),
        connections_max_idle_ms=None if idle_ms < 0 else idle_ms,
        bugs=_bugs("kraftwerk.bugs", p["kraftwerk.bugs"]),
        seed=_int("kraftwerk.seed", seed_text, -(2**63), 2**63 - 1) if seed_text else None,
        volatile_writes=_bool("kraftwerk.volatile.writes", p["kraftwerk.volatile.writes"]),
        fsync_delay_ms=_int("kraftwerk.fsync.delay.ms", p["kraftwerk.fsync.delay.ms"], 0, 60_000),
        shutdown_timeout_ms=_int("kraftwerk.shutdown.timeout.ms", p["kraftwerk.shutdown.timeout.ms"], 0, 600_000),
        broker=broker,
        advertised_listener=advertised,
    )


def load_config(path: str | Path, overrides: Iterable[str] = (), bugs: Iterable[str] = ()) -> NodeConfig:
    """Read ``path``, apply ``key=value`` overrides, add ``bugs`` to ``kraftwerk.bugs``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(None, f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(None, f"config file {path} is not UTF-8") from None
    props = parse_properties(text)
    props.update(parse_overrides(overrides))
    extra = [b for b in bugs if b]
    if extra:
        current = props.get("kraftwerk.bugs", "")
        props["kraftwerk.bugs"] = ",".join([current, *extra]) if current.strip() else ",".join(extra)
    return config_from_properties(props)
