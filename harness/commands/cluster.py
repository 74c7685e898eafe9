"""``kraftwerk cluster up|kill|start|down`` and its fault verbs: a cluster left running for tests and experiments.

``up`` prints one JSON object (docs/formats.md "cluster up output")::

    {"bootstrap": "127.0.0.2:P,…", "nodes": [{"id": 1, "host": "127.0.0.2", "port": P}, …]}

``port`` is each node's client listener: Kafka clients (kafka-python, librdkafka), the KV API and
the admin API. ``kill``, ``start`` and ``down`` print one JSON object each too. ``local`` clusters
are processes on 127.0.0.x (``harness/real/cluster_local.py``); ``docker`` and ``netns`` clusters are
containers or network namespaces (``harness/real/cluster_remote.py``); ``kill``/``start``/``down``
find the backend in ``DIR/cluster.json``. ``down`` without ``--dir`` removes everything any
kraftwerk run left on this machine (labelled containers and networks, namespaces, local nodes).

The fault verbs ``pause``, ``resume``, ``partition``, ``heal``, ``clock``, ``packet`` and ``status`` go
through the cluster's fault keeper (harness.chaos.keeper: the nemesis of ``kraftwerk test`` over the
same Faults port, started by the first of them and ended by ``down``); each prints one JSON object
``{"result": …, "faults": {…in force…}}`` (``status``: leaders, ISR, node views and faults).

Exit codes: 0 done, 254 bad options or input (the message names the option), 255 the cluster
failed (did not come up, a node would not die, …).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.chaos import keeper
from harness.core.argtypes import positive_float, positive_int
from harness.core.shape import CONTROLLER_ROLES, DEDICATED, Shape
from harness.nemesis.partitions import KINDS as PARTITION_KINDS
from harness.real import cluster_local as local
from harness.real import cluster_remote as remote
from harness.real.backends import registry

HELP = "start, fault and stop a cluster left running (kafka-python and friends can use it)"
DESCRIPTION = (
    "Manage a cluster that stays up between commands: up, kill, start, down; and inject the nemesis's faults "
    "into it: pause, resume, partition, heal, clock, packet; status shows leaders, ISR and the faults in force."
)
EPILOG = "Exit code: 0 done, 254 bad options or input, 255 the cluster failed."


__all__ = ["add_arguments", "run"]

BACKENDS = registry.CLUSTER


def _topic_partition(text: str) -> tuple[str, int]:
    topic, sep, index = text.rpartition(":")
    if not sep or not topic or not index.isdigit():
        raise argparse.ArgumentTypeError(f"expected TOPIC:PARTITION (e.g. t:0), got {text!r}")
    return topic, int(index)


def _override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``up``/``kill``/``start``/``down`` subcommands to ``kraftwerk cluster``."""
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION", parser_class=type(parser))
    up = sub.add_parser(
        "up",
        help="start a cluster and leave it running; print its bootstrap servers as JSON",
        description="Start N nodes (combined controller+broker nodes, or laid out by --controllers as KRaft is "
        "deployed), wait until a leader is elected and every broker is registered, write DIR/cluster.json and "
        'print {"bootstrap": "host:port,…" (the brokers), "nodes": [{"id", "host", "port", "roles"}, …]}.',
        epilog="Local nodes bind 127.0.0.2…127.0.0.(N+1) (127.0.0.1 with distinct ports if those cannot be "
        "bound); docker nodes are containers (node image built if missing) and netns nodes network namespaces "
        "(root), each listening on its cluster address at 9092, reachable from this machine. "
        f"Clusters use {local.LOCAL_DEFAULTS} unless overridden. "
        "A DIR that held an earlier cluster is refused unless --fresh (a running one: 'cluster down' first). "
        "Exit code: 0 up, 254 bad options or a used DIR, 255 the cluster did not come up (nothing is left running).",
    )
    up.add_argument(
        "--backend",
        required=True,
        choices=BACKENDS,
        help="where the nodes run: local processes, docker containers or network namespaces",
    )
    up.add_argument("--nodes", type=positive_int, default=3, metavar="N", help="number of nodes (default 3)")
    up.add_argument(
        "--controllers",
        type=int,
        default=0,
        metavar="N",
        help="n1..nN are the quorum's voters (controllers), the other nodes broker-only observers of it "
        "(default: every node a combined voter); see docs/cluster-shapes.md",
    )
    up.add_argument(
        "--controller-roles",
        default=DEDICATED,
        metavar="ROLES",
        help=f"with --controllers: {' or '.join(CONTROLLER_ROLES)} (the controllers run no broker, or are brokers "
        f"too); default {DEDICATED}",
    )
    up.add_argument("--dir", required=True, type=Path, metavar="DIR", help="cluster directory (configs, data, logs)")
    up.add_argument("--bug", action="append", default=[], metavar="NAME", help="turn on a seeded bug (repeatable)")
    up.add_argument(
        "--base-port",
        type=positive_int,
        default=None,
        metavar="P",
        help="local only: node i listens on P+2(i-1) (client) and P+2(i-1)+1 (controller); default: free ports",
    )
    up.add_argument(
        "--override",
        action="append",
        default=[],
        type=_override,
        metavar="KEY=VALUE",
        help="a node.properties setting for every node (repeatable), e.g. min.insync.replicas=2",
    )
    up.add_argument("--timeout", type=positive_float, default=30.0, metavar="S", help="wait at most S s (default 30)")
    up.add_argument(
        "--fresh",
        action="store_true",
        help="DIR held an earlier cluster: remove what it left there (its state file and node directories) and "
        "start a new one; without --fresh such a DIR is refused, so an old raft log never comes back",
    )

    kill = sub.add_parser(
        "kill",
        help="SIGKILL one node, the current leader of a partition, or the active controller",
        description="SIGKILL a node of the cluster in DIR, chosen by id, as the leader of TOPIC:PARTITION "
        "(from Kafka Metadata) or as the active controller (the quorum leader, from the nodes' AdminDescribe). "
        'Prints {"node", "pid", "killed"}.',
    )
    kill.add_argument("--dir", required=True, type=Path, metavar="DIR")
    which = kill.add_mutually_exclusive_group(required=True)
    which.add_argument("--node", type=positive_int, metavar="ID", help="the node id")
    which.add_argument("--leader", type=_topic_partition, metavar="TOPIC:PARTITION", help="e.g. t:0")
    which.add_argument("--controller", action="store_true", help="the active controller (the quorum leader; a voter)")

    start = sub.add_parser(
        "start",
        help="start a killed or stopped node again (same config and data)",
        description="Restart node ID of the cluster in DIR and wait until it has rejoined.",
    )
    start.add_argument("--dir", required=True, type=Path, metavar="DIR")
    start.add_argument("--node", required=True, type=positive_int, metavar="ID")
    start.add_argument(
        "--timeout", type=positive_float, default=30.0, metavar="S", help="wait at most S s (default 30)"
    )

    down = sub.add_parser(
        "down",
        help="stop and remove a cluster, or everything crashed runs left; idempotent",
        description="Stop the cluster in DIR (local: SIGTERM every node, SIGKILL those still running after "
        "--timeout; docker/netns: remove its containers and network, or namespaces, links and directories). "
        "Without --dir: remove everything any kraftwerk run left on this machine — docker containers and "
        "networks labelled org.kraftwerk.managed, kw-* namespaces, local node processes, chains and directories.",
    )
    which_down = down.add_mutually_exclusive_group()
    which_down.add_argument(
        "--dir", type=Path, default=None, metavar="DIR", help="the cluster (default: every leftover)"
    )
    which_down.add_argument(
        "--cluster",
        default=None,
        metavar="ID",
        help="remove what is left of the cluster with this id (cluster.json of a run), on any backend",
    )
    down.add_argument(
        "--timeout", type=positive_float, default=10.0, metavar="S", help="SIGKILL after S s (default 10)"
    )

    _add_fault_verbs(sub)


FAULT_VERBS = ("pause", "resume", "partition", "heal", "clock", "packet", "status")
TARGET_HELP = "leader (the quorum leader, or with --topic that partition's leader), all, a node (n2) or nodes (n1,n3)"


def _grudge(text: str) -> dict[str, list[str]]:
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v) for k, v in value.items()
        ):
            raise ValueError("not an object of lists of node names")
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f'expected JSON {{"n1": ["n2", "n3"], …}} (node: nodes it drops): {e}'
        ) from None
    return value


def _percent(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected a percentage 0..100, got {text!r}")
    return value


def _add_fault_verbs(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    def verb(name: str, help_: str, description: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_,
            description=description + " Faults are held by the cluster's fault keeper (started by the first fault "
            "verb, log in DIR/keeper.log) until 'heal' or 'down'.",
            epilog='Prints {"result": …, "faults": {what is in force}}. Exit code: 0 done, 254 bad options or a fault '
            "this cluster cannot take here (the message says why), 255 the fault failed.",
        )
        p.add_argument("--dir", required=True, type=Path, metavar="DIR", help="the cluster (as given to 'cluster up')")
        return p

    pause = verb("pause", "SIGSTOP nodes (default: the leader)", "SIGSTOP the target nodes' processes.")
    pause.add_argument("--target", default="leader", metavar="T", help=f"{TARGET_HELP}; default leader")
    pause.add_argument(
        "--topic", type=_topic_partition, metavar="TOPIC:PARTITION", help="target that partition's leader"
    )
    resume = verb("resume", "SIGCONT paused nodes", "SIGCONT paused nodes (default: every one).")
    resume.add_argument("--target", default=None, metavar="T", help="nodes to resume (default: every paused one)")
    part = verb(
        "partition",
        "cut the network between nodes",
        "Cut the network between the cluster's nodes (clients on this machine still reach every node), as the "
        "partition nemesis does: a partition kind, or a grudge.",
    )
    shape = part.add_mutually_exclusive_group()
    shape.add_argument("--kind", choices=PARTITION_KINDS, default="halves", help="the shape (default halves)")
    shape.add_argument(
        "--grudge",
        type=_grudge,
        metavar="JSON",
        help='for each node the nodes it drops packets from, e.g. {"n1": ["n2", "n3"]}',
    )
    verb("heal", "undo every fault in force", "Heal partitions and packet faults, resume paused nodes, reset clocks.")
    clock = verb(
        "clock",
        "step, strobe or reset nodes' wall clocks",
        "Move the target nodes' wall clocks (libfaketime; the nodes' timers feel it with clock.source=wall): step "
        "them by --bump MS (and drift --drift PPM), strobe them by --strobe MS every --period MS for --seconds S, "
        "or --reset them.",
    )
    clock.add_argument("--target", default=None, metavar="T", help=f"{TARGET_HELP}; default leader (--reset: all)")
    how = clock.add_mutually_exclusive_group(required=True)
    how.add_argument("--bump", type=float, metavar="MS", help="step the clocks by MS milliseconds (cumulative)")
    how.add_argument("--strobe", type=float, metavar="MS", help="flip the clocks between +0 and +MS")
    how.add_argument("--reset", action="store_true", help="back to true time")
    clock.add_argument("--drift", type=float, default=0.0, metavar="PPM", help="with --bump: run fast or slow by PPM")
    clock.add_argument("--period", type=positive_float, default=10.0, metavar="MS", help="strobe period (default 10)")
    clock.add_argument("--seconds", type=positive_float, default=5.0, metavar="S", help="strobe for S s (default 5)")
    packet = verb(
        "packet",
        "lose, delay, duplicate or reorder packets between nodes",
        "Packet faults on what --nodes send to --peers (both default all): give at least one of --loss, --delay, "
        "--duplicate, --reorder. A new packet fault replaces the one in force.",
    )
    packet.add_argument("--loss", type=_percent, metavar="PCT", help="drop PCT %% of packets")
    packet.add_argument("--delay", type=positive_float, metavar="MS", help="delay packets by MS milliseconds")
    packet.add_argument("--jitter", type=float, default=0.0, metavar="MS", help="± MS on --delay (default 0)")
    packet.add_argument("--duplicate", type=_percent, metavar="PCT", help="send PCT %% of packets twice")
    packet.add_argument("--reorder", type=_percent, metavar="PCT", help="reorder PCT %% of packets")
    packet.add_argument("--nodes", default="all", metavar="T", help="senders: all (default), n1 or n1,n2")
    packet.add_argument("--peers", default="all", metavar="T", help="receivers: all (default), n1 or n1,n2")
    verb(
        "status",
        "leaders, ISR, node views and the faults in force",
        "Show the quorum leader, each node's view (role, epoch, broker state), every partition's leader, "
        "replicas and ISR, and the faults in force.",
    )


def _fault_request(args: argparse.Namespace) -> tuple[str, dict[str, object]]:
    action = args.cluster_command
    if action == "pause":
        topic, partition = args.topic if args.topic else (None, 0)
        return action, {"target": args.target, "topic": topic, "partition": partition}
    if action == "resume":
        return action, {"target": args.target}
    if action == "partition":
        return action, {"grudge": args.grudge} if args.grudge else {"kind": args.kind}
    if action == "clock":
        return action, {
            "target": args.target,
            "bump_ms": args.bump,
            "drift_ppm": args.drift,
            "strobe_ms": args.strobe,
            "period_ms": args.period,
            "seconds": args.seconds,
            "reset": args.reset,
        }
    if action == "packet":
        request = {"loss": args.loss, "delay_ms": args.delay, "jitter_ms": args.jitter}
        request |= {"duplicate": args.duplicate, "reorder": args.reorder, "nodes": args.nodes, "peers": args.peers}
        return action, request
    return action, {}


def _fault(args: argparse.Namespace) -> int:
    verb, request = _fault_request(args)
    if verb == "packet" and all(request[k] is None for k in ("loss", "delay_ms", "duplicate", "reorder")):
        print("kraftwerk cluster packet: give at least one of --loss, --delay, --duplicate, --reorder", file=sys.stderr)
        return local.EXIT_BAD_INPUT
    if verb == "clock" and request["target"] is None:
        request["target"] = "all" if args.reset else "leader"
    try:
        answer = keeper.call(
            args.dir, verb, request, say=lambda m: print(f"kraftwerk cluster {verb}: {m}", file=sys.stderr)
        )
    except keeper.KeeperError as exc:
        print(f"kraftwerk cluster {verb}: {exc}", file=sys.stderr)
        return exc.code
    out = {"result": answer.get("result"), "faults": answer.get("faults", {})}
    print(json.dumps(out["result"] if verb == "status" else out, indent=2 if verb == "status" else None), flush=True)
    return 0


def _say(message: str) -> None:
    print(f"kraftwerk cluster up: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Run one ``kraftwerk cluster`` action; returns the exit code."""
    action = getattr(args, "cluster_command", None)
    if action is None:
        print(
            f"kraftwerk cluster: choose an action: up, kill, start, down, {', '.join(FAULT_VERBS)} (see --help)",
            file=sys.stderr,
        )
        return local.EXIT_BAD_INPUT
    if action in FAULT_VERBS:
        return _fault(args)
    shape = Shape(args.nodes, args.controllers, args.controller_roles) if action == "up" else None
    try:
        if action == "up" and args.backend in remote.REMOTE_BACKENDS:
            if args.base_port is not None:
                print(
                    f"kraftwerk cluster up: --base-port is for --backend local only "
                    f"({args.backend} nodes listen on their own addresses)",
                    file=sys.stderr,
                )
                return local.EXIT_BAD_INPUT
            result = remote.up(
                args.dir,
                args.backend,
                args.nodes,
                bugs=args.bug,
                overrides=dict(args.override),
                timeout=args.timeout,
                fresh=args.fresh,
                say=_say,
                shape=shape,
            )
        elif action == "up":
            result = local.up(
                args.dir,
                args.nodes,
                bugs=args.bug,
                base_port=args.base_port,
                overrides=dict(args.override),
                timeout=args.timeout,
                fresh=args.fresh,
                say=_say,
                shape=shape,
            )
        elif action == "down" and args.dir is None:
            if args.cluster is None:
                keeper.stop_all()
            result = remote.down_everything(args.cluster)
        elif action == "kill":
            mod = remote if remote.is_remote(args.dir) else local
            result = mod.kill(args.dir, node_id=args.node, leader=args.leader, controller=args.controller)
        elif action == "start":
            mod = remote if remote.is_remote(args.dir) else local
            result = mod.start(args.dir, args.node, timeout=args.timeout)
        elif remote.is_remote(args.dir):
            keeper.stop(args.dir)
            result = remote.down(args.dir)
        else:
            keeper.stop(args.dir)
            result = local.down(args.dir, timeout=args.timeout)
    except local.ClusterError as exc:
        print(f"kraftwerk cluster {action}: {exc}", file=sys.stderr)
        return exc.code
    print(json.dumps(result), flush=True)
    return 0
