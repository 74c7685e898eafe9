"""The disk nemesis in the simulator: lost unsynced writes, torn writes and flipped bits are detected by
CRC on restart and repaired from the other nodes (clean runs stay valid); the skip-crc bug, whose
recovery trusts the log, is caught."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.spec import TestSpec
from harness.nemesis.schedule import generate
from harness.sim.cluster import SimPlan
from harness.sim.disk import BatchDisk
from harness.sim.engine import SECOND
from harness.sim.runs import simulate
from nodes.broker import Batch


def run(seed: int, workload: str = "register", time_limit: float = 15.0, **kw: Any) -> tuple[dict[str, Any], Any]:
    kw.setdefault("nemeses", ["disk"])
    plan = SimPlan(schedule=kw.pop("schedule", None), ops=kw.pop("ops", None))
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
    spec = TestSpec.of(seed=seed, time_limit=time_limit, workload=workload, check_time_limit=60, **kw)
    checked = simulate(spec, plan)
    return checked.results, (checked.runtime, checked.sim)


def corrupt_schedule(node: str, seeds: list[int]) -> list[dict[str, Any]]:
    """A bit flipped on `node` every 3 s, each time with another seed (another record, maybe another file)."""
    events = []
    for i, seed in enumerate(seeds):
        at = (2 + 3 * i) * SECOND
        value = {"fault": "corrupt", "nodes": [node], "seed": seed}
        events.append({"at": at, "package": "disk", "f": "start-disk", "value": value})
        events.append({"at": at + SECOND, "package": "disk", "f": "stop-disk", "value": None})
    return events


def disk_ops(result: Any) -> list[Any]:
    return [op for op in result.recorder.ops if op.process == "nemesis" and op.f == "start-disk"]


def test_a_flipped_bit_in_the_raft_log_is_detected_and_repaired() -> None:
    verdict, (sim, result) = run(5, schedule=corrupt_schedule("n2", [1, 2, 3]), time_limit=12)
    assert verdict["valid"] is True, verdict
    flips = [op.value["n2"] for op in disk_ops(result)]
    assert [f["fault"] for f in flips] == ["corrupt"] * 3 and all(f["file"] == "raft.log" for f in flips)
    node = sim.nodes[2]
    assert node.restarts == 3 and not node.fatal
    assert node.disk.quorum_state.repair_to == 0  # the damaged range was fetched back
    # n2 holds the committed log again, record for record
    others = [n.disk.durable for i, n in sim.nodes.items() if i != 2]
    hw = min(len(d) for d in others)
    assert node.disk.durable[:hw] == others[0][:hw] and len(node.disk.durable) >= hw


def test_a_flipped_bit_in_a_partition_log_is_cut_and_fetched_again() -> None:
    verdict, (sim, result) = run(
        4, workload="queue", schedule=corrupt_schedule("n1", list(range(10, 16))), time_limit=20
    )
    assert verdict["valid"] is True, verdict
    files = [op.value["n1"].get("file", "") for op in disk_ops(result)]
    assert any(f.startswith("partitions/") for f in files), files
    # n1's partition replicas agree, batch for batch, with the other replicas of each partition at the end
    compared = 0
    for tp, disk in sim.nodes[1].partitions.items():
        mine = {b.base_offset: b.data for b in disk.durable}
        for i, other in sim.nodes.items():
            if i == 1 or tp not in other.partitions:
                continue
            theirs = {b.base_offset: b.data for b in other.partitions[tp].durable}
            common = set(mine) & set(theirs)
            assert all(mine[o] == theirs[o] for o in common), (tp, i)
            compared += len(common)
    assert compared > 0


def test_a_partition_log_that_lost_a_range_stays_damaged_across_crashes_until_fetched_back() -> None:
    disk = BatchDisk()
    disk.append(tuple(Batch(base, 2, 1, bytes([base]) * 20, base) for base in (0, 2, 4)))
    disk.flush()
    data, synced = disk.image()
    flipped = bytearray(data)
    flipped[synced // 2] ^= 0x04  # inside the middle batch: the last one stays intact
    disk.damaged = bytes(flipped)
    batches, repair_to = disk.recover()
    assert [b.base_offset for b in batches] == [0] and repair_to == 6
    disk.crash()  # down again before the damage report was committed: the mark is on disk
    assert disk.recover() == (batches, 6)
    disk.append((Batch(2, 4, 2, b"x" * 20, 2),))  # fetched back to offset 6 from the leader
    disk.flush()
    disk.crash()
    assert disk.recover()[1] is None and disk.repair_to is None


def test_a_damaged_last_isr_member_does_not_lead_again() -> None:
    """Queue seed 29, every nemesis but packet: n1 (t0-0's last ISR member) lost a range of its t0-0
    log while down; re-elected on it, it made n2 truncate below its high watermark (node-fatal). Now
    its registration names t0-0 damaged and an eligible leader replica leads instead."""
    nemeses = ["partition", "kill", "pause", "clock", "disk"]
    verdict, (sim, _) = run(29, workload="queue", time_limit=20, nemeses=nemeses)
    assert verdict["valid"] is True, verdict.get("anomaly-types")
    leaders = [
        (e["leader_epoch"], e["leader"])
        for e in sim.events
        if e.get("type") == "partition-leader" and e.get("partition") == "t0-0" and e["node"] == "n3"
    ]
    assert (3, "n3") in leaders, leaders


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clean_runs_with_disk_faults_stay_valid(seed: int) -> None:
    verdict, (_, result) = run(seed)
    assert verdict["valid"] is True, verdict
    assert disk_ops(result), "no disk fault landed"


def test_clean_queue_run_with_disk_faults_stays_valid() -> None:
    verdict, _ = run(2, workload="queue", time_limit=20)
    assert verdict["valid"] is True, verdict


def test_skip_crc_is_caught_under_the_disk_nemesis_and_not_without_it() -> None:
    caught = []
    for seed in range(1, 5):
        verdict, _ = run(seed, bugs=["skip-crc"], time_limit=30)
        if verdict["valid"] is False:
            caught.append((seed, verdict["anomaly-types"]))
    assert caught, "skip-crc not caught in 4 seeds"
    assert any({"committed-divergence", "ConsistentCommittedData"} & set(kinds) for _, kinds in caught), caught
    # without disk faults the bug has nothing to trust: kills lose only unsynced tails, which have no bad CRC
    verdict, _ = run(caught[0][0], bugs=["skip-crc"], time_limit=30, nemeses=["partition", "kill"])
    assert verdict["valid"] is True, verdict


def test_schedules_draw_every_disk_fault() -> None:
    events = generate(9, ["n1", "n2", "n3"], ["disk"], 300, 2.0)
    faults = {e["value"]["fault"] for e in events if e["f"] == "start-disk"}
    assert faults == {"lose-unsynced", "torn", "corrupt"}
    for e in events:
        if e["f"] == "start-disk" and e["value"]["fault"] == "corrupt":
            assert e["value"]["nodes"] == "leader" or len(e["value"]["nodes"]) == 1  # one disk rots at a time


@pytest.mark.slow
@pytest.mark.parametrize("block", range(2))
def test_sweep_disk_nemesis_valid(block: int) -> None:
    """40 seeds (2 blocks of 20) with disk faults and every other nemesis: every run valid."""
    bad = []
    for seed in range(block * 20, block * 20 + 20):
        verdict, _ = run(seed, nemeses=["partition", "kill", "pause", "clock", "disk"])
        if verdict["valid"] is not True:
            bad.append((seed, verdict.get("anomaly-types")))
    assert not bad, bad
