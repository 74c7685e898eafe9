"""Tests for the epoch/leader safety checker (checkers/epochs.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.epochs import ANOMALY_TYPES, MAX_EXAMPLES, check_epochs, check_events, load_events, load_logs
from checkers.errors import InputError

# -- helpers ------------------------------------------------------------------------------------

_clock = iter(range(1_000_000, 10**12, 1_000))


def state(node, epoch, role, leader=None, voted_for=None, **extra):
    ev = {
        "node": node,
        "time": next(_clock),
        "type": "state",
        "epoch": epoch,
        "role": role,
        "leader": leader,
        "voted_for": voted_for,
    }
    ev.update(extra)
    return ev


def hw(node, value, epoch=1):
    return {"node": node, "time": next(_clock), "type": "hw", "epoch": epoch, "hw": value}


def pl(node, partition, leader_epoch, leader):
    return {
        "node": node,
        "time": next(_clock),
        "type": "partition-leader",
        "partition": partition,
        "leader_epoch": leader_epoch,
        "leader": leader,
    }


def restart(node):
    return {"node": node, "time": next(_clock), "type": "restart"}


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def election(epoch, leader, followers):
    """A clean election: the leader campaigns and wins, the others vote for it and follow."""
    evs = [state(leader, epoch, "candidate", voted_for=leader)]
    for f in followers:
        evs.append(state(f, epoch, "voted", voted_for=leader))
    evs.append(state(leader, epoch, "leader", leader=leader, voted_for=leader))
    for f in followers:
        evs.append(state(f, epoch, "follower", leader=leader, voted_for=leader))
    return evs


def assert_only(result, name):
    assert result["valid"] is False
    assert result["anomaly-types"] == [name]
    assert list(result["anomalies"]) == [name]
    assert result["anomaly-counts"][name] >= 1


def assert_valid(result):
    assert result["valid"] is True, result.get("anomalies")
    assert result["anomaly-types"] == []
    assert result["anomalies"] == {}


# -- clean runs -----------------------------------------------------------------------------------


def test_clean_run_with_restarts_is_valid():
    evs = [state(n, 0, "unattached") for n in ("n1", "n2", "n3")]
    evs += election(1, "n1", ["n2", "n3"])
    evs += [hw("n1", 10), hw("n2", 8), hw("n3", 10), hw("n2", 10)]
    # n1 crashes; it comes back resigned in epoch 1 (same node, not a second leader), then follows n2.
    evs += [restart("n1"), state("n1", 1, "resigned", leader="n1", voted_for="n1"), hw("n1", 10)]
    evs += election(2, "n2", ["n1", "n3"])
    evs += [hw("n2", 15), hw("n1", 15), pl("n2", "t0-0", 1, "n2"), pl("n3", "t0-0", 1, "n2")]
    result = check_events(evs)
    assert_valid(result)
    stats = result["stats"]
    assert stats["nodes"] == 3
    assert stats["events"] == len(evs)
    assert stats["epochs"] == 3
    assert stats["max-epoch"] == 2
    assert stats["epochs-without-leader"] == 1
    assert stats["leaders-by-epoch"] == {"1": ["n1"], "2": ["n2"]}
    assert stats["leaders-per-epoch"] == {"1": 2}
    assert stats["restarts"] == 1
    assert stats["max-hw"] == 15
    json.dumps(result)


def test_time_is_never_used_for_ordering():
    # Skewed clocks: n2's clock runs far behind n1's and even backwards; only file order counts.
    evs = [
        {**state("n1", 1, "leader", leader="n1", voted_for="n1"), "time": 900},
        {**state("n2", 1, "follower", leader="n1", voted_for="n1"), "time": 5},
        {**hw("n2", 3), "time": 4},
        {**hw("n2", 4), "time": 1},
        {**state("n2", 2, "unattached"), "time": 0},
    ]
    assert_valid(check_events(evs))


def test_unknown_event_types_are_ignored_but_counted():
    evs = election(1, "n1", ["n2"]) + [
        {"node": "n1", "type": "log", "msg": "hello", "epoch": "not checked"},
        {"node": "n2", "type": "start"},
    ]
    result = check_events(evs)
    assert_valid(result)
    assert result["stats"]["events-by-type"]["log"] == 1


# -- multiple-leaders -----------------------------------------------------------------------------


def test_two_nodes_leader_in_one_epoch():
    evs = election(3, "n1", ["n2"]) + [state("n3", 3, "leader", leader="n3", voted_for="n3")]
    result = check_events(evs)
    assert_only(result, "multiple-leaders")
    [ex] = result["anomalies"]["multiple-leaders"]
    assert ex["epoch"] == 3
    assert ex["nodes"] == ["n1", "n3"]
    assert ex["source"] == "self"
    assert [e["event"]["node"] for e in ex["events"]] == ["n1", "n3"]
    assert all(e["source"] == "self" and e["event"]["role"] == "leader" for e in ex["events"])


def test_leader_in_different_epochs_is_fine():
    evs = election(3, "n1", ["n2", "n3"]) + election(4, "n3", ["n1", "n2"])
    assert_valid(check_events(evs))


def test_leader_restarts_resigned_or_leader_again_same_node_is_not_multiple_leaders():
    evs = election(5, "n1", ["n2"]) + [
        restart("n1"),
        state("n1", 5, "resigned", leader="n1", voted_for="n1"),
        restart("n1"),
        state("n1", 5, "leader", leader="n1", voted_for="n1"),
    ]
    assert_valid(check_events(evs))


def test_observed_leader_conflicts_with_self_claimed_leader():
    # n2 believes n3 leads epoch 4, but n1 is the leader of epoch 4.
    evs = election(4, "n1", ["n3"]) + [state("n2", 4, "follower", leader="n3")]
    result = check_events(evs)
    assert_only(result, "multiple-leaders")
    [ex] = result["anomalies"]["multiple-leaders"]
    assert ex["source"] == "observed"
    assert ex["nodes"] == ["n1", "n3"]
    by_leader = {e["leader"]: e for e in ex["events"]}
    assert by_leader["n1"]["source"] == "self"
    assert by_leader["n3"]["source"] == "observed"
    assert by_leader["n3"]["event"]["node"] == "n2"


def test_followers_learning_the_leader_is_fine():
    evs = [state("n2", 4, "unattached", leader="n1"), state("n3", 4, "follower", leader="n1")]
    evs += [state("n1", 4, "leader", leader="n1", voted_for="n1")]
    assert_valid(check_events(evs))


def test_leader_in_one_epoch_observed_in_the_next_is_not_a_conflict():
    evs = election(4, "n1", ["n2"]) + [state("n2", 5, "follower", leader="n2", voted_for="n2")]
    evs += [state("n3", 5, "follower", leader="n2")]
    assert_valid(check_events(evs))


# -- epoch-regression -----------------------------------------------------------------------------


def test_epoch_regression_after_restart():
    evs = election(7, "n1", ["n2"]) + [restart("n2"), state("n2", 3, "unattached")]
    result = check_events(evs)
    assert_only(result, "epoch-regression")
    [ex] = result["anomalies"]["epoch-regression"]
    assert (ex["node"], ex["from"], ex["to"], ex["across-restart"]) == ("n2", 7, 3, True)
    assert [e["event"]["epoch"] for e in ex["events"]] == [7, 3]


def test_epoch_regression_without_restart():
    evs = [state("n1", 4, "unattached"), state("n1", 2, "unattached")]
    [ex] = check_events(evs)["anomalies"]["epoch-regression"]
    assert ex["across-restart"] is False


def test_same_epoch_after_restart_is_fine():
    evs = [state("n2", 7, "voted", voted_for="n1"), restart("n2"), state("n2", 7, "voted", voted_for="n1")]
    evs += [state("n2", 8, "unattached")]
    assert_valid(check_events(evs))


def test_epochs_of_different_nodes_are_independent():
    # Interleaved, a lagging node's lower epoch after a higher one of another node is fine.
    evs = [state("n1", 9, "unattached"), state("n2", 2, "unattached"), state("n2", 3, "unattached")]
    assert_valid(check_events(evs))


# -- double-vote ----------------------------------------------------------------------------------


def test_forgotten_vote_after_restart_is_double_vote():
    evs = [state("n3", 6, "voted", voted_for="n1"), restart("n3"), state("n3", 6, "voted", voted_for="n2")]
    result = check_events(evs)
    assert_only(result, "double-vote")
    [ex] = result["anomalies"]["double-vote"]
    assert (ex["node"], ex["epoch"], ex["candidates"]) == ("n3", 6, ["n1", "n2"])
    assert len(ex["events"]) == 2


def test_candidate_counts_as_a_vote_for_itself():
    evs = [state("n1", 6, "candidate"), state("n1", 6, "voted", voted_for="n2")]
    result = check_events(evs)
    assert_only(result, "double-vote")
    assert result["anomalies"]["double-vote"][0]["candidates"] == ["n1", "n2"]


def test_candidate_voting_for_someone_else_in_one_event():
    result = check_events([state("n1", 6, "candidate", voted_for="n2")])
    assert_only(result, "double-vote")
    assert len(result["anomalies"]["double-vote"][0]["events"]) == 1


def test_votes_in_different_epochs_or_repeated_are_fine():
    evs = [
        state("n3", 6, "voted", voted_for="n1"),
        state("n3", 6, "voted", voted_for="n1"),
        state("n3", 6, "follower", leader="n2", voted_for="n1"),  # voted for n1, n2 won: fine
        state("n3", 7, "voted", voted_for="n2"),
        state("n3", 8, "candidate", voted_for="n3"),
        state("n3", 8, "leader", leader="n3", voted_for="n3"),
    ]
    assert_valid(check_events(evs))


def test_third_candidate_is_a_second_double_vote():
    evs = [state("n3", 6, "voted", voted_for=c) for c in ("n1", "n2", "n4", "n2")]
    result = check_events(evs)
    assert result["anomaly-counts"] == {"double-vote": 2}


# -- hw-regression --------------------------------------------------------------------------------


def test_hw_regression_across_restart():
    evs = [hw("n2", 40), hw("n2", 55), restart("n2"), hw("n2", 12)]
    result = check_events(evs)
    assert_only(result, "hw-regression")
    [ex] = result["anomalies"]["hw-regression"]
    assert (ex["node"], ex["from"], ex["to"], ex["across-restart"]) == ("n2", 55, 12, True)


def test_hw_equal_or_per_node_is_fine():
    evs = [hw("n1", 100), hw("n2", 50), hw("n2", 50), restart("n2"), hw("n2", 50), hw("n1", 101)]
    assert_valid(check_events(evs))


# -- multiple-partition-leaders -------------------------------------------------------------------


def test_two_leaders_for_one_partition_epoch():
    evs = [pl("n1", "t0-2", 7, "n1"), pl("n3", "t0-2", 7, "n1"), pl("n2", "t0-2", 7, "n2")]
    result = check_events(evs)
    assert_only(result, "multiple-partition-leaders")
    [ex] = result["anomalies"]["multiple-partition-leaders"]
    assert (ex["partition"], ex["leader_epoch"], ex["leaders"]) == ("t0-2", 7, ["n1", "n2"])
    assert ex["source"] == "self"


def test_partition_leaders_in_different_epochs_or_partitions_are_fine():
    evs = [pl("n1", "t0-2", 7, "n1"), pl("n2", "t0-2", 8, "n2"), pl("n2", "t0-1", 7, "n2"), pl("n3", "t0-2", 9, None)]
    result = check_events(evs)
    assert_valid(result)
    assert result["stats"]["partitions"] == 2


# -- committed-divergence and the directory form --------------------------------------------------


def make_run(tmp_path: Path, events, logs=None) -> Path:
    write_jsonl(tmp_path / "events.jsonl", events)
    for node, entries in (logs or {}).items():
        write_jsonl(tmp_path / "logs" / f"{node}.jsonl", entries)
    return tmp_path


def entries(*pairs, start=0):
    return [{"offset": start + i, "epoch": e, "digest": d} for i, (e, d) in enumerate(pairs)]


def test_committed_divergence_from_log_dumps(tmp_path):
    run = make_run(
        tmp_path,
        election(1, "n1", ["n2", "n3"]),
        {
            "n1": entries((1, "a"), (1, "b"), (2, "c")),
            "n2": entries((1, "a"), (1, "b"), (2, "X")),
            "n3": entries((1, "a"), (2, "b")),
        },
    )
    result = check_epochs(run)
    assert_only(result, "committed-divergence")
    examples = result["anomalies"]["committed-divergence"]
    assert [ex["offset"] for ex in examples] == [1, 2]
    ex1 = examples[0]
    assert ex1["nodes"] == ["n1", "n2", "n3"]
    assert {e["node"]: (e["line"], e["entry"]["epoch"]) for e in ex1["entries"]} == {
        "n1": (2, 1),
        "n2": (2, 1),
        "n3": (2, 2),
    }
    assert result["stats"]["log-dumps"] == 3
    assert result["stats"]["offsets-compared"] == 3


def test_dumps_of_different_lengths_only_compare_shared_offsets(tmp_path):
    run = make_run(
        tmp_path,
        election(1, "n1", ["n2"]),
        {
            "n1": entries((1, "a"), (1, "b"), (1, "c")),
            "n2": entries((1, "a")),
            "n3": entries((1, "zz"), start=5),  # only n3 holds offset 5
        },
    )
    result = check_epochs(run)
    assert_valid(result)
    assert result["stats"]["offsets-compared"] == 1
    assert load_logs(run)["n2"] == entries((1, "a"))


def test_divergence_in_process():
    logs = {"n1": entries((1, "a")), "n2": entries((1, "b"))}
    result = check_events(election(1, "n1", ["n2"]), logs)
    assert_only(result, "committed-divergence")
    assert "line" not in result["anomalies"]["committed-divergence"][0]["entries"][0]


def test_run_directory_examples_carry_line_numbers(tmp_path):
    evs = [state("n1", 2, "leader", leader="n1"), hw("n1", 3), state("n2", 2, "leader", leader="n2")]
    run = make_run(tmp_path, evs)
    (tmp_path / "events.jsonl").write_text("\n" + (tmp_path / "events.jsonl").read_text())  # blank line 1
    result = check_epochs(run)
    [ex] = result["anomalies"]["multiple-leaders"]
    assert [(e["line"], e["index"]) for e in ex["events"]] == [(2, 0), (4, 2)]
    assert ex["events"][1]["event"] == evs[2]
    # The single-file form gives the same verdict (and ignores logs/).
    assert check_epochs(tmp_path / "events.jsonl")["anomaly-types"] == ["multiple-leaders"]
    assert load_events(run) == evs


def test_in_process_examples_carry_indexes_and_copies():
    evs = [hw("n1", 5), hw("n1", 4)]
    [ex] = check_events(iter(evs))["anomalies"]["hw-regression"]
    assert [e["index"] for e in ex["events"]] == [0, 1]
    assert "line" not in ex["events"][0]
    assert ex["events"][1]["event"] == evs[1]
    assert ex["events"][1]["event"] is not evs[1]


def test_examples_are_capped_but_counted():
    evs = [hw("n1", 1000 - 3 * i) for i in range(2 * MAX_EXAMPLES)]
    result = check_events(evs)
    assert len(result["anomalies"]["hw-regression"]) == MAX_EXAMPLES
    assert result["anomaly-counts"]["hw-regression"] == len(evs) - 1
    assert len(check_events(evs, max_examples=2)["anomalies"]["hw-regression"]) == 2


# -- no events ------------------------------------------------------------------------------------


def test_no_events_is_unknown(tmp_path):
    assert check_events([]) == {"valid": "unknown", "error": "no events"}
    run = make_run(tmp_path, ["", "   "], {"n1": entries((1, "a")), "n2": entries((1, "a"))})
    assert check_epochs(run) == {"valid": "unknown", "error": "no events"}


def test_no_events_but_divergent_logs_is_invalid():
    result = check_events([], {"n1": entries((1, "a")), "n2": entries((1, "b"))})
    assert result["valid"] is False
    assert result["anomaly-types"] == ["committed-divergence"]


# -- bad input ------------------------------------------------------------------------------------

GOOD = json.dumps(state("n1", 1, "follower", leader="n2"))


@pytest.mark.parametrize(
    "bad, words",
    [
        ('{"node": "n1", "type": "state", ', "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('"state"', "JSON object"),
        ('{"type": "state", "epoch": 1, "role": "leader"}', '"node"'),
        ('{"node": "", "type": "hw", "hw": 1}', '"node"'),
        ('{"node": "n1", "epoch": 1}', '"type"'),
        ('{"node": "n1", "type": 7}', '"type"'),
        ('{"node": "n1", "type": "state", "epoch": "5", "role": "leader"}', '"epoch"'),
        ('{"node": "n1", "type": "state", "epoch": true, "role": "leader"}', '"epoch"'),
        ('{"node": "n1", "type": "state", "epoch": 1.0, "role": "leader"}', '"epoch"'),
        ('{"node": "n1", "type": "state", "epoch": -1, "role": "leader"}', '"epoch"'),
        ('{"node": "n1", "type": "state", "role": "leader"}', '"epoch"'),
        ('{"node": "n1", "type": "state", "epoch": 1, "role": "king"}', '"role"'),
        ('{"node": "n1", "type": "state", "epoch": 1, "role": ["leader"]}', '"role"'),
        ('{"node": "n1", "type": "state", "epoch": 1, "role": "leader", "leader": 1}', '"leader"'),
        ('{"node": "n1", "type": "state", "epoch": 1, "role": "voted", "voted_for": {}}', '"voted_for"'),
        ('{"node": "n1", "type": "hw", "epoch": 1}', '"hw"'),
        ('{"node": "n1", "type": "hw", "epoch": "x", "hw": 3}', '"epoch"'),
        ('{"node": "n1", "type": "partition-leader", "leader_epoch": 1, "leader": "n1"}', '"partition"'),
        ('{"node": "n1", "type": "partition-leader", "partition": "p", "leader_epoch": null}', '"leader_epoch"'),
        ('{"node": "n1", "type": "hw", "hw": 3, "time": "noon"}', '"time"'),
    ],
)
def test_bad_event_line_is_named(tmp_path, bad, words):
    path = write_jsonl(tmp_path / "events.jsonl", [GOOD, "", bad, GOOD])
    for load in (check_epochs, load_events):
        with pytest.raises(InputError) as info:
            load(tmp_path)
        err = info.value
        assert err.line == 3
        assert err.file == str(path)
        assert words in err.message
        assert str(err).startswith(f"{path}:3: ")


def test_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"node": "n\xff1", "type": "x"}\n')
    with pytest.raises(InputError) as info:
        check_epochs(path)
    assert info.value.line == 2


def test_bad_log_dump_names_its_file_and_line(tmp_path):
    run = make_run(tmp_path, [GOOD], {"n1": entries((1, "a")), "n2": [*entries((1, "a")), {"offset": 1}]})
    with pytest.raises(InputError) as info:
        check_epochs(run)
    assert info.value.file == str(tmp_path / "logs" / "n2.jsonl")
    assert info.value.line == 2
    assert '"epoch"' in info.value.message


def test_duplicate_offset_in_a_dump_is_bad_input(tmp_path):
    run = make_run(tmp_path, [GOOD], {"n1": entries((1, "a"), (1, "b")) + entries((1, "a"))})
    with pytest.raises(InputError, match="duplicate offset 0") as info:
        check_epochs(run)
    assert info.value.line == 3


@pytest.mark.parametrize(
    "events, logs, words",
    [
        ([json.loads(GOOD), "nope"], None, "event at index 1"),
        ([{"node": "n1", "type": "hw", "hw": -4}], None, "event at index 0"),
        ([json.loads(GOOD)], {"n1": [{"offset": 0, "epoch": 1, "digest": 5}]}, "logs['n1'] entry at index 0"),
        ([json.loads(GOOD)], {"n1": "abc"}, "logs['n1']"),
        ([json.loads(GOOD)], ["n1"], "logs must map"),
    ],
)
def test_bad_input_in_process(events, logs, words):
    with pytest.raises(InputError) as info:
        check_events(events, logs)
    assert words in str(info.value)


def test_missing_paths_are_bad_input(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        check_epochs(tmp_path / "nope")
    with pytest.raises(InputError, match="no events.jsonl"):
        check_epochs(tmp_path)


# -- properties -----------------------------------------------------------------------------------

FRESH = ("zz", "zy")  # names that are never real nodes in generated runs


@st.composite
def consistent_runs(draw):
    """A run that satisfies every invariant: per-node event streams, partition claims and log dumps."""
    nodes = [f"n{i}" for i in range(1, draw(st.integers(1, 5)) + 1)]
    n_epochs = draw(st.integers(1, 6))
    leaders = {e: draw(st.sampled_from([*nodes, None])) for e in range(1, n_epochs + 1)}
    streams: dict[str, list[dict]] = {}
    votes: dict[tuple[str, int], str | None] = {}
    last_hw: dict[str, int | None] = {}
    for node in nodes:
        stream = streams[node] = []
        value, emitted = draw(st.integers(0, 3)), None
        led = {e for e, lead in leaders.items() if lead == node}  # a leader takes part in its epochs
        epochs = sorted(led | draw(st.sets(st.integers(1, n_epochs), min_size=0 if led else 1)))
        for e in epochs:
            lead = leaders[e]
            vote = node if lead == node else draw(st.sampled_from([None, *nodes]))
            votes[(node, e)] = vote
            if vote == node:
                last = state(node, e, "candidate", voted_for=node)
            elif vote is not None:
                last = state(node, e, "voted", voted_for=vote)
            else:
                last = state(node, e, "unattached")
            stream.append(last)
            if lead == node:
                last = state(node, e, "leader", leader=node, voted_for=node)
                stream.append(last)
            elif lead is not None and draw(st.booleans()):
                last = state(node, e, "follower", leader=lead, voted_for=vote)
                stream.append(last)
            for _ in range(draw(st.integers(0, 2))):
                value += draw(st.integers(0, 5))
                emitted = value
                stream.append(hw(node, value, e))
            if draw(st.booleans()):
                stream.append(restart(node))
                role = "resigned" if last["role"] == "leader" else last["role"]
                stream.append({**last, "role": role, "time": 0})
                if draw(st.booleans()):
                    emitted = value
                    stream.append(hw(node, value, e))
        last_hw[node] = emitted
    partitions = {}
    for _ in range(draw(st.integers(0, 6))):
        key = (draw(st.sampled_from(["t0-0", "t0-1"])), draw(st.integers(0, 3)))
        leader = partitions.setdefault(key, draw(st.sampled_from(nodes)))
        reporter = draw(st.sampled_from(nodes))
        streams[reporter].append(pl(reporter, key[0], key[1], leader))
    committed = [(draw(st.integers(1, n_epochs)), f"d{i}") for i in range(draw(st.integers(1, 8)))]
    committed.sort()
    logs = {n: entries(*committed[: draw(st.integers(0, len(committed)))]) for n in nodes}
    return {
        "nodes": nodes,
        "streams": streams,
        "votes": votes,
        "last_hw": last_hw,
        "leaders": leaders,
        "partitions": partitions,
        "committed": committed,
        "logs": logs,
    }


def merge(streams, rnd):
    """Interleave per-node streams randomly, keeping each node's own order."""
    order = [n for n, s in streams.items() for _ in s]
    rnd.shuffle(order)
    cursors = dict.fromkeys(streams, 0)
    out = []
    for n in order:
        out.append(streams[n][cursors[n]])
        cursors[n] += 1
    return out


def epoch_at(stream, i):
    """The node's epoch just before position i of its stream (0 if none yet)."""
    return next((ev["epoch"] for ev in reversed(stream[:i]) if ev["type"] == "state"), 0)


def inject(run, kind, data):
    """Add one violation of `kind` to a consistent run, touching nothing else."""
    streams, nodes = run["streams"], run["nodes"]
    node = data.draw(st.sampled_from(nodes))
    stream = streams[node]
    if kind == "multiple-leaders":
        e = data.draw(st.sampled_from(sorted({ev["epoch"] for ev in stream if ev["type"] == "state"})))
        at = max(i for i, ev in enumerate(stream) if ev["type"] == "state" and ev["epoch"] == e) + 1
        stream.insert(at, state(node, e, "follower", leader=FRESH[0]))
        if run["leaders"][e] is None:
            stream.insert(at, state(node, e, "follower", leader=FRESH[1]))
    elif kind == "epoch-regression":
        stream.append(state(node, epoch_at(stream, len(stream)) - 1, "unattached"))
    elif kind == "double-vote":
        e = epoch_at(stream, len(stream))
        if run["votes"].get((node, e)) is None:
            stream.append(state(node, e, "voted", voted_for=FRESH[1]))
        stream.append(state(node, e, "voted", voted_for=FRESH[0]))
    elif kind == "hw-regression":
        last = run["last_hw"][node]
        if not last:
            last = 5
            stream.append(hw(node, last))
        stream.append(hw(node, last - 1))
    elif kind == "multiple-partition-leaders":
        key = data.draw(st.sampled_from(sorted(run["partitions"]))) if run["partitions"] else ("t0-9", 1)
        if key not in run["partitions"]:
            stream.append(pl(node, *key, FRESH[1]))
        stream.append(pl(node, *key, FRESH[0]))
    elif kind == "committed-divergence":
        logs = run["logs"]
        holder = data.draw(st.sampled_from(nodes))
        if not logs[holder]:
            logs[holder] = entries(run["committed"][0])
        offset = data.draw(st.sampled_from([e["offset"] for e in logs[holder]]))
        logs[FRESH[0]] = [{"offset": offset, "epoch": 1, "digest": "divergent"}]
    else:  # pragma: no cover
        raise AssertionError(kind)


# EPOCHS_EXAMPLES=5000 runs a longer search locally.
PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("EPOCHS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY_SETTINGS
@given(run=consistent_runs(), rnd=st.randoms(use_true_random=False))
def test_consistent_runs_are_valid(run, rnd):
    result = check_events(merge(run["streams"], rnd), run["logs"])
    assert_valid(result)
    assert result["stats"]["nodes"] == len(run["nodes"])


@PROPERTY_SETTINGS
@given(
    run=consistent_runs(), kind=st.sampled_from(ANOMALY_TYPES), rnd=st.randoms(use_true_random=False), data=st.data()
)
def test_one_injected_violation_is_found_by_name(run, kind, rnd, data):
    inject(run, kind, data)
    result = check_events(merge(run["streams"], rnd), run["logs"])
    assert_only(result, kind)


# -- size -----------------------------------------------------------------------------------------


def test_large_stream_is_valid():
    """A long correct stream stays valid (its speed is measured in benchmarks/checkers.py)."""
    n = 40_000
    evs = []
    for i in range(n // 4):
        e = i // 50 + 1
        lead = f"n{e % 3 + 1}"
        evs.append({"node": lead, "type": "state", "epoch": e, "role": "leader", "leader": lead, "voted_for": lead})
        evs.append({"node": "n4", "type": "state", "epoch": e, "role": "follower", "leader": lead})
        evs.append({"node": "n4", "type": "hw", "epoch": e, "hw": i})
        evs.append({"node": lead, "type": "partition-leader", "partition": "p", "leader_epoch": e, "leader": lead})
    result = check_events(evs)
    assert_valid(result)
    assert result["stats"]["events"] == n
