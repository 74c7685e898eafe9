"""`kraftwerk replay` on a real cluster: drive a stored schedule again, in real time, and count reproductions.

A stored run (a real run, or a simulator run such as `RUN_DIR/minimal` with `--backend`) is
turned into a `Plan`: its client operations (each at its time, on its node, from its client
slot) and its fault events (at their times, with their targets, grudges and clock values).
Each attempt is a normal real run (`harness.core.run.run_test` on a `RealRuntime`, the code path of
`kraftwerk test`) whose main phase is the plan instead of fresh random operations and faults;
heal, recovery, final reads, collection and checking are the usual ones, and the attempt is
stored like any run.

Times: simulator and real schedules both count nanoseconds from the start of the main phase,
once the cluster is ready (a leader elected and known to all; queue runs: the topic created and
led), so they are not shifted; only a simulator history, on the simulator's clock, is brought to
that origin to find the stored happens-before order. Register runs simulated before
`"start": "ready"` in schedule.json started their clock with the nodes: such a schedule is
shifted back by the moment its own cluster became ready (read from its events). Times are lower
bounds: by default an item also waits for every operation or fault that
had completed before it started in the stored run (from the stored history), so an operation that
is slower on real hardware does not turn "read after the write" into "read during the write"
(`--no-order` drives by the clock alone). A `start` (restart of killed nodes) completes once they
answer on their client port again: a simulated restart serves at once, so an operation that
followed it in the stored run reaches a node that is up, not one still starting.

Node names: the cluster is symmetric, so the stored run's node names are renamed throughout the
plan to put the fresh cluster's leaders where the stored run's stood (off with `--keep-node-names`):
on a register run the quorum leader; on a queue run the leaders of the partitions (the one that
broke first, then those the schedule uses), then the controller. A fault aimed at the node leading
the partition that broke then hits the node that leads it now. `leader` targets are resolved when
the fault fires, as everywhere.

An attempt reproduces the failure when its verdict is invalid with at least one anomaly type of
the stored run's class. Simulator-only invariants (e.g. `MonotonicEpoch`) cannot be observed on a
real cluster; they stand for the checker anomalies that are their visible consequences
(`INVARIANT_EQUIVALENTS`, per workload), and the output says so.

Queue runs: the ops are `assign` (value: the partition keys), `send` (value: the unique integer)
and `poll` (key: the partition; it reads from the client's own position), and the queue client
(`workloads.queue`, the simulator's too) executes exactly those; a planned poll of a partition the
client's current process is not assigned (its assign went to a process that crashed since) is
answered `fail` (not-assigned) without a request. Queue ops need no node (the client asks for the
partition's leader). The topic (partitions, replication factor, min ISR, unclean
election) and the producer acks come from schedule.json (simulator runs) or test.json (real
runs).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.registry import bad_anomalies
from checkers.verdict import failing_key
from harness.core.spec import TestSpec
from harness.nemesis.schedule import HEAL, HEAL_ORDER
from harness.sim.cluster import RAFT_CONFIG
from harness.store.schedule import spec_of
from workloads import generator as gen
from workloads import registry as workloads

SECOND = 1_000_000_000
LAZY_FLUSH = "lazy-flush"  # the seeded bug whose timer is phased by the nodes' clock
NEMESIS_PACKAGES = {
    "start-partition": "partition",
    "stop-partition": "partition",
    "kill": "kill",
    "start": "kill",
    "pause": "pause",
    "resume": "pause",
    "bump-clock": "clock",
    "reset-clock": "clock",
    "start-disk": "disk",
    "stop-disk": "disk",
    "start-packet": "packet",
    "stop-packet": "packet",
}
# what a simulator invariant's violation looks like to the checkers of a real run
INVARIANT_EQUIVALENTS: dict[str, tuple[str, ...]] = {
    "SingleLeader": ("multiple-leaders",),
    "MonotonicEpoch": ("epoch-regression", "double-vote"),
    "LogMatching": ("committed-divergence",),
    "MonotonicHighWatermark": ("hw-regression",),
    # a high watermark no majority holds on disk is lost by a crash: the data (nonlinearizable reads,
    # diverging committed logs) or at least the watermark itself, which the cluster then reports lower
    "MajorityReachedHighWatermark": ("nonlinearizable", "committed-divergence", "hw-regression"),
    "ConsistentCommittedData": ("committed-divergence",),
}
# a queue run has no linearizability check: a metadata quorum that loses committed entries shows as
# diverging committed logs, or as acknowledged records the brokers lose
QUEUE_INVARIANT_EQUIVALENTS: dict[str, tuple[str, ...]] = {
    **INVARIANT_EQUIVALENTS,
    "MajorityReachedHighWatermark": ("committed-divergence", "lost-write", "hw-regression"),
}


@dataclass
class Plan:
    """What one replay attempt drives: a stored run's schedule in real-run time (ns after the cluster is ready)."""

    source: Path
    source_backend: str
    spec: TestSpec  # the stored run's test (harness.store.schedule)
    time_limit: float  # seconds of the main phase on the real cluster
    nemeses: list[str]
    events: list[dict[str, Any]]  # {"at", "package", "f", "value"}, sorted by "at"
    ops: list[dict[str, Any]]  # {"at", "client", "f", "key", "value", "node"}, sorted by "at"
    shift_ns: int = 0  # subtracted from the stored times (the simulator's own time to a ready cluster)
    leader: str | None = None  # the stored run's leader when its main phase began
    partition_leaders: dict[str, str] = field(default_factory=dict)  # queue: each partition's first leader
    # queue runs simulated since schedule.json stores it: each partition's replicas, preferred leader first
    assignment: dict[str, list[str]] = field(default_factory=dict)
    failing_key: str | None = None  # the key (register or partition) the stored run's checkers blamed first
    stored_anomalies: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the real cluster does differently
    main_start: int | None = None  # a simulator run's: when its main phase began on the nodes' clocks (ns)

    @property
    def workload(self) -> str:
        return self.spec.workload

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def nodes(self) -> int:
        return self.spec.nodes

    @property
    def concurrency(self) -> int:
        return self.spec.concurrency

    @property
    def bugs(self) -> tuple[str, ...]:
        return self.spec.bugs

    @property
    def kafka(self) -> bool:
        """Whether the stored run's workload speaks Kafka (its partitions have leaders of their own)."""
        return workloads.kind(self.spec.workload).api == "kafka"

    def phase_period(self) -> int | None:
        """The period (ns) of the nodes' clock-phased timers this run's bugs have, if any: the lazy-flush
        bug's flushes fall on multiples of its interval of the node's clock (nodes.raft.timing.next_lazy_flush)."""
        if self.main_start is None or LAZY_FLUSH not in self.bugs:
            return None
        return RAFT_CONFIG.lazy_flush_interval_ms * 1_000_000

    def phase_wait(self, now: int) -> int:
        """ns to wait from `now` (the real nodes' clock) so that the main phase starts in the phase of the
        clock-phased timers the stored run's main phase started in (0 when nothing is phased by the clock)."""
        period = self.phase_period()
        if period is None or self.main_start is None:
            return 0
        return (self.main_start - now) % period

    @property
    def names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def target(self) -> tuple[frozenset[str], list[str]]:
        """The anomaly class that counts as a reproduction, and how simulator-only names were mapped."""
        out: set[str] = set()
        mapped = []
        equivalents = QUEUE_INVARIANT_EQUIVALENTS if self.kafka else INVARIANT_EQUIVALENTS
        for a in self.stored_anomalies:
            if a in equivalents:
                out.update(equivalents[a])
                mapped.append(f"{a} → {' / '.join(equivalents[a])}")
            else:
                out.add(a)
        return frozenset(out), mapped


def ready_point(events: Sequence[Mapping[str, Any]], names: Sequence[str]) -> tuple[int | None, str | None]:
    """(time, leader) of the first moment every node's latest state names the same leader in the same epoch."""
    last: dict[str, tuple[Any, Any]] = {}
    for e in events:
        if e.get("type") != "state" or e.get("node") not in names:
            continue
        last[str(e["node"])] = (e.get("epoch"), e.get("leader"))
        if len(last) == len(names) and len(set(last.values())) == 1:
            _, leader = next(iter(last.values()))
            if leader is not None:
                return int(e.get("time") or 0), str(leader)
    return None, None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"missing {path.name} (is this a kraftwerk run directory?)", str(path.parent)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"unreadable JSON in {path.name}: {e.msg}", str(path.parent)) from None


def _read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break  # a torn last line
    return out


def load_plan(run_dir: str | Path) -> Plan:
    """The plan of a stored run (real or simulated); InputError for anything that cannot be replayed for real."""
    d = Path(run_dir)
    if not d.is_dir():
        raise InputError("not a run directory", str(d))
    test = _read_json(d / "test.json")
    doc = _read_json(d / "schedule.json")
    try:
        spec = spec_of(doc, test)
    except InputError as e:
        raise InputError(str(e), str(d)) from None
    if not isinstance(test, dict):
        raise InputError("test.json: not a JSON object", str(d))
    queue = workloads.kind(spec.workload).api == "kafka"
    source_backend = str(test.get("backend", "sim"))
    nodes, concurrency = spec.nodes, spec.concurrency
    limit = spec.time_limit
    end = int(limit * SECOND)
    names = [f"n{i}" for i in range(1, nodes + 1)]
    notes: list[str] = []
    shift, leader = 0, None
    events_at, leader_at = ready_point(_read_events(d / "events.jsonl"), names)
    # a simulator run's main phase starts once its cluster is ready, as a real run's (queue runs, and register
    # runs stored since "start": "ready"); older register runs started their clocks with the nodes
    from_main_start = source_backend == "sim" and (queue or doc.get("start") == "ready")
    if from_main_start:
        leader = leader_at
        ready = "topic created and led" if queue else "a leader known to every node"
        notes.append(f"simulator times count from the start of its main phase ({ready}), as a real run's: not shifted")
        notes.append(
            "not the same on a real cluster: network latency and message order, the simulated disk (a crash "
            "loses unflushed writes; a killed process keeps what it wrote to the OS), process, election and "
            + ("partition-leader " if queue else "")
            + "timing (faults aimed at `leader` hit whoever leads then)"
        )
    elif source_backend == "sim":
        # the simulator's clock starts with its nodes; a real run's main phase starts once the cluster is ready
        shift = events_at or 0
        leader = leader_at
        notes.append(
            f"simulator times count from the nodes' start; shifted back by {shift / SECOND:.3f} s, when the "
            f"simulated cluster became ready (leader {leader or 'unknown'})"
        )
        notes.append(
            "not the same on a real cluster: network latency and message order, the simulated disk (a crash "
            "loses unflushed writes; a killed process keeps what it wrote to the OS), process and election timing"
        )
    else:
        leader = leader_at
    if source_backend == "sim":
        notes.append(
            f"the final reads wait at least {spec.settle:g} s after the heal, as the stored run's did (a fault's late "
            "consequences, such as a broker fenced after the heal, show before them)"
        )
    events = []
    for e in doc["nemesis"]:
        f = e.get("f")
        if f not in NEMESIS_PACKAGES:
            raise InputError(f"schedule.json: nemesis op {f!r} cannot be replayed on a real cluster", str(d))
        at = int(e["at"])
        if source_backend == "sim" and at >= end:
            continue  # the simulator never fires these either
        package = e.get("package") or NEMESIS_PACKAGES[f]
        events.append({"at": at, "package": package, "f": f, "value": e.get("value")})
    ops = []
    for o in doc["ops"]:
        if not 0 <= int(o["client"]) < concurrency:
            raise InputError(f"schedule.json: op for client {o['client']}, but concurrency is {concurrency}", str(d))
        if o.get("node") not in names and not (queue and o.get("node") is None):
            raise InputError(f"schedule.json: op on node {o.get('node')!r}, not one of {', '.join(names)}", str(d))
        at = int(o["at"])
        if at >= end:
            continue
        ops.append(
            {
                "at": at,
                "client": int(o["client"]),
                "f": o["f"],
                "key": o["key"],
                "value": o.get("value"),
                "node": o.get("node"),
            }
        )
    events.sort(key=lambda e: e["at"])  # stable: the order they fired in
    ops.sort(key=lambda o: o["at"])
    history = _read_events(d / "history.jsonl")
    if from_main_start:
        history = _from_origin(history, doc["ops"], doc["nemesis"])
    order(ops, events, history, concurrency)
    for item in ops + events:
        item["at"] = max(0, item["at"] - shift)
    # a real run heals (and sets up) every package its test had, faults or not
    nemeses = sorted(
        {e["package"] for e in events}
        | (set(spec.nemeses) | set(test.get("nemesis") or []) if source_backend != "sim" else set())
    )
    results_path = d / "results.json"
    results = _read_json(results_path) if results_path.exists() else {}
    stored = bad_anomalies(results) if results else []  # the anomalies that failed it, not those its test allowed
    return Plan(
        source=d,
        source_backend=source_backend,
        spec=spec,
        time_limit=max(0.1, (end - shift) / SECOND),  # the heal starts when it did in the stored run
        nemeses=nemeses,
        events=events,
        ops=ops,
        shift_ns=shift,
        leader=leader,
        partition_leaders=first_partition_leaders(_read_events(d / "events.jsonl")) if queue else {},
        assignment=stored_assignment(doc, names, d) if queue and source_backend == "sim" else {},
        failing_key=failing_key(results),
        stored_anomalies=list(stored),
        notes=notes,
        main_start=int(doc["main-start"]) if source_backend == "sim" and "main-start" in doc else None,
    )


def _from_origin(
    history: list[dict[str, Any]], ops: Sequence[Mapping[str, Any]], nemesis: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """A simulator history with its times counted from the main phase's start, as its schedule's are.

    The start is not stored; the first scheduled op (or fault) was recorded in the history at that start
    plus its `at`, so the difference of the two is the start."""
    first_op = min((int(o["at"]) for o in ops), default=None)
    first_invoke = min(
        (int(r["time"]) for r in history if isinstance(r.get("process"), int) and r.get("type") == "invoke"),
        default=None,
    )
    origin = 0
    if first_op is not None and first_invoke is not None:
        origin = first_invoke - first_op
    else:
        first_event = min((int(e["at"]) for e in nemesis), default=None)
        first_info = min((int(r["time"]) for r in history if r.get("process") == "nemesis"), default=None)
        if first_event is not None and first_info is not None:
            origin = first_info - first_event
    return [{**r, "time": int(r.get("time", 0)) - origin} for r in history]


def rename(value: Any, mapping: Mapping[str, str]) -> Any:
    """A schedule value with node names mapped (lists, grudges, clock changes; `leader`/`all` kept)."""
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [rename(v, mapping) for v in value]
    if isinstance(value, dict):
        return {mapping.get(k, k): (v if k == "kind" else rename(v, mapping)) for k, v in value.items()}
    return value


def first_partition_leaders(events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each partition's leader at its lowest leader epoch: who led it when the topic was created (node clocks
    may be skewed, so the epoch, not the time, tells which came first)."""
    first: dict[str, tuple[int, str]] = {}
    for e in events:
        if e.get("type") != "partition-leader" or e.get("leader") is None:
            continue
        part, epoch = str(e["partition"]), int(e.get("leader_epoch", 0))
        if part not in first or epoch < first[part][0]:
            first[part] = (epoch, str(e["leader"]))
    return {part: leader for part, (_, leader) in sorted(first.items())}


def stored_assignment(doc: Mapping[str, Any], names: Sequence[str], d: Path) -> dict[str, list[str]]:
    """schedule.json's "assignment" of the workload's topic (partition -> replica nodes, leader first): not the
    brokers' internal topics' (`__transaction_state`, `__consumer_offsets`, which the brokers place themselves);
    {} for runs stored before it."""
    raw = doc.get("assignment") or {}
    if isinstance(raw, dict):
        raw = {part: replicas for part, replicas in raw.items() if not str(part).startswith("__")}
    if not isinstance(raw, dict):
        raise InputError("schedule.json: assignment is not an object", str(d))
    out: dict[str, list[str]] = {}
    for part, replicas in raw.items():
        if not isinstance(replicas, list) or not replicas or any(r not in names for r in replicas):
            raise InputError(f"schedule.json: assignment of {part}: {replicas!r} is not a list of nodes", str(d))
        out[str(part)] = [str(r) for r in replicas]
    return out


def controller_renaming(plan: Plan, leader: str | None) -> dict[str, str]:
    """For a stored run with an assignment: the renaming that makes the fresh cluster's controller (quorum
    leader) play the stored controller's part, swapping the two and moving nothing else. The topic is then
    created with the stored assignment renamed through it (:func:`renamed_assignment`), so every replica
    stands where it stood relative to the controller, whatever the fresh cluster's election chose."""
    if plan.leader is None or leader is None or plan.leader == leader:
        return {}
    return {plan.leader: leader, leader: plan.leader}


def renamed_assignment(plan: Plan, mapping: Mapping[str, str]) -> dict[int, list[str]]:
    """The stored assignment with nodes renamed, by partition index (t0-2 -> 2), for the workload's topic."""
    return {int(part.rsplit("-", 1)[1]): [mapping.get(n, n) for n in rs] for part, rs in plan.assignment.items()}


def renaming(plan: Plan, leader: str | None, partition_leaders: Mapping[str, str] | None = None) -> dict[str, str]:
    """The renaming of the stored run's nodes that makes the fresh cluster's leaders stand where the stored
    run's stood: on a queue run first the leader of the partition that broke, then those of the partitions
    the schedule uses, then the quorum (controller) leader, then the other partitions; on a register run
    the quorum leader. Of the best renamings the one that moves the fewest nodes (nothing if none helps)."""
    fresh = dict(partition_leaders or {})
    used = {o["key"] for o in plan.ops if o.get("key") is not None}
    names = plan.names
    rf = int(getattr(plan.spec.workload_options, "replication_factor", 0))
    wants: list[tuple[int, str, str]] = []  # (weight, stored node, fresh node)
    for part, stored in plan.partition_leaders.items():
        if part in fresh:
            weight = 1000 if part == plan.failing_key else 100 if part in used else 1
            wants.append((weight, stored, fresh[part]))
            # its followers too: a pause of "the leader and one follower" must not become "the leader and a
            # node that holds no replica of it"
            followers = 400 if part == plan.failing_key else 40 if part in used else 0
            if followers and stored in names and fresh[part] in names:
                wants += [
                    (followers, a, b) for a, b in zip(replicas(names, stored, rf), replicas(names, fresh[part], rf))
                ]
    if plan.leader is not None and leader is not None:
        wants.append((10, plan.leader, leader))
    best: tuple[int, int] | None = None
    chosen: dict[str, str] = {}
    for perm in itertools.permutations(names):
        mapping = dict(zip(names, perm))
        score = sum(w for w, a, b in wants if mapping.get(a) == b)
        moved = sum(a != b for a, b in mapping.items())
        if best is None or (score, -moved) > best:
            best, chosen = (score, -moved), mapping
    return {a: b for a, b in chosen.items() if a != b}


def replicas(names: Sequence[str], leader: str, rf: int) -> list[str]:
    """A partition's followers, given its first leader: the controller assigns a new topic's partition to `rf`
    consecutive live brokers by id, the first of them its leader (nodes.broker.controller._auto_assignment;
    every broker is live when the queue workload creates its topic)."""
    i = list(names).index(leader)
    return [names[(i + j) % len(names)] for j in range(1, max(1, rf))]


def order(
    ops: list[dict[str, Any]], events: list[dict[str, Any]], history: Sequence[Mapping[str, Any]], concurrency: int
) -> None:
    """Give every op and fault event a `seq` and `after`: the items of other lanes (client slots, the nemesis)
    that had completed in the stored run before it started, as far as the stored history tells.

    Client ops are matched to their history entries by (invoke time, slot, f, key); fault events to the
    nemesis entries in order (a simulated fault completes when it fires).
    """
    done_at: dict[tuple[Any, ...], int] = {}
    open_: dict[Any, tuple[Any, ...]] = {}
    nemesis_times: list[int] = []
    for row in history:
        proc, typ = row.get("process"), row.get("type")
        if proc == "nemesis":
            nemesis_times.append(int(row.get("time", 0)))
        elif isinstance(proc, int) and typ == "invoke":
            open_[proc] = (int(row["time"]), proc % concurrency, row.get("f"), row.get("key"))
        elif isinstance(proc, int) and proc in open_:
            done_at[open_.pop(proc)] = int(row["time"])
    items: list[tuple[Any, dict[str, Any], int | None]] = []  # (lane, item, completion time)
    for i, o in enumerate(ops):
        o["seq"] = i
        items.append((o["client"], o, done_at.get((o["at"], o["client"], o["f"], o["key"]))))
    for k, e in enumerate(events):
        e["seq"] = len(ops) + k
        items.append(("nemesis", e, nemesis_times[k] if k < len(nemesis_times) else e["at"]))
    lanes: dict[Any, list[tuple[int, int]]] = {}  # lane -> [(completion, seq)] in lane order
    for lane, item, done in sorted(items, key=lambda x: x[1]["at"]):
        if done is not None:
            lanes.setdefault(lane, []).append((done, item["seq"]))
    for lane, item, _ in items:
        after = []
        for other, finished in lanes.items():
            if other == lane:
                continue  # a lane runs one item at a time anyway
            before = [seq for done, seq in finished if done < item["at"]]
            if before:
                after.append(before[-1])  # a lane's items complete in order: its last one is enough
        item["after"] = sorted(after)


def replay_generator(plan: Plan, mapping: Mapping[str, str] | None = None, ordered: bool = True) -> gen.Generator:
    """The main phase of a replay: each client slot's ops at their times (on their nodes), the fault
    events at theirs, and nothing else until the time limit has passed (so healing starts on time).

    `ordered`: an item also waits for what had completed before it started in the stored run, so the
    stored happens-before order survives slower operations (the phase may then run past the limit);
    otherwise items are driven by time alone and whatever is not started by the limit is dropped.
    """
    mapping = mapping or {}
    lanes: dict[Any, list[dict[str, Any]]] = {}
    for i, o in enumerate(plan.ops):
        item = {"seq": i, **o, "node": rename(o["node"], mapping)}
        lanes.setdefault(o["client"], []).append(item)
    for k, e in enumerate(plan.events):
        lanes.setdefault(gen.NEMESIS, []).append({"seq": len(plan.ops) + k, **e, "value": rename(e["value"], mapping)})
    limit = int(plan.time_limit * SECOND)
    kept = {lane: tuple(i for i in items if i["at"] < limit) for lane, items in lanes.items()}
    main = gen.any_of(gen.sleep(plan.time_limit), gen.Plan(kept, limit, ordered))
    if plan.source_backend != "sim":
        return main
    # the simulator heals at the time limit with client operations still in flight (they complete after the
    # heal, as a read that waited on an isolated leader does); the real runner's heal phase would first wait
    # for them, up to the client timeout, and leave the faults in force that long: heal at the limit here
    # (a package's faults may be of another kind: the clock package's leader fault is a partition)
    packages = {*plan.nemeses, *(NEMESIS_PACKAGES[e["f"]] for e in plan.events if e["f"] in NEMESIS_PACKAGES)}
    return gen.Seq([main, gen.nemesis(heal_events(packages))])  # not phases: those wait for every thread


def heal_events(packages: Iterable[str]) -> list[dict[str, Any]]:
    """The events that heal every package in `packages`, in the nemesis' heal order (network, processes,
    clocks), as the simulator heals at the end of its main phase."""
    wanted = set(packages)
    return [{"f": HEAL[p], "value": None} for p in HEAL_ORDER if p in wanted]


def reproduced(results: Mapping[str, Any], target: frozenset[str]) -> bool:
    """An invalid verdict sharing an anomaly type with the target class (any invalid one if the class is empty)."""
    if results.get("valid") is not False:
        return False
    return not target or bool(target & set(results.get("anomaly-types", [])))
