"""`kraftwerk shrink RUN_DIR`: find a smaller schedule that still fails the same way.

A failing run's schedule (fault events and client operations) is cut down in the
simulator, keeping only candidates that still give an invalid verdict sharing an
anomaly type with the original ("the same anomaly class"):

0. start smaller: fresh short runs (fewest nodes, two or three clients, a few
   seconds of frequent faults) with the same bugs, seeded from the run's seed;
   the smallest that fails the same way, if smaller, replaces the original
   (many failures need only a few faults, and a small start shrinks far more
   easily than a long run whose timing every deletion disturbs);
1. cut the run short: the shortest main phase that still fails (bisection);
2. drop whole groups at once: every client operation, every key but the one
   that broke, one key at a time, one client at a time;
3. delta debugging: chunks of fault groups and of operations (in time order),
   then chunks of each client's and of each key's operations — non-contiguous
   in time, which gets past schedules where no single operation can go;
4. fault ends: drop the stop of one fault at a time (it then lasts until the
   final heal);
5. Hypothesis search: each fault (a start with its stop), each operation, the
   cluster size and the number of clients become *choices* that Hypothesis
   shrinks — so the result is built from choices that shrink, not one opaque
   seed. A budget bounds the whole search; what is left of it shrinks up to
   three more fresh starts (greedy passes end in different places), and the
   smallest result of all is kept; if no short fresh run failed the same way and budget is
   left, longer fresh starts (15 s, and the run's own shape) are shrunk too.

The budget is a number of simulator runs (`--max-runs N`), a wall time (`--budget`), or
both (whichever ends first). Every step of the search is deterministic, so with a run
budget alone the same run gives the same minimal schedule on any machine, however
loaded; a wall-time budget ends wherever the machine's speed has got it to.

Both workloads shrink the same way. Register operations name their key and
node; queue operations are `assign`, `send` (a key and a unique value) and
`poll` (a key), and the simulated consumer skips a poll of a partition it is
not assigned, so any subset of a queue schedule is still a well-formed run.

With `--robust K` a candidate counts only if it fails under K timings (the run's
seed and K-1 others that keep the schedule but draw other message latencies and
timeouts, and let each fault land up to 100 ms late, as real faults do): a slower
search whose result depends less on one exact interleaving, which is what a
replay on a real cluster needs. `--robust M/K` asks for M of the K timings (its
own among them): a failure that comes back one time in four under the
simulator's timings often comes back within a few tries on a real cluster, and
schedules that fail under every timing tried are rarely small.

The minimal run is written to RUN_DIR/minimal/ (schedule.json, history, events,
results, report.html) with a pytest file that reproduces it as a regression test.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from checkers.verdict import failing_key
from harness.core.spec import SEED_SPACE, SpecError, TestSpec, seed_after
from harness.core.streams import stream
from harness.sim.cluster import SimPlan
from harness.sim.runs import Checked, simulate

Candidate = tuple[TestSpec, SimPlan]  # a run to try: the test (size, seed, bugs) and its schedule

ROBUST_SEED_STEP = 7919  # --robust: the other timings' seeds are the run's seed plus multiples of this
# --robust: in the other timings each fault also lands up to this much later than scheduled, as on real
# clusters (docker, measured under load: invoked 5-15 ms late, then 75-80 ms to apply a partition)
FAULT_LATE_NS = 100_000_000
# --robust: in the other timings the main phase also starts up to this much after the cluster is ready (a real
# run polls every 100 ms for a leader known to all, a replay of a lazy-flush run waits up to a second for the
# flush phase; the simulator starts within a message of the election), so a schedule that needs what the
# cluster had not yet flushed or timed out at that first instant is not kept
READY_LATE_NS = 1_000_000_000
# --robust: and a killed node serves again this long after its start (docker, 2026-11-26: 0.35-0.42 s from
# the heal's start to the client port answering at load 1, 0.8-1.03 s at load 7; the simulator restarts at
# once), so a schedule that needs the restarted node to act within that time of the heal is not kept
RESTART_NS = (300_000_000, 1_200_000_000)
STOP_ENDS = {
    "stop-partition": "start-partition",
    "start": "kill",
    "resume": "pause",
    "reset-clock": "bump-clock",
    "stop-packet": "start-packet",
    "stop-disk": "start-disk",
}


def other_timing(candidate: Candidate, k: int) -> Candidate:
    """Timing `k` of a candidate for --robust (0: its own): another seed, so other message latencies and
    timeouts; each fault of its schedule landing a random 0-100 ms later (in order, before the time
    limit), as faults do on a real cluster; the main phase starting 0-1 s after the cluster is ready and
    killed nodes serving 0.3-1.2 s after their start, as on docker. The client operations keep their times."""
    spec, plan = candidate
    if k == 0:
        return candidate
    seed = seed_after(spec.seed, k * ROBUST_SEED_STEP)
    cluster = stream("robust-cluster", seed)
    plan = replace(
        plan,
        ready_delay=int(cluster.random() * READY_LATE_NS),
        restart_delay=RESTART_NS[0] + int(cluster.random() * (RESTART_NS[1] - RESTART_NS[0])),
    )
    if not plan.schedule:
        return replace(spec, seed=seed), plan
    rng = stream("robust-faults", seed)
    end = int(spec.time_limit * 1_000_000_000) - 1
    late, previous = [], 0
    for event in plan.schedule:
        at = int(event["at"])
        if at < end:
            at = min(end, max(previous, at + int(rng.random() * FAULT_LATE_NS)))
        previous = at
        late.append({**event, "at": at})
    return replace(spec, seed=seed), replace(plan, schedule=late)


def as_stored(checked: Checked) -> Candidate:
    """The candidate as its run's schedule.json stores it: its fault events and client operations pinned (a
    fresh run's are drawn from its seed, so another timing's seed would otherwise draw other faults and
    operations), which is what a replay drives; `--robust` tries the other timings of this."""
    return checked.spec, replace(checked.plan, schedule=checked.sim.schedule, ops=checked.sim.ops)


def parse_robust(value: Any) -> tuple[int, int]:
    """`--robust`: 'K' (every one of K timings) or 'M/K' (at least M of them) → (M, K); ValueError if off."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:/\s*(\d+)\s*)?", str(value))
    if not m:
        raise ValueError(f"--robust takes K or M/K (e.g. 3 or 2/8), got {value!r}")
    k = int(m.group(2) or m.group(1))
    need = int(m.group(1))
    if not 1 <= k <= 20:
        raise ValueError(f"--robust must be between 1 and 20 timings, got {value}")
    if not 1 <= need <= k:
        raise ValueError(f"--robust M/K needs 1 ≤ M ≤ K, got {value}")
    return need, k


def parse_max_runs(value: Any) -> int:
    """`--max-runs N`: a positive number of simulator runs; ValueError naming the option if not."""
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"--max-runs takes a number of simulator runs, got {value!r}") from None
    if n < 1:
        raise ValueError(f"--max-runs must be at least 1, got {n}")
    return n


def parse_budget(text: str) -> float:
    """'90s', '5m', '1h' or plain seconds → seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m:
        raise ValueError(f"bad budget {text!r} (use e.g. 90s, 5m, 1h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def fault_groups(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Pair each fault start with the stop that ends it (same package); a start never stopped stands alone."""
    groups: list[list[dict[str, Any]]] = []
    open_by_package: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(events, key=lambda e: e["at"]):
        if e["f"] in STOP_ENDS:  # a stop closes the open start of its package
            group = open_by_package.pop(e["package"], None)
            if group is None:
                groups.append([e])
            else:
                group.append(e)
        else:
            group = [e]
            groups.append(group)
            open_by_package[e["package"]] = group
    return groups


def _restrict(value: Any, names: set[str]) -> Any:
    """A fault's value with nodes outside `names` removed (None if nothing is left)."""
    if value is None or value == "leader":
        return value
    if isinstance(value, list):
        kept = [n for n in value if n in names]
        return kept or None
    if isinstance(value, dict) and "behaviours" in value:  # packet faults: on the traffic of the kept nodes
        if "nodes" not in value:
            return value
        nodes = [n for n in value["nodes"] if n in names]
        return {**value, "nodes": nodes} if nodes else None
    if isinstance(value, dict) and "kind" in value:
        if "grudge" not in value:
            return value
        grudge = {k: [n for n in v if n in names] for k, v in value["grudge"].items() if k in names}
        grudge = {k: v for k, v in grudge.items() if v}
        return {**value, "grudge": grudge} if grudge else None
    if isinstance(value, dict):
        kept_d = {k: v for k, v in value.items() if k in names}
        return kept_d or None
    return value


def _runs_on(spec: TestSpec, nodes: int) -> bool:
    """Whether `spec` is a test on `nodes` nodes (its workload's and its shape's needs met)."""
    try:
        replace(spec, nodes=nodes)
    except SpecError:
        return False
    return True


def build(
    base: Candidate,
    groups: list[list[dict[str, Any]]],
    ops: list[dict[str, Any]],
    nodes: int,
    time_limit: float,
) -> Candidate:
    """A candidate from `base`: the chosen fault groups and ops, on `nodes` nodes, clients renumbered."""
    names = {f"n{i}" for i in range(1, nodes + 1)}
    events = []
    for group in groups:
        start = group[0]
        value = _restrict(start["value"], names)
        if value is None:
            continue
        events.append({**start, "value": value})
        events.extend(group[1:])
    events.sort(key=lambda e: e["at"])
    clients = sorted({op["client"] for op in ops})
    slot = {c: i for i, c in enumerate(clients)}
    new_ops = []
    for op in ops:
        new_op = {**op, "client": slot[op["client"]]}
        node = op.get("node")  # register ops name their node; queue clients find partition leaders
        if node is not None and node not in names:
            new_op["node"] = f"n{(int(node[1:]) - 1) % nodes + 1}"
        new_ops.append(new_op)
    spec, plan = base
    return (
        replace(
            spec,
            nodes=nodes,
            concurrency=max(1, len(clients)),
            time_limit=time_limit,
            nemeses=tuple(sorted({e["package"] for e in events})),
        ),
        replace(plan, schedule=events, ops=new_ops),
    )


def _indices(examples: list[Any]) -> list[int]:
    """Every history index an anomaly example names (`index`, `read-index`, … at any depth)."""
    out: list[int] = []
    for ex in examples:
        if isinstance(ex, dict):
            for k, v in ex.items():
                if isinstance(v, int) and not isinstance(v, bool) and (k == "index" or k.endswith("-index")):
                    out.append(v)
                elif isinstance(v, (list, dict)):
                    out.extend(_indices(v if isinstance(v, list) else [v]))
        elif isinstance(ex, list):
            out.extend(_indices(ex))
    return out


def _key_order(key: str) -> tuple[int, str]:
    return (len(key), key)


class Shrinker:
    def __init__(
        self,
        original: Checked,
        budget_s: float | None,
        log: Any = None,
        robust: int = 1,
        observable: bool = False,
        robust_min: int | None = None,
        max_runs: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        status: Callable[[str], None] | None = None,
    ) -> None:
        """`budget_s` seconds of wall time (by `clock`) and `max_runs` simulator runs bound the search
        (None: no bound of that kind; at least one must be given). `log` gets messages; `status` (default:
        `log`) the progress line: the pass under way, the smallest schedule so far and the runs used."""
        if budget_s is None and max_runs is None:
            raise ValueError("a shrink needs a budget: seconds, runs or both")
        self.original = original
        self.robust = robust  # timings tried per candidate: its seed and robust-1 others
        self.robust_min = robust if robust_min is None else robust_min  # how many of them must fail
        # observable: only anomalies a real cluster's checkers can report count (not simulator invariants)
        self.target = original.observable if observable else original.anomalies
        self.clock = clock
        self.deadline = clock() + budget_s if budget_s is not None else float("inf")
        self.max_runs = max_runs
        self.runs = 0
        self.current = original  # the run the passes are shrinking
        self.best = original  # the smallest failing run seen from any start
        self.log = log or (lambda msg: None)
        self.status = status or self.log
        self._last_log = 0.0
        self._started = time.monotonic()
        self.step = "fresh starts"  # the pass under way, for the progress lines
        spec = original.spec
        # a quorum needs three nodes to lose one; a test may need more (a topic: its replication factor, on the
        # brokers its --controllers leave)
        self.fewest_nodes = next((n for n in range(3, spec.nodes + 1) if _runs_on(spec, n)), spec.nodes)

    def size(self, c: Checked) -> tuple[int, int, int, int]:
        """Fault events, operations, nodes, clients (what is reported)."""
        return (len(c.plan.schedule or []), len(c.plan.ops or []), c.spec.nodes, c.spec.concurrency)

    @property
    def now(self) -> Candidate:
        """The run the passes are shrinking, as a candidate."""
        return self.current.spec, self.current.plan

    def with_plan(self, **changes: Any) -> Candidate:
        """The current run with its schedule changed (`ops=…`, `schedule=…`)."""
        return self.current.spec, replace(self.current.plan, **changes)

    def smaller(self, a: Checked, b: Checked) -> bool:
        """Fewer events in all (faults + operations) wins, then fewer faults, nodes, clients."""
        fa, oa, na, ca = self.size(a)
        fb, ob, nb, cb = self.size(b)
        return (fa + oa, fa, na, ca) < (fb + ob, fb, nb, cb)

    def out_of_time(self) -> bool:
        """The budget is spent: its wall time has passed, or it made its number of simulator runs."""
        return (self.max_runs is not None and self.runs >= self.max_runs) or self.clock() > self.deadline

    def same_way(self, checked: Checked) -> bool:
        """Invalid with an anomaly type of the original's class."""
        return checked.valid is False and bool(checked.anomalies & self.target)

    def fails(self, candidate: Candidate) -> Checked | None:
        """The candidate's run if it fails the same way under its own seed and under at least `robust_min`
        of `robust` timings in all (its own, then seeds that keep the schedule but draw other message
        latencies and timeouts); stops as soon as the count is reached or out of reach."""
        spec, plan = candidate
        self.runs += 1
        checked = simulate(spec, plan, check_time_limit=30)
        if not self.same_way(checked):
            return None
        hits = 1
        stored = as_stored(checked)
        for k in range(1, self.robust):
            if hits >= self.robust_min:
                break
            if hits + self.robust - k < self.robust_min:
                return None
            self.runs += 1
            other = simulate(*other_timing(stored, k), check_time_limit=30)
            hits += self.same_way(other)
        return checked if hits >= self.robust_min else None

    def timings_failing(self, candidate: Candidate) -> int:
        """Of the `robust` timings (its own seed and the others `fails` tries), how many fail the same way."""
        return sum(
            self.same_way(simulate(*other_timing(candidate, k), check_time_limit=30)) for k in range(self.robust)
        )

    def attempt(self, candidate: Candidate) -> Checked | None:
        """Run a candidate (none once the budget is spent); keep and return it if it fails the same way."""
        if self.out_of_time():
            return None
        return self.keep(candidate)

    def keep(self, candidate: Candidate) -> Checked | None:
        """Run a candidate, budget or not; keep and return it if it fails the same way."""
        checked = self.fails(candidate)
        if checked is not None:
            if self.smaller(checked, self.current):
                self.current = checked
                if self.smaller(checked, self.best):
                    self.best = checked
                    self.progress()
            return checked
        return None

    def progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_log >= (2.0 if self.status is self.log else 0.25):
            self._last_log = now
            f, o, n, c = self.size(self.best)
            runs = f"{self.runs} of {self.max_runs}" if self.max_runs is not None else str(self.runs)
            self.status(
                f"  [{self.step}] now {f} fault events, {o} operations, {n} nodes, {c} clients "
                f"(after {runs} runs, {now - self._started:.0f} s)"
            )

    def ddmin(self, coarse: bool = False) -> None:
        """Delete chunks of fault groups, then of operations, halving the chunk size (delta debugging).

        `coarse` stops the operations at chunks of 1/32 of them: a cheap first pass, after which
        faults go more easily (and runs with fewer operations are faster).
        """
        spec, plan = self.now
        groups = fault_groups(plan.schedule or [])
        if plan.ops and not self.out_of_time():
            # with fewer faults than when first tried, the failure may need no operation at all
            self.attempt(build(self.now, groups, [], spec.nodes, spec.time_limit))
            groups = fault_groups(self.current.plan.schedule or [])

        def without(rest: list[list[dict[str, Any]]]) -> Candidate:
            c = self.current
            return build(self.now, rest, list(c.plan.ops or []), c.spec.nodes, c.spec.time_limit)

        self._ddmin(groups, without)
        ops = list(self.current.plan.ops or [])
        smallest = max(2, len(ops) // 32) if coarse else 1
        self._ddmin(ops, lambda rest: self.with_plan(ops=rest), smallest=smallest)

    def _ddmin(self, items: list[Any], candidate: Callable[[list[Any]], Candidate], smallest: int = 1) -> None:
        """Delta debugging: try deleting each chunk of `items`, halving the chunk size down to `smallest`."""
        size = max(1, len(items) // 2)
        while items and size >= smallest and not self.out_of_time():
            i = 0
            while i < len(items) and not self.out_of_time():
                rest = items[:i] + items[i + size :]
                if self.attempt(candidate(rest)):
                    items = rest
                else:
                    i += size
            if size == 1:
                return
            size = max(1, size // 2)

    def ddmin_groups(self) -> None:
        """Whole clients; chunks of one client's, then of one key's operations; then plain ddmin to single ones."""
        self.drop_clients()
        self.ddmin_per("client")
        self.ddmin_per("key")
        self.ddmin()

    def ddmin_per(self, field: str) -> None:
        """Delta debugging within each client's (or each key's) operations, the others kept as they are.

        Operations of one client (or on one key) hang together far more than operations close in
        time, so chunks cut along them go where chunks cut along time alone do not.
        """
        for value in sorted({o.get(field) for o in self.current.plan.ops or []}, key=str):
            if self.out_of_time():
                return
            if value is None:
                continue  # assigns (no key): their polls go with them anyway
            base = list(self.current.plan.ops or [])
            mine = [j for j, o in enumerate(base) if o.get(field) == value]
            others = [j for j, o in enumerate(base) if o.get(field) != value]

            def candidate(rest: list[int], base: list[dict[str, Any]] = base, others: list[int] = others) -> Candidate:
                return self.with_plan(ops=[base[j] for j in sorted(others + rest)])

            self._ddmin(mine, candidate, smallest=2)

    def fresh_starts(self, share: float, tries: int, longer: bool = False) -> list[Checked]:
        """Fresh small runs seeded from the run's seed (same workload, bugs and fault packages) that fail
        the same way, driven again from their realised schedules, smallest first. Uses at most `share`
        of the budget left (time and runs) and `tries` seeds, each tried at three shapes (fewest nodes, two or three
        clients, a few seconds of frequent faults) or, `longer`, at 15 s with three clients and at the
        run's own shape for 30 s (a failure that needs a broker fenced after its session expired, then a
        produce to it, seldom fits in 6 s; other runs of the original's shape end in other places)."""
        spec, plan = self.original.spec, self.original.plan
        stop = self.clock() + share * max(0.0, self.deadline - self.clock())
        last_run = self.runs + share * (self.max_runs - self.runs) if self.max_runs is not None else float("inf")
        rng = stream("start-longer" if longer else "start-smaller", spec.seed)
        few = self.fewest_nodes
        shapes = [(few, 2, 4.0, 1.0), (few, 3, 6.0, 1.5), (max(few, min(5, spec.nodes)), 3, 6.0, 1.5)]
        if longer:
            shapes = [(max(few, min(5, spec.nodes)), 3, 15.0, 2.5), (spec.nodes, spec.concurrency, 30.0, spec.interval)]
        found: list[Checked] = []
        for _ in range(tries):
            seed = rng.randrange(SEED_SPACE)
            for nodes, clients, seconds, interval in shapes:
                if self.clock() > stop or self.runs >= last_run or self.out_of_time():
                    break
                fresh = replace(
                    spec,
                    seed=seed,
                    nodes=nodes,
                    concurrency=clients,
                    time_limit=min(seconds, spec.time_limit),
                    interval=interval,
                )
                drawn = replace(plan, schedule=None, ops=None)
                self.runs += 1
                run = simulate(fresh, drawn, check_time_limit=30)
                if self.same_way(run):
                    # the realised schedule, driven again without the random source
                    again = self.fails((fresh, replace(drawn, schedule=list(run.sim.schedule), ops=list(run.sim.ops))))
                    if again is not None:
                        found.append(again)
        return sorted(found, key=lambda c: (sum(self.size(c)[:2]), self.size(c)))

    def shrink_from(self, start: Checked) -> None:
        """Every pass below, from `start`, until none makes progress (or the budget ends)."""
        self.current = start
        if self.smaller(start, self.best):
            self.best = start
            self.progress(force=True)
        self.step = "cut short"
        self.cut_short()
        self.step = "drop fault groups"
        self.drop_groups()
        self.step = "delete chunks (coarse)"
        self.until_fixpoint(lambda: self.ddmin(coarse=True))
        self.step = "cut short"
        self.cut_short()  # with fewer faults and operations the failure may show sooner
        self.step = "delete groups, fault ends"
        self.until_fixpoint(lambda: (self.ddmin_groups(), self.drop_stops()))
        if not self.out_of_time():
            self.step = "search (Hypothesis), delete chunks, fault ends"
            self.until_fixpoint(lambda: (self.hypothesis_search(), self.ddmin(), self.drop_stops()))

    def drop_stops(self) -> None:
        """Drop the stop of one fault at a time: the fault then lasts until the final heal."""
        i = 0
        while not self.out_of_time():
            events = list(self.current.plan.schedule or [])
            stops = [j for j, e in enumerate(events) if e["f"] in STOP_ENDS]
            if i >= len(stops):
                return
            rest = events[: stops[i]] + events[stops[i] + 1 :]
            if not self.attempt(self.with_plan(schedule=rest)):
                i += 1

    def first_anomaly_time(self) -> int | None:
        """When the failure first showed (virtual ns from the start of the main phase), if a checker can tell."""
        results = self.current.results
        times = [v["time"] for v in results.get("invariants", {}).get("violations", []) if "time" in v]
        ops = self.current.sim.recorder.ops
        indices = []
        op = (results.get("linearizable", {}).get("failure") or {}).get("op")
        if op is not None:
            indices.append(op.get("completed-index", op.get("index")))
        for found in results.get("queue", {}).get("anomalies", {}).values():
            # the first example of each anomaly: the latest op it names is when it could be seen
            seen = _indices(found.get("examples", [])[:1])
            if seen:
                indices.append(max(seen))
        for i in indices:
            if i is not None and i < len(ops) and ops[i].time is not None:
                times.append(ops[i].time)
        return min(times) - self.current.main_start if times else None

    def _cut(self, seconds: float) -> Candidate:
        spec, plan = self.now
        end = int(seconds * 1e9)
        return (
            replace(spec, time_limit=seconds),
            replace(
                plan,
                schedule=[e for e in plan.schedule or [] if e["at"] < end],
                ops=[o for o in plan.ops or [] if o["at"] < end],
            ),
        )

    def cut_short(self) -> None:
        first = self.first_anomaly_time()
        # the failure showed at `first`: try ending the run just after it
        early = first is not None and first / 1e9 + 1.0 < self.current.spec.time_limit
        if early:
            self.attempt(self._cut(max(0.5, first / 1e9 + 1.0)))  # type: ignore[operator]
        lo, hi = 0.0, self.current.spec.time_limit
        while hi - lo > 0.25 and not self.out_of_time():
            mid = (lo + hi) / 2
            if self.attempt(self._cut(mid)):
                hi = mid
            else:
                lo = mid

    def drop_groups(self) -> None:
        if self.out_of_time():
            return
        spec, plan = self.now
        if spec.nodes > self.fewest_nodes:
            groups = fault_groups(plan.schedule or [])
            self.attempt(build(self.now, groups, list(plan.ops or []), self.fewest_nodes, spec.time_limit))
            spec, plan = self.now
        if self.attempt(build(self.now, fault_groups(plan.schedule or []), [], spec.nodes, spec.time_limit)):
            return
        key = failing_key(self.current.results)
        if key is not None:
            # only the key that broke (a queue client's assigns stay: its polls need them)
            self.attempt((spec, replace(plan, ops=[o for o in plan.ops or [] if o.get("key") in (key, None)])))
        # one key at a time: keys are independent registers / partitions, so whole keys often go
        for k in sorted({o["key"] for o in self.current.plan.ops or [] if o.get("key") is not None}, key=_key_order):
            if self.out_of_time():
                return
            ops = self.current.plan.ops or []
            rest = [o for o in ops if o.get("key") != k]
            if len(rest) < len(ops):
                self.attempt(self.with_plan(ops=rest))

    def drop_clients(self) -> None:
        """Drop every operation of one client at a time, with the rest renumbered or (failing that) not."""
        i = 0
        while not self.out_of_time():
            spec, plan = self.now
            clients = sorted({o["client"] for o in plan.ops or []})
            if i >= len(clients):
                break
            rest = [o for o in plan.ops or [] if o["client"] != clients[i]]
            groups = fault_groups(plan.schedule or [])
            # renumbering gives the remaining clients other random streams: try keeping them too
            if not (
                self.attempt(build((spec, plan), groups, rest, spec.nodes, spec.time_limit))
                or self.attempt((spec, replace(plan, ops=rest)))
            ):
                i += 1
        self.compact_clients()

    def compact_clients(self) -> None:
        """Renumber the clients that still have operations, so idle ones go."""
        spec, plan = self.now
        used = len({o["client"] for o in plan.ops or []})
        if used < spec.concurrency and not self.out_of_time():
            self.attempt(
                build(
                    (spec, plan), fault_groups(plan.schedule or []), list(plan.ops or []), spec.nodes, spec.time_limit
                )
            )

    def hypothesis_search(self) -> None:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import strategies as st

        base = self.now
        spec, plan = base
        groups = fault_groups(plan.schedule or [])
        ops = list(plan.ops or [])
        node_choices = sorted({min(self.fewest_nodes, spec.nodes), spec.nodes})
        keep = st.sampled_from([False, True, True, True])

        class Stop(Exception):
            """A candidate failed the same way, or the budget ran out: either ends the search. Out of time
            must raise too: Hypothesis calls a failing example again, and a call that returned quietly
            because the budget had just run out would look to it like a flaky test."""

        @settings(
            max_examples=150,
            phases=[Phase.generate, Phase.shrink],
            database=None,
            deadline=None,
            derandomize=True,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            st.sampled_from(node_choices),
            st.lists(keep, min_size=len(groups), max_size=len(groups)),
            st.lists(keep, min_size=len(ops), max_size=len(ops)),
        )
        def search(nodes: int, keep_groups: list[bool], keep_ops: list[bool]) -> None:
            if self.out_of_time():
                raise Stop
            chosen = [g for g, k in zip(groups, keep_groups) if k]
            chosen_ops = [o for o, k in zip(ops, keep_ops) if k]
            if self.attempt(build(base, chosen, chosen_ops, nodes, spec.time_limit)):
                raise Stop

        with contextlib.suppress(Stop):
            search()

    def run(self, restarts: int = 3) -> Checked:
        self.log("looking for smaller starts: fresh short runs with the same bugs…")
        starts = self.fresh_starts(share=0.2, tries=40)
        self.log(f"  {len(starts)} fresh runs fail the same way")
        self.log("shrinking: cut short, drop groups, delete chunks, clients, keys, single operations, fault ends…")
        first = starts[0] if starts and self.smaller(starts[0], self.original) else self.original
        self.shrink_from(first)
        self.progress(force=True)
        # the passes are greedy and every deletion disturbs the timing: other starts can end smaller
        self._shrink_each([c for c in starts if c is not first][:restarts], "another fresh start")
        if not starts and not self.out_of_time():  # no short run fails this way, and time is left: longer ones
            self.log("no short fresh run failed the same way; looking for longer ones…")
            longer = [c for c in self.fresh_starts(share=0.3, tries=40, longer=True) if self.smaller(c, self.original)]
            self.log(f"  {len(longer)} longer fresh runs fail the same way")
            self._shrink_each(longer[:restarts], "a longer fresh start")
        self.current = self.best
        self.realised()
        self.progress(force=True)
        return self.best

    def _shrink_each(self, starts: list[Checked], what: str) -> None:
        """Shrink from each of `starts` while time is left; the smallest result of all stays the best."""
        for start in starts:
            if self.out_of_time():
                break
            self.log(f"shrinking {what}…")
            self.shrink_from(start)
            self.progress(force=True)

    def realised(self) -> None:
        """Keep only the operations the best run really issued (planned polls of unassigned partitions and
        operations due after the end are skipped), so the stored schedule lists exactly what ran."""
        ran = [dict(op) for op in self.current.sim.ops]
        if len(ran) < len(self.current.plan.ops or []):
            self.keep(self.with_plan(ops=ran))  # one run past the budget: the stored schedule must be what ran

    def until_fixpoint(self, step: Any) -> None:
        while not self.out_of_time():
            before = self.size(self.current)
            step()
            if self.size(self.current) == before:
                return


REGRESSION_TEST = '''"""Regression test generated by `kraftwerk shrink` from {source}.

It replays the minimal schedule in schedule.json (beside this file) in the
deterministic simulator and asserts the run has no anomaly (valid, or unknown
when the few operations kept leave some type never succeeding): it fails while
the bug that produced it is present (anomalies seen: {anomalies}) and passes
once it is gone. Seeded bugs to turn on come from KRAFTWERK_BUGS (comma-separated), e.g.
KRAFTWERK_BUGS={bugs} pytest {name}
"""

import json
import os
from pathlib import Path

from harness.sim.runs import from_schedule, simulate

SCHEDULE = Path(__file__).with_name("schedule.json")


def test_minimal_schedule_stays_valid():
    doc = json.loads(SCHEDULE.read_text())
    bugs = [b for b in os.environ.get("KRAFTWERK_BUGS", "").split(",") if b]
    checked = simulate(*from_schedule(doc, bugs=bugs))
    assert checked.valid is not False and not checked.anomalies, sorted(checked.anomalies)
'''
