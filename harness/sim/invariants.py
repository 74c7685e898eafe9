"""Safety invariants checked as the simulation runs (after every effect that could break one).

- SingleLeader: over all persisted election states and state events, one leader per epoch;
- MonotonicEpoch: a node's persisted epoch never goes down, restarts included, and a running
  node's epoch and vote in memory are the ones on disk (a vote must be durable before it counts);
- LogMatching: a record is identified by (offset, epoch): no two different records are ever
  written with the same pair, on any node (raft's log matching property);
- MonotonicHighWatermark: the high watermark of the leader with the highest epoch never goes down;
- MajorityReachedHighWatermark: when a leader commits up to hw, a majority of voters hold at least
  hw records on disk (flushed: what survives a crash);
- ConsistentCommittedData: no two nodes ever commit different records at one offset;
- ObserverNeverVotesOrLeads: a node outside the voter set (an observer) never reports a vote, a
  candidacy or leadership.

SingleLeader, MonotonicEpoch (on disk) and ConsistentCommittedData are kept by the epoch checker's
parts (`checkers.epochs`: Claims, Monotonic, CommittedLog), the ones `kraftwerk check --model epochs`
runs over events.jsonl and log dumps; here they are fed from inside the simulated nodes, online.
"""

from __future__ import annotations

from typing import Any

from checkers.epochs import Claims, CommittedLog, Monotonic

MAX_VIOLATIONS = 50
_OBSERVER_ROLES = frozenset({"unattached", "follower"})
OBSERVERS_INVARIANT = "ObserverNeverVotesOrLeads"  # listed as checked only in runs with observers


class Invariants:
    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.violations: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self._epoch = Monotonic()  # node id -> persisted epoch
        self._leaders = Claims()  # epoch -> leader id
        self._leader_hw: tuple[int, int] = (0, 0)  # (epoch, hw) of the highest-epoch leader
        self._written: dict[tuple[int, int], tuple[bytes, bool, str]] = {}  # (offset, epoch) -> content, node
        self.committed = CommittedLog()  # offset -> (node id, (epoch, payload, control))
        self._observers = False  # an observer ran: ObserverNeverVotesOrLeads was checked

    def violated(self, name: str, **detail: Any) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        if len(self.violations) < MAX_VIOLATIONS:
            self.violations.append({"invariant": name, "time": self.sim.sched.now, **detail})

    def on_persist(self, node: Any, state: Any) -> None:
        previous = self._epoch.observe(node.id, state.epoch, None)
        if previous is not None:
            self.violated("MonotonicEpoch", node=node.name, previous=previous[0], epoch=state.epoch)
        if state.leader_id is not None:
            self._leader(node, state.epoch, state.leader_id)

    def after_step(self, node: Any) -> None:
        """In-memory election state must match what is on disk once a step's effects are applied."""
        core = node.core
        if core is None:
            return
        raft = getattr(core, "raft", core)
        on_disk = node.disk.quorum_state
        disk_epoch = on_disk.epoch if on_disk is not None else 0
        if raft.epoch != disk_epoch:
            self.violated("MonotonicEpoch", node=node.name, epoch=raft.epoch, persisted_epoch=disk_epoch)
        elif raft.voted_for is not None and (on_disk is None or on_disk.voted_for != raft.voted_for):
            self.violated(
                "MonotonicEpoch",
                node=node.name,
                epoch=raft.epoch,
                voted_for=f"n{raft.voted_for}",
                persisted_voted_for=None if on_disk is None or on_disk.voted_for is None else f"n{on_disk.voted_for}",
                detail="a vote held in memory is not on disk",
            )

    def on_append(self, node: Any, records: Any) -> None:
        written = self._written
        for r in records:
            key = (r.offset, r.epoch)
            known = written.get(key)
            if known is None:
                written[key] = (r.payload, r.control, node.name)
            elif known[0] != r.payload or known[1] != r.control:
                from nodes.raft import digest

                self.violated(
                    "LogMatching",
                    node=node.name,
                    offset=r.offset,
                    epoch=r.epoch,
                    first_writer=known[2],
                    digests=[digest(type(r)(r.offset, r.epoch, known[0], known[1])), digest(r)],
                )

    def on_event(self, node: Any, data: dict[str, Any]) -> None:
        if data.get("type") != "state":
            return
        if data.get("role") == "leader":
            self._leader(node, data["epoch"], node.id)
        core = node.core
        raft = getattr(core, "raft", core)
        if not getattr(raft, "observer", False):
            return
        self._observers = True
        if data["role"] not in _OBSERVER_ROLES or data["voted_for"]:
            self.violated(
                OBSERVERS_INVARIANT,
                node=node.name,
                epoch=data["epoch"],
                role=data["role"],
                voted_for=data["voted_for"],
            )

    def _leader(self, node: Any, epoch: int, leader: int) -> None:
        if self._leaders.add(epoch, leader, leader == node.id, self.sim.sched.now):
            leaders = sorted(self._leaders.by_key[epoch])
            self.violated("SingleLeader", node=node.name, epoch=epoch, leaders=[f"n{i}" for i in leaders])

    def on_committed(self, node: Any, effect: Any) -> None:
        add = self.committed.add
        for record in effect.records:
            first = add(record.offset, node.id, (record.epoch, record.payload, record.control))
            if first is not None:
                from nodes.raft import Record, digest

                by, (epoch, payload, control) = first
                self.violated(
                    "ConsistentCommittedData",
                    node=node.name,
                    offset=record.offset,
                    first={
                        "node": f"n{by}",
                        "epoch": epoch,
                        "digest": digest(Record(record.offset, epoch, payload, control)),
                    },
                    now={"node": node.name, "epoch": record.epoch, "digest": digest(record)},
                )
        core = node.core
        raft = getattr(core, "raft", core)
        if raft is None or not raft.is_leader:
            return
        epoch, hw = raft.epoch, effect.high_watermark
        last_epoch, last_hw = self._leader_hw
        if epoch >= last_epoch:
            if hw < last_hw:
                self.violated("MonotonicHighWatermark", node=node.name, epoch=epoch, hw=hw, previous=last_hw)
            self._leader_hw = (epoch, max(hw, last_hw) if epoch == last_epoch else hw)
        voters = {i: n for i, n in self.sim.nodes.items() if i in raft.voters}
        holding = sum(1 for n in voters.values() if len(n.disk.durable) >= hw)
        if holding * 2 <= len(voters):
            self.violated(
                "MajorityReachedHighWatermark",
                node=node.name,
                epoch=epoch,
                hw=hw,
                durable={n.name: len(n.disk.durable) for n in voters.values()},
            )

    def result(self) -> dict[str, Any]:
        checked = [n for n in NAMES if self._observers or n != OBSERVERS_INVARIANT]
        out: dict[str, Any] = {"valid": not self.violations, "checked": sorted(checked)}
        if self.violations:
            out["anomaly-types"] = sorted(self.counts)
            out["counts"] = dict(sorted(self.counts.items()))
            out["violations"] = self.violations
        return out


NAMES = (
    "SingleLeader",
    "MonotonicEpoch",
    "LogMatching",
    "MonotonicHighWatermark",
    "MajorityReachedHighWatermark",
    "ConsistentCommittedData",
    OBSERVERS_INVARIANT,
)
