"""node.properties parsing and validation; the node process exits 2 naming a bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodes.runtime.cli import main
from nodes.runtime.config import (
    ConfigError,
    Endpoint,
    config_from_properties,
    load_config,
    parse_overrides,
    parse_properties,
)

GOOD = """\
# a three-voter quorum
node.id=2
process.roles=controller,broker
controller.quorum.voters=1@127.0.0.2:9093,2@127.0.0.3:9093,3@127.0.0.4:9093
listeners=CONTROLLER://127.0.0.3:9093,CLIENT://127.0.0.3:9092
log.dirs=/var/lib/kraftwerk
controller.quorum.election.timeout.ms=500
controller.quorum.fetch.timeout.ms=1500
controller.quorum.election.backoff.max.ms=400
controller.quorum.request.timeout.ms=700
controller.quorum.retry.backoff.ms=30
queued.max.requests=100
socket.request.max.bytes=1048576
kraftwerk.bugs=forget-vote, stale-read
kraftwerk.seed=7
"""


def props(text: str = GOOD, **changes: str | None) -> dict[str, str]:
    p = parse_properties(text)
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            p.pop(key, None)
        else:
            p[key] = value
    return p


def test_good_config() -> None:
    c = config_from_properties(props())
    assert c.node_id == 2 and c.name == "n2"
    assert c.roles == {"controller", "broker"}
    assert c.voters == {1: Endpoint("127.0.0.2", 9093), 2: Endpoint("127.0.0.3", 9093), 3: Endpoint("127.0.0.4", 9093)}
    assert c.controller_listener == Endpoint("127.0.0.3", 9093)
    assert c.client_listener == Endpoint("127.0.0.3", 9092) and c.client_listener_name == "CLIENT"
    assert c.log_dir == Path("/var/lib/kraftwerk")
    assert (c.raft.election_timeout_ms, c.raft.fetch_timeout_ms, c.raft.election_backoff_max_ms) == (500, 1500, 400)
    assert (c.raft.request_timeout_ms, c.raft.retry_backoff_ms) == (700, 30)
    assert c.raft.fetch_max_wait_ms < c.raft.request_timeout_ms  # parked fetches return before the timeout
    assert (c.queued_max_requests, c.socket_request_max_bytes) == (100, 1048576)
    assert c.bugs == {"forget-vote", "stale-read"} and c.seed == 7


def test_defaults_follow_kafka() -> None:
    minimal = {k: v for k, v in props().items() if k in ("node.id", "process.roles", "listeners", "log.dirs")}
    minimal["controller.quorum.voters"] = props()["controller.quorum.voters"]
    c = config_from_properties(minimal)
    assert (c.raft.election_timeout_ms, c.raft.fetch_timeout_ms, c.raft.election_backoff_max_ms) == (1000, 2000, 1000)
    assert c.raft.retry_backoff_ms == 20 and c.queued_max_requests == 500
    assert c.socket_request_max_bytes == 100 * 1024 * 1024 and c.bugs == frozenset() and c.seed is None
    assert c.roles == {"controller", "broker"}
    assert c.connections_max_idle_ms == 600_000  # Kafka's connections.max.idle.ms
    assert c.raft.cluster_id == "kraftwerk"


def test_cluster_id() -> None:
    assert config_from_properties(props(cluster__id="  prod-7 ")).raft.cluster_id == "prod-7"


def test_connections_max_idle_ms() -> None:
    assert config_from_properties(props(connections__max__idle__ms="10000")).connections_max_idle_ms == 10_000
    assert config_from_properties(props(connections__max__idle__ms="-1")).connections_max_idle_ms is None


def test_shutdown_timeout_ms() -> None:
    assert config_from_properties(props()).shutdown_timeout_ms == 1000
    assert config_from_properties(props(kraftwerk__shutdown__timeout__ms="0")).shutdown_timeout_ms == 0
    assert config_from_properties(props(kraftwerk__shutdown__timeout__ms="5000")).shutdown_timeout_ms == 5000


def test_controller_only_role_and_custom_listener_names() -> None:
    c = config_from_properties(
        props(
            process__roles="controller",
            controller__listener__names="RAFT",
            listeners="RAFT://127.0.0.3:9093,PLAINTEXT://:9092",
        )
    )
    assert c.roles == {"controller"}
    assert c.controller_listener_name == "RAFT" and c.client_listener_name == "PLAINTEXT"
    assert c.client_listener == Endpoint("0.0.0.0", 9092)


def test_ipv6_endpoints() -> None:
    c = config_from_properties(
        props(
            controller__quorum__voters="1@[::1]:9001,2@[::1]:9002,3@[::1]:9003",
            listeners="CONTROLLER://[::1]:9002,CLIENT://[::1]:0",
        )
    )
    assert c.voters[2] == Endpoint("::1", 9002) and str(c.voters[2]) == "[::1]:9002"
    assert c.client_listener == Endpoint("::1", 0)


def test_properties_syntax() -> None:
    text = (
        "! bang comment\n"
        "  # indented comment\n"
        "a = 1\n"
        "b:2\n"
        "c 3\n"
        "d=one,\\\n"
        "    two\n"
        "e=tab\\there\\u0041\n"
        "f=\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {"a": "last wins", "b": "2", "c": "3", "d": "one,two", "e": "tab\thereA", "f": ""}


def test_overrides_and_bug_flags(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(GOOD)
    c = load_config(path, ["controller.quorum.election.timeout.ms=900", "kraftwerk.seed = 9"], ["lazy-flush"])
    assert c.raft.election_timeout_ms == 900 and c.seed == 9
    assert c.bugs == {"forget-vote", "stale-read", "lazy-flush"}
    assert parse_overrides(["a=b=c"]) == {"a": "b=c"}
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("node.id", "two", "integer"),
        ("node.id", "-1", "out of range"),
        ("node.id", "9", "does not list this node"),
        ("process.roles", "broker", "broker-only"),
        ("process.roles", "controller,zookeeper", "controller and/or broker"),
        ("controller.quorum.voters", "1@127.0.0.2", "host:port"),
        ("controller.quorum.voters", "1@127.0.0.2:9093,2@127.0.0.3:70000,3@h:1", "out of range"),
        ("controller.quorum.voters", "1@a:1,1@b:2,2@127.0.0.3:9093", "twice"),
        ("controller.quorum.voters", "x@a:1", "integer"),
        ("listeners", "CLIENT://127.0.0.3:9092", "no CONTROLLER listener"),
        ("listeners", "CONTROLLER://127.0.0.3:9093", "client listener"),
        ("listeners", "CONTROLLER://127.0.0.3:9999,CLIENT://:1", "differs"),
        ("listeners", "CONTROLLER:/127.0.0.3:9093", "NAME://host:port"),
        ("log.dirs", "/a,/b", "exactly one"),
        ("controller.quorum.election.timeout.ms", "0", "out of range"),
        ("controller.quorum.election.timeout.ms", "1.5", "integer"),
        ("controller.quorum.fetch.timeout.ms", "", "integer"),
        ("controller.quorum.election.backoff.max.ms", "-5", "out of range"),
        ("controller.quorum.request.timeout.ms", "soon", "integer"),
        ("controller.quorum.retry.backoff.ms", "0", "out of range"),
        ("queued.max.requests", "0", "out of range"),
        ("socket.request.max.bytes", "10", "out of range"),
        ("socket.request.max.bytes", "99999999999", "out of range"),
        ("kraftwerk.bugs", "forget-vote,nope", "unknown bug"),
        ("kraftwerk.pre.vote", "maybe", "true or false"),
        ("kraftwerk.volatile.writes", "sometimes", "true or false"),
        ("kraftwerk.fsync.delay.ms", "-1", "out of range"),
        ("kraftwerk.fsync.delay.ms", "0.5", "integer"),
        ("kraftwerk.shutdown.timeout.ms", "-1", "out of range"),
        ("kraftwerk.shutdown.timeout.ms", "soon", "integer"),
        ("kraftwerk.seed", "abc", "integer"),
        ("connections.max.idle.ms", "0", "positive, or -1"),
        ("connections.max.idle.ms", "-2", "out of range"),
        ("controller.listener.names", "A,B", "one listener name"),
        ("cluster.id", " ", "printable ASCII"),
        ("cluster.id", "a b", "printable ASCII"),
        ("cluster.id", "x" * 256, "printable ASCII"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str, fragment: str) -> None:
    p = props()
    p[key] = value
    with pytest.raises(ConfigError) as err:
        config_from_properties(p)
    assert err.value.key in (key, "controller.quorum.voters", "listeners")
    assert fragment in str(err.value)
    assert str(err.value).startswith(f"{err.value.key}:")


@pytest.mark.parametrize("key", ["node.id", "process.roles", "controller.quorum.voters", "listeners", "log.dirs"])
def test_required_keys(key: str) -> None:
    p = props()
    del p[key]
    with pytest.raises(ConfigError) as err:
        config_from_properties(p)
    assert err.value.key == key and "required" in str(err.value)


def test_unknown_key() -> None:
    p = props()
    p["controller.quorum.election.timeout"] = "100"
    with pytest.raises(ConfigError) as err:
        config_from_properties(p)
    assert err.value.key == "controller.quorum.election.timeout"


def test_process_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "node.properties"
    path.write_text(GOOD + "log.retention.hours=1\n")
    assert main(["--config", str(path)]) == 2
    assert "log.retention.hours" in capsys.readouterr().err

    path.write_text(GOOD)
    assert main(["--config", str(path), "--override", "queued.max.requests=lots"]) == 2
    assert "queued.max.requests" in capsys.readouterr().err

    assert main(["--config", str(path), "--bug", "no-such-bug"]) == 2
    assert "kraftwerk.bugs" in capsys.readouterr().err

    assert main(["--config", str(tmp_path / "missing.properties")]) == 2
    assert "cannot read" in capsys.readouterr().err

    assert main(["--no-such-flag"]) == 2  # argparse usage error
    assert main(["dump-log", "--config", str(path), "--override", "node.id=x"]) == 2
    assert "node.id" in capsys.readouterr().err


def test_broker_keys() -> None:
    c = config_from_properties(
        props(
            min__insync__replicas="2",
            replica__lag__time__max__ms="5000",
            broker__session__timeout__ms="3000",
            broker__heartbeat__interval__ms="500",
            unclean__leader__election__enable="TRUE",
            default__replication__factor="3",
            num__partitions="4",
            advertised__listeners="CLIENT://broker2.example:19092",
        )
    )
    assert c.is_broker
    b = c.broker
    assert (b.min_insync_replicas, b.replica_lag_time_max_ms, b.num_partitions) == (2, 5000, 4)
    assert (b.broker_session_timeout_ms, b.broker_heartbeat_interval_ms) == (3000, 500)
    assert b.unclean_leader_election_enable and b.default_replication_factor == 3
    assert c.advertised_listener == Endpoint("broker2.example", 19092)
    plain = config_from_properties(props())
    assert plain.broker.min_insync_replicas == 1 and plain.advertised_listener is None  # Kafka's defaults
    assert not config_from_properties(props(process__roles="controller")).is_broker


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("min.insync.replicas", "0", ">= 1"),
        ("num.partitions", "many", "not an integer"),
        ("unclean.leader.election.enable", "yes", "true or false"),
        ("advertised.listeners", "CLIENT://0.0.0.0:9092", "concrete host"),
        ("advertised.listeners", "OTHER://h:1", "CLIENT://"),
    ],
)
def test_bad_broker_values_name_the_key(key: str, value: str, fragment: str) -> None:
    p = props()
    p[key] = value
    with pytest.raises(ConfigError) as err:
        config_from_properties(p)
    assert err.value.key == key and fragment in str(err.value)


def test_clock_source_is_wall_by_default_and_validated() -> None:
    """clock.source: what the node's timers read; wall (Kafka's Time.milliseconds()) unless told monotonic."""
    assert config_from_properties(props()).clock_source == "wall"
    assert config_from_properties(props(clock__source="monotonic")).clock_source == "monotonic"
    assert config_from_properties(props(clock__source=" Wall ")).clock_source == "wall"
    with pytest.raises(ConfigError) as e:
        config_from_properties(props(clock__source="tsc"))
    assert e.value.key == "clock.source" and "wall, monotonic" in str(e.value)


BROKER_ONLY = {
    "node.id": "4",
    "process.roles": "broker",
    "controller.quorum.voters": "1@127.0.0.2:9093,2@127.0.0.3:9093,3@127.0.0.4:9093",
    "listeners": "BROKER://127.0.0.5:9091,CLIENT://0.0.0.0:9092",
    "log.dirs": "/var/lib/kraftwerk",
}


def test_broker_only_node() -> None:
    c = config_from_properties(BROKER_ONLY)
    assert c.roles == {"broker"} and c.is_broker and not c.is_controller
    assert c.controller_listener is None
    assert c.inter_broker_listener == c.node_listener == Endpoint("127.0.0.5", 9091)
    assert c.client_listener == Endpoint("0.0.0.0", 9092) and c.client_listener_name == "CLIENT"
    assert c.advertised_inter_broker is None and c.advertised_listener is None
    named = config_from_properties(
        {**BROKER_ONLY, "inter.broker.listener.name": "replication", "listeners": "REPLICATION://:1,PLAIN://:2"}
        | {"advertised.listeners": "REPLICATION://b4.example:1,PLAIN://b4.example:2"}
    )
    assert named.inter_broker_listener_name == "REPLICATION" and named.client_listener_name == "PLAIN"
    assert named.advertised_inter_broker == Endpoint("b4.example", 1)
    assert named.advertised_listener == Endpoint("b4.example", 2)
    combined = config_from_properties(props())
    assert combined.node_listener == combined.controller_listener and combined.inter_broker_listener is None


@pytest.mark.parametrize(
    ("changes", "key", "fragment"),
    [
        ({"controller.quorum.voters": "1@a:1,4@127.0.0.5:9091"}, "controller.quorum.voters", "broker-only"),
        ({"listeners": "CONTROLLER://127.0.0.5:9093,CLIENT://:9092"}, "listeners", "no CONTROLLER listener"),
        ({"listeners": "BROKER://127.0.0.5:9091,CONTROLLER://:1,CLIENT://:2"}, "listeners", "no CONTROLLER"),
        ({"listeners": "CLIENT://127.0.0.5:9092"}, "listeners", "inter-broker listener BROKER"),
        ({"listeners": "BROKER://127.0.0.5:9091"}, "listeners", "exactly one client listener"),
        ({"listeners": "BROKER://:9091,CLIENT://:9092"}, "advertised.listeners", "wildcard"),
        ({"advertised.listeners": "BROKER://0.0.0.0:9091"}, "advertised.listeners", "concrete host"),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners", "BROKER://host:port and/or"),
        ({"inter.broker.listener.name": "controller"}, "inter.broker.listener.name", "must differ"),
        ({"inter.broker.listener.name": "A,B"}, "inter.broker.listener.name", "one listener name"),
    ],
)
def test_broker_only_rules_name_the_key(changes: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_properties({**BROKER_ONLY, **changes})
    assert err.value.key == key and fragment in str(err.value), str(err.value)


def test_controller_roles_need_a_voter_entry_and_no_broker_listener() -> None:
    for roles in ("controller", "controller,broker"):
        with pytest.raises(ConfigError) as err:
            config_from_properties(props(node__id="4", process__roles=roles))
        assert err.value.key == "controller.quorum.voters" and "controller role" in str(err.value)
    with pytest.raises(ConfigError) as err:
        config_from_properties(props(advertised__listeners="BROKER://h:9091"))
    assert err.value.key == "advertised.listeners"
    broker_listener = "CONTROLLER://127.0.0.3:9093,BROKER://127.0.0.3:9091,CLIENT://127.0.0.3:9092"
    with pytest.raises(ConfigError) as err:
        config_from_properties(props(listeners=broker_listener))
    assert err.value.key == "listeners" and "exactly one client listener" in str(err.value)
