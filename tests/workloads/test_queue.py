"""The queue workload's sans-IO client, generators, setup and final drain, without any runtime."""

from __future__ import annotations

import ast
import inspect
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads.queue
from workloads import generator as gen
from workloads.protocol import Completion, Failure, Reply, Request
from workloads.queue import QueueWorkload
from workloads.queue.bodies import (
    PRODUCE_TIMEOUT_MS,
    CommitOffsets,
    CoordinatorFound,
    CreateTopic,
    Fetch,
    Fetched,
    FetchOffsets,
    FindCoordinator,
    GroupJoined,
    GroupSynced,
    InitProducerId,
    JoinGroup,
    Metadata,
    MetadataReply,
    OffsetsCommitted,
    OffsetsFetched,
    PartitionInfo,
    Produce,
    Produced,
    ProducerId,
    SyncGroup,
    TopicCreated,
    broker_id,
)
from workloads.queue.client import QueueClient
from workloads.queue.consumer import END_POLL_S, END_QUIET_S
from workloads.queue.errors import DEFINITE_PRODUCE_ERRORS, OFFSET_OUT_OF_RANGE, REFRESH
from workloads.queue.groups import GROUP
from workloads.queue.ops import QueueGenerator
from workloads.queue.options import QueueOptions, make
from workloads.queue.producer import MAX_IN_FLIGHT
from workloads.queue.setup import SETUP_RETRY_S, TOPIC_ALREADY_EXISTS
from workloads.queue.state import QueueState

NODES = ["n1", "n2", "n3"]


def ctx(workers: dict[Any, Any], free: set[Any] | None = None, time: int = 0) -> gen.Context:
    return gen.Context(time, workers, frozenset(workers if free is None else free), random.Random(0))


def metadata(*leaders: str | None, isr: int = 3) -> Reply:
    parts = tuple(PartitionInfo(i, leader, isr) for i, leader in enumerate(leaders))
    return Reply(MetadataReply(parts))


def workload(**kw: Any) -> QueueWorkload:
    """A plain (non-idempotent) producer unless asked: the idempotent one has its own tests below."""
    kw.setdefault("idempotent", False)
    return QueueWorkload(NODES, 1, **kw)


def test_send_finds_the_leader_by_metadata_then_produces_to_it() -> None:
    w = workload()
    c = w.client(0, 0)
    step = c.invoke({"f": "send", "key": "t0-1", "value": 7, "process": 0})
    assert isinstance(step, Request) and step.body == Metadata("t0") and step.node in NODES
    assert step.timeout_s == w.timeout_s
    step = c.receive(metadata("n1", "n3", None))
    assert step == Request("n3", Produce("t0", 1, b"7", -1), w.timeout_s)
    done = c.receive(Reply(Produced(0, "none", 4)))
    assert done == Completion("ok", [4, 7], None, "n3")
    assert w.acked_max == {"t0-1": 4}
    # the leader is remembered: the next send goes straight to it
    again = c.invoke({"f": "send", "key": "t0-1", "value": 8})
    assert again == Request("n3", Produce("t0", 1, b"8", -1), w.timeout_s)


def test_produce_errors_are_fail_when_nothing_was_appended_and_info_otherwise() -> None:
    w = workload()
    for code, outcome in [(6, "info"), (19, "fail"), (20, "info"), (7, "info"), (2, "fail"), (99, "info")]:
        c = w.client(0, 0)
        c.leaders["t0-0"] = "n2"
        assert isinstance(c.invoke({"f": "send", "key": "t0-0", "value": 1}), Request)
        done = c.receive(Reply(Produced(code, f"e{code}")))
        assert done == Completion(outcome, 1, f"e{code}", "n2"), code
        assert ("t0-0" in c.leaders) == (code not in REFRESH)


def test_no_answer_is_info_for_a_send_that_left_and_fail_otherwise() -> None:
    w = workload()
    c = w.client(0, 0)
    c.leaders["t0-0"] = "n2"
    c.invoke({"f": "send", "key": "t0-0", "value": 1})
    assert c.receive(Failure("timeout", sent=True)) == Completion("info", 1, "timeout", "n2")
    assert c.leaders == {}  # forget the leader: it may have moved
    c.leaders["t0-0"] = "n2"
    c.invoke({"f": "send", "key": "t0-0", "value": 2})
    assert c.receive(Failure("refused", sent=False)) == Completion("fail", 2, "refused", "n2")
    # metadata that got no answer: the record was never sent
    step = c.invoke({"f": "send", "key": "t0-0", "value": 3})
    assert isinstance(step, Request) and isinstance(step.body, Metadata)
    assert c.receive(Failure("timeout", sent=True)).type == "fail"  # type: ignore[union-attr]
    # nobody leads the partition yet
    step = c.invoke({"f": "send", "key": "t0-0", "value": 4})
    assert isinstance(step, Request)
    assert c.receive(metadata(None, "n1", "n1")) == Completion("fail", 4, "leader-not-available", step.node)
    assert c.leaders == {"t0-1": "n1", "t0-2": "n1"}


def test_a_metadata_leader_that_is_no_known_node_is_not_used() -> None:
    c = workload().client(0, 0)
    c.invoke({"f": "send", "key": "t0-0", "value": 1})
    assert c.receive(metadata("n9")).type == "fail"  # type: ignore[union-attr]


def test_acks_0_sends_are_always_info() -> None:
    w = workload(acks="0")
    c = w.client(0, 0)
    c.leaders["t0-0"] = "n1"
    step = c.invoke({"f": "send", "key": "t0-0", "value": 5})
    assert isinstance(step, Request) and step.body.acks == 0
    assert c.receive(Reply(None)) == Completion("info", 5, "acks=0: no answer", "n1")
    assert w.acked_max == {}


def test_poll_reads_from_the_process_position_and_assign_resets_it() -> None:
    w = workload()
    c = w.client(0, 0)
    assert c.invoke({"f": "poll", "key": "t0-0"}) == Completion("fail", None, "not-assigned", None)
    assert c.invoke({"f": "assign", "key": None, "value": ["t0-0", "t0-2"]}) == Completion("ok", ["t0-0", "t0-2"])
    c.leaders["t0-0"] = "n1"
    assert c.invoke({"f": "poll", "key": "t0-0"}) == Request("n1", Fetch("t0", 0, 0), w.timeout_s)
    records = ((0, b"5"), (1, b"x"), (2, b"9"))
    done = c.receive(Reply(Fetched(0, "none", 3, records)))
    assert done == Completion("ok", [[0, 5], [1, "x"], [2, 9]], None, "n1")
    assert c.consumer.positions["t0-0"] == 3 and "t0-0" in c.consumer.polled
    step = c.invoke({"f": "poll", "key": "t0-0"})
    assert isinstance(step, Request) and step.body.offset == 3
    # records below the position (a batch that starts earlier) are not read again
    assert c.receive(Reply(Fetched(0, "none", 4, ((2, b"9"), (3, b"10"))))).value == [[3, 10]]  # type: ignore[union-attr]
    c.invoke({"f": "poll", "key": "t0-0"})
    assert c.receive(Reply(Fetched(0, "none", 4))).value == []  # type: ignore[union-attr]
    assert "t0-0" in c.consumer.at_end
    c.invoke({"f": "assign", "key": None, "value": ["t0-0"]})
    assert c.consumer.positions == {"t0-0": 0} and not c.consumer.at_end and not c.consumer.polled


def test_failed_polls_leave_the_position_except_when_the_log_was_truncated_below_it() -> None:
    w = workload()
    c = w.client(0, 0)
    c.invoke({"f": "assign", "key": None, "value": ["t0-0"]})
    c.consumer.positions["t0-0"] = 5
    c.leaders["t0-0"] = "n1"
    c.invoke({"f": "poll", "key": "t0-0"})
    assert c.receive(Reply(Fetched(6, "not_leader_or_follower"))) == Completion(
        "fail", None, "not_leader_or_follower", "n1"
    )
    assert c.consumer.positions["t0-0"] == 5 and c.leaders == {}
    c.leaders["t0-0"] = "n1"
    c.invoke({"f": "poll", "key": "t0-0"})
    assert c.receive(Failure("timeout", sent=True)).type == "fail"  # type: ignore[union-attr]
    c.leaders["t0-0"] = "n1"
    c.invoke({"f": "poll", "key": "t0-0"})
    assert c.receive(Reply(Fetched(OFFSET_OUT_OF_RANGE, "offset_out_of_range"))).type == "fail"  # type: ignore[union-attr]
    assert c.consumer.positions["t0-0"] == 0


ANSWERS = st.one_of(
    st.builds(Failure, st.sampled_from(["timeout", "closed", "refused"]), st.booleans()),
    st.builds(lambda ls: metadata(*ls), st.lists(st.sampled_from([None, "n1", "n2", "n9"]), min_size=3, max_size=3)),
    st.builds(lambda e, o: Reply(Produced(e, "e", o)), st.sampled_from([0, 2, 6, 7, 19, 20]), st.integers(0, 9)),
    st.builds(
        lambda e, hw, n: Reply(Fetched(e, "e", hw, tuple((i, str(i).encode()) for i in range(n)))),
        st.sampled_from([0, 1, 6, 74, 75]),
        st.integers(0, 9),
        st.integers(0, 5),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(st.sampled_from(["send", "poll", "assign"]), min_size=1, max_size=20),
    answers=st.lists(ANSWERS, min_size=40, max_size=40),
)
def test_every_operation_completes_with_an_outcome_its_requests_allow(ops: list[str], answers: list[Any]) -> None:
    """Whatever comes back: at most two requests per operation (metadata, then the leader's), polls are
    never info, a send is info only after a Produce left, and an ok send's value is [offset, value]."""
    w = workload()
    c = w.client(0, 0)
    feed = iter(answers)
    for i, f in enumerate(ops):
        op = {"f": f, "key": "t0-1", "value": ["t0-1"] if f == "assign" else (i if f == "send" else None)}
        step = c.invoke(op)
        bodies = []
        while isinstance(step, Request):
            bodies.append(step.body)
            assert len(bodies) <= 2 and step.node in NODES
            answer = next(feed)
            if isinstance(answer, Reply) and not isinstance(answer.body, type(_expected(step.body))):
                answer = Failure("closed", sent=True)  # keep replies the right kind for the request
            step = c.receive(answer)
        assert step.type in ("ok", "fail", "info")
        if f == "poll":
            assert step.type != "info"
        if f == "send" and step.type == "info":
            assert any(isinstance(b, Produce) for b in bodies)
        if f == "send" and step.type == "ok":
            assert step.value[1] == i


def _expected(body: Any) -> Any:
    return {
        Metadata: MetadataReply(()),
        Produce: Produced(0, ""),
        Fetch: Fetched(0, ""),
    }[type(body)]


def idem_send(c: QueueClient, value: int, key: str = "t0-0") -> Request:
    step = c.invoke({"f": "send", "key": key, "value": value})
    assert isinstance(step, Request) and isinstance(step.body, Produce)
    return step


def test_the_idempotent_producer_gets_an_id_then_numbers_its_batches() -> None:
    w = QueueWorkload(NODES, 1)
    assert w.idempotent and w.options()["idempotent"] is True
    assert not QueueWorkload(NODES, 1, acks="1").idempotent  # as Kafka clients: only with acks=all
    c = w.client(0, 0)
    step = c.invoke({"f": "send", "key": "t0-0", "value": 1})
    assert isinstance(step, Request) and step.body == InitProducerId()
    step = c.receive(Reply(ProducerId(0, "none", 1000, 0)))
    assert isinstance(step, Request) and step.body == Metadata("t0")
    step = c.receive(metadata("n2", "n2", "n2"))
    assert step.body == Produce("t0", 0, b"1", -1, PRODUCE_TIMEOUT_MS, 1000, 0, 0)  # type: ignore[union-attr]
    assert c.receive(Reply(Produced(0, "none", 0))) == Completion("ok", [0, 1], None, "n2")
    assert idem_send(c, 2).body.sequence == 1
    # a batch refused at once gives its sequence back
    assert c.receive(Reply(Produced(19, "not_enough_replicas"))).type == "fail"  # type: ignore[union-attr]
    assert idem_send(c, 3).body.sequence == 1
    # an unknown epoch: start over with a new producer id
    assert c.receive(Reply(Produced(47, "invalid_producer_epoch"))).type == "fail"  # type: ignore[union-attr]
    assert c.invoke({"f": "send", "key": "t0-0", "value": 4}) == Request(c.node, InitProducerId(), w.timeout_s)


def test_an_unanswered_batch_is_retried_after_the_next_one_by_the_threads_next_process() -> None:
    w = QueueWorkload(NODES, 1)
    c = w.client(0, 0)
    c.prod.start(7)
    c.leaders["t0-0"] = "n1"
    assert idem_send(c, 1).body.sequence == 0
    assert c.receive(Failure("timeout", sent=True)).type == "info"  # type: ignore[union-attr]
    assert c.prod.in_flight == {"t0-0": [(0, 1)]}
    c2 = w.client(0, 1)  # the process was replaced after the info; the thread's producer lives on
    c2.leaders["t0-0"] = "n1"
    assert idem_send(c2, 2).body.sequence == 1
    retry = c2.receive(Reply(Produced(0, "none", 8)))
    assert isinstance(retry, Request) and (retry.body.sequence, retry.body.value) == (0, b"1")
    assert c2.receive(Reply(Produced(0, "none", 7))) == Completion("ok", [8, 2], None, "n1")
    assert c2.prod.in_flight == {"t0-0": []}
    # out of order: the older batch never arrived; it is retried, then the new one again
    assert idem_send(c2, 3).body.sequence == 2
    assert c2.receive(Failure("closed", sent=True)).type == "info"  # type: ignore[union-attr]
    c2.leaders["t0-0"] = "n1"
    assert idem_send(c2, 4).body.sequence == 3
    retry = c2.receive(Reply(Produced(45, "out_of_order_sequence_number")))
    assert isinstance(retry, Request) and retry.body.sequence == 2
    again = c2.receive(Reply(Produced(0, "none", 9)))
    assert isinstance(again, Request) and (again.body.sequence, again.body.value) == (3, b"4")
    assert c2.receive(Reply(Produced(0, "none", 10))) == Completion("ok", [10, 4], None, "n1")


@settings(max_examples=200, deadline=None)
@given(answers=st.lists(ANSWERS, min_size=60, max_size=60), pids=st.lists(st.booleans(), min_size=20, max_size=20))
def test_idempotent_sends_complete_and_never_reuse_a_sequence_for_another_value(
    answers: list[Any], pids: list[bool]
) -> None:
    """Whatever comes back, across processes of one thread: a bounded number of requests per send, and a
    (producer id, sequence) that may be in the log is never sent again with another value."""
    w = QueueWorkload(NODES, 1)
    feed = iter(answers)
    seen: dict[tuple[int, int], bytes] = {}
    for i in range(20):
        c = w.client(0, i)
        step = c.invoke({"f": "send", "key": "t0-1", "value": i})
        requests = 0
        while isinstance(step, Request):
            requests += 1
            assert requests <= 4 + MAX_IN_FLIGHT
            body = step.body
            if isinstance(body, Produce) and body.producer_id >= 0:
                assert seen.get((body.producer_id, body.sequence), body.value) == body.value
            if isinstance(body, InitProducerId):
                answer: Any = Reply(ProducerId(0, "none", 100 + i, 0)) if pids[i] else Failure("timeout", True)
            else:
                answer = next(feed, Failure("timeout", sent=True))
                if isinstance(answer, Reply) and not isinstance(answer.body, type(_expected(body))):
                    answer = Failure("closed", sent=True)
                refused = (isinstance(answer, Failure) and not answer.sent) or (
                    isinstance(answer, Reply)
                    and isinstance(answer.body, Produced)
                    and answer.body.error in DEFINITE_PRODUCE_ERRORS | {45, 47}
                )
                if isinstance(body, Produce) and body.producer_id >= 0 and not refused:
                    seen[(body.producer_id, body.sequence)] = body.value  # maybe in the log: never reused
            step = c.receive(answer)
        assert step.type in ("ok", "fail", "info")
        if step.type == "ok":
            assert step.value[1] == i


def test_main_ops_are_drawn_per_process_assignment_with_unique_values() -> None:
    w = workload()
    expected = QueueGenerator(random.Random("workload-1"), 3)
    g: Any = w.generator()
    assigned: list[str] = []
    for _ in range(200):
        op, g = g.op(ctx({0: 0}))
        want = expected.next(assigned)
        assert (op["f"], op["key"], op["value"]) == (want.f, want.key, want.value) and op["process"] == 0
        if op["f"] == "assign":
            assigned = list(op["value"])
            w.consumer(0).assign(op["value"])
    sends = [o for o in (g.op(ctx({0: 0}))[0] for _ in range(100)) if o["f"] == "send"]
    assert len({s["value"] for s in sends}) == len(sends)
    assert g.op(ctx({0: 10}))[0]["f"] == "assign"  # a new process (after an info) starts unassigned


def _complete(g: gen.Generator, op: dict[str, Any], typ: str, value: Any = None, time: int = 0) -> gen.Generator:
    event = {**op, "type": typ, "value": value, "time": time, "error": None if typ == "ok" else "no"}
    out = g.update(ctx({0: 0}), event)
    assert out is not None
    return out


def test_setup_creates_the_topic_then_waits_for_every_node_to_see_it_led() -> None:
    w = workload()
    g: Any = w.setup()
    op, g = g.op(ctx({0: 0, 1: 1}))
    assert (op["f"], op["node"], op["process"]) == ("create-topic", "n1", 0)
    assert g.op(ctx({0: 0, 1: 1}, free={1}))[0] is gen.PENDING  # one op at a time, on thread 0 only
    g = _complete(g, op, "fail", time=10)
    op, g = g.op(ctx({0: 0}, time=11))
    assert (op["f"], op["node"]) == ("create-topic", "n2") and op["time"] == 10 + int(SETUP_RETRY_S * gen.SECOND)
    g = _complete(g, op, "ok")
    leaders = {"t0-0": "n1", "t0-1": "n2", "t0-2": "n3"}
    for node in NODES:
        op, g = g.op(ctx({0: 0}))
        assert (op["f"], op["node"]) == ("topic-ready", node)
        g = _complete(g, op, "fail")
        op, g = g.op(ctx({0: 0}))
        assert op["node"] == node
        g = _complete(g, op, "ok", leaders)
    assert g.op(ctx({0: 0})) is None
    assert w.partition_leaders == leaders


def test_the_client_runs_the_setup_ops_on_the_node_they_name() -> None:
    w = workload(partitions=2, min_isr=2, unclean=True)
    c = w.client(0, 0)
    step = c.invoke({"f": "create-topic", "node": "n2"})
    configs = (("min.insync.replicas", "2"), ("unclean.leader.election.enable", "true"))
    assert step == Request("n2", CreateTopic("t0", 2, 3, configs), w.timeout_s)
    assert c.receive(Reply(TopicCreated(TOPIC_ALREADY_EXISTS, "topic_already_exists"))).type == "ok"  # type: ignore[union-attr]
    c.invoke({"f": "create-topic", "node": "n2"})
    assert c.receive(Reply(TopicCreated(38, "invalid_replication_factor", "only 2"))).error == (  # type: ignore[union-attr]
        "create-topics: invalid_replication_factor only 2"
    )
    assert c.invoke({"f": "topic-ready", "node": "n3"}) == Request("n3", Metadata("t0"), w.timeout_s)
    assert c.receive(Reply(MetadataReply(None))).type == "fail"  # type: ignore[union-attr]
    c.invoke({"f": "topic-ready", "node": "n3"})
    assert c.receive(metadata("n1", "n2", isr=1)).type == "fail"  # type: ignore[union-attr]  # ISR too small
    c.invoke({"f": "topic-ready", "node": "n3"})
    assert c.receive(metadata("n1")).type == "fail"  # type: ignore[union-attr]  # a partition missing
    c.invoke({"f": "topic-ready", "node": "n3"})
    assert c.receive(metadata("n1", "n2")) == Completion("ok", {"t0-0": "n1", "t0-1": "n2"}, None, "n3")


def test_final_drain_assigns_then_polls_each_key_past_the_acked_end() -> None:
    w = workload(partitions=2)
    w.note_ack("t0-0", 4)
    w.note_ack("t0-0", 2)  # lower offsets never lower the acked end
    drain: Any = gen.on_threads(lambda t: t == 0, w.final([], 3))
    c0 = ctx({0: 0, 1: 1})
    consumer = w.consumer(0)
    consumer.assign(["t0-0"])
    consumer.positions["t0-0"] = 9  # read far in the main phase: the final phase starts again at 0
    op, drain = drain.op(c0)
    assert (op["f"], op["value"], op["process"]) == ("assign", ["t0-0"], 0)
    consumer.assign(op["value"])
    op, drain = drain.op(c0)
    assert (op["f"], op["key"]) == ("poll", "t0-0")
    consumer.polled.add("t0-0")
    consumer.positions["t0-0"] = 3  # not yet past offset 4
    assert drain.op(c0)[0]["f"] == "poll"
    assert drain.op(ctx({0: 0, 1: 1}, free={1}))[0] is gen.PENDING  # its thread is busy
    consumer.positions["t0-0"] = 5
    assert drain.op(c0) is None  # thread 0 drains only t0-0 (t0-1 is thread 1's)


def test_final_drain_polls_a_key_with_no_acked_send_once_and_reassigns_for_a_new_process() -> None:
    w = workload(partitions=1)
    drain: Any = w.final([], 1)
    op, drain = drain.op(ctx({0: 0}))
    w.consumer(0).assign(op["value"])
    op, drain = drain.op(ctx({0: 0}))
    assert op["f"] == "poll"  # nothing acked, but it must be read once
    op, drain = drain.op(ctx({0: 1}))  # the poll crashed its process: the new one assigns again
    assert (op["f"], op["process"]) == ("assign", 1)


def test_final_drain_gives_up_on_a_partition_whose_end_stays_short_of_the_acked_offset() -> None:
    w = workload(partitions=1)
    w.note_ack("t0-0", 10)  # acknowledged, then lost with its leader (acks=1)
    drain: Any = w.final(["t0-0"], 1)
    op, drain = drain.op(ctx({0: 0}))
    consumer = w.consumer(0)
    consumer.assign(op["value"])
    consumer.polled.add("t0-0")
    consumer.positions["t0-0"] = 6
    consumer.at_end.add("t0-0")
    op, drain = drain.op(ctx({0: 0}, time=100))
    assert op["f"] == "poll" and op["time"] == 100 + int(END_POLL_S * gen.SECOND)  # at the end: poll again later
    op, drain = drain.op(ctx({0: 0}, time=100 + int(END_QUIET_S * gen.SECOND) - 1))
    assert op["f"] == "poll"
    assert drain.op(ctx({0: 0}, time=100 + int(END_QUIET_S * gen.SECOND))) is None


def test_the_options_make_the_workload_and_say_what_the_db_needs() -> None:
    w = make(["n2", "n1"], 5, QueueOptions(acks="1", partitions=2, min_isr=1, unclean=True), 2.0)
    assert w.nodes == ["n1", "n2"] and w.all_keys() == ["t0-0", "t0-1"]
    assert w.options() == {
        "acks": 1,
        "partitions": 2,
        "replication-factor": 3,
        "min-isr": 1,
        "unclean": True,
        "idempotent": False,  # only with acks=all
    }


def _join(w: QueueWorkload, c: QueueClient, committed: tuple[tuple[int, int], ...]) -> Request:
    """Drive a subscribed poll through FindCoordinator, JoinGroup (as the leader), SyncGroup and
    OffsetFetch; return the first Fetch."""
    assert c.invoke({"f": "subscribe", "key": None, "value": w.all_keys()}).type == "ok"
    step = c.invoke({"f": "poll", "key": None, "value": None, "time": 5})
    assert isinstance(step, Request) and isinstance(step.body, FindCoordinator)
    step = c.receive(Reply(CoordinatorFound(0, "none", "n2")))
    assert isinstance(step.body, JoinGroup) and step.node == "n2"
    step = c.receive(Reply(GroupJoined(0, "none", 4, "m1", "m1", (("m1", b"t0"),))))
    assert isinstance(step.body, SyncGroup) and step.body.generation == 4
    step = c.receive(Reply(GroupSynced(0, "none", b'["t0-0", "t0-1"]')))
    assert step.body == FetchOffsets(GROUP, "t0", (0, 1))
    c.leaders.update({"t0-0": "n1", "t0-1": "n3"})
    step = c.receive(Reply(OffsetsFetched(0, "none", committed)))
    assert isinstance(step, Request) and isinstance(step.body, Fetch)
    return step


def test_a_poll_that_joins_records_where_each_assigned_partition_starts() -> None:
    w = workload(sub_via="subscribe")
    c = w.client(0, 0)
    step = _join(w, c, ((0, 7), (1, -1)))
    assert step.body.offset == 7 and step.node == "n1"
    step = c.receive(Reply(Fetched(0, "none", 9, ((7, b"70"), (8, b"80")))))
    assert step.body.offset == 0 and step.node == "n3"  # nothing committed: from the beginning
    done = c.receive(Reply(Fetched(0, "none", 0)))
    assigned = {"generation": 4, "start": {"t0-0": 7, "t0-1": 0}, "committed": {"t0-0": 7, "t0-1": -1}}
    assert done == Completion("ok", {"t0-0": [[7, 70], [8, 80]], "t0-1": []}, None, "n3", {"assigned": assigned})
    # the next poll of the same assignment began nothing
    c.consumer.last_heartbeat = 5
    step = c.invoke({"f": "poll", "key": None, "value": None, "time": 6})
    assert step.body.offset == 9
    c.receive(Reply(Fetched(0, "none", 9)))
    assert c.receive(Reply(Fetched(0, "none", 0))).extra is None


def test_a_poll_that_joins_then_fails_to_fetch_still_records_the_assignment() -> None:
    w = workload(sub_via="subscribe")
    c = w.client(0, 0)
    _join(w, c, ((0, 3), (1, 2)))
    c.receive(Failure("timeout", True))
    done = c.receive(Failure("refused", False))
    assert done.type == "fail" and done.extra == {
        "assigned": {"generation": 4, "start": {"t0-0": 3, "t0-1": 2}, "committed": {"t0-0": 3, "t0-1": 2}}
    }


def test_a_commit_that_may_have_happened_says_what_it_tried_to_commit() -> None:
    w = workload(sub_via="subscribe")
    c = w.client(0, 0)
    _join(w, c, ((0, 3), (1, 2)))
    c.receive(Reply(Fetched(0, "none", 3)))
    c.receive(Reply(Fetched(0, "none", 2)))
    tried = {"generation": 4, "offsets": {"t0-0": 3, "t0-1": 2}}
    for answer, typ in [(Failure("timeout", True), "info"), (Reply(OffsetsCommitted(15, "x")), "info")]:
        c.consumer.coordinator = "n2"
        assert isinstance(c.invoke({"f": "commit", "key": None, "value": None}), Request)
        done = c.receive(answer)
        assert done.type == typ and done.value == tried and done.extra is None
    c.consumer.coordinator = "n2"
    c.invoke({"f": "commit", "key": None, "value": None})
    assert c.receive(Reply(OffsetsCommitted(14, "load"))) == Completion("fail", None, "load", "n2")


# ---------------------------------------------------------------------------- leader epochs (KIP-320)


def epoch_metadata(*leaders: tuple[str | None, int]) -> Reply:
    """A metadata answer naming each partition's (leader, leader epoch)."""
    parts = tuple(PartitionInfo(i, leader, 3, 0, epoch) for i, (leader, epoch) in enumerate(leaders))
    return Reply(MetadataReply(parts))


def test_a_fetch_carries_the_leader_epoch_and_a_fenced_answer_refreshes_metadata_without_a_reset() -> None:
    w = workload()
    c = w.client(0, 0)
    c.invoke({"f": "assign", "key": None, "value": ["t0-0"]})
    c.consumer.positions["t0-0"] = 145
    step = c.invoke({"f": "poll", "key": "t0-0"})
    assert isinstance(step, Request) and isinstance(step.body, Metadata)
    step = c.receive(epoch_metadata(("n1", 7), ("n2", 3), ("n3", 3)))
    assert step == Request("n1", Fetch("t0", 0, 145, leader_epoch=7), w.timeout_s)
    errors = [(74, "fenced_leader_epoch", "n2", 8), (75, "unknown_leader_epoch", "n3", 9), (6, "not_leader", "n1", 10)]
    asked = "n1"
    for code, name, leader, epoch in errors:
        assert c.receive(Reply(Fetched(code, name))) == Completion("fail", None, name, asked)
        assert c.consumer.positions["t0-0"] == 145  # not treated as out of range
        step = c.invoke({"f": "poll", "key": "t0-0"})
        assert isinstance(step, Request) and isinstance(step.body, Metadata)  # refresh, then retry
        step = c.receive(epoch_metadata((leader, epoch), ("n2", 3), ("n3", 3)))
        assert step == Request(leader, Fetch("t0", 0, 145, leader_epoch=epoch), w.timeout_s)
        asked = leader
    done = c.receive(Reply(Fetched(0, "none", 147, ((145, b"1"), (146, b"2")))))
    assert done.value == [[145, 1], [146, 2]] and c.consumer.epochs["t0-0"] == 10


def test_a_stale_leader_named_by_older_metadata_is_never_fetched_from() -> None:
    """The seed-2 false alarm: metadata from a stale leader names it at an older epoch than the position
    was read at; the client must not fetch there (its OFFSET_OUT_OF_RANGE would reset the position)."""
    w = workload()
    c = w.client(0, 0)
    c.invoke({"f": "assign", "key": None, "value": ["t0-1"]})
    c.invoke({"f": "poll", "key": "t0-1"})
    step = c.receive(epoch_metadata(("n2", 3), ("n1", 9), ("n2", 3)))
    assert step == Request("n1", Fetch("t0", 1, 0, leader_epoch=9), w.timeout_s)
    assert c.receive(Reply(Fetched(0, "none", 2, ((0, b"4"), (1, b"5"))))).type == "ok"  # type: ignore[union-attr]
    c.leaders.pop("t0-1")  # say a send timed out: the leader is asked again
    c.invoke({"f": "poll", "key": "t0-1"})
    done = c.receive(epoch_metadata(("n2", 3), ("n3", 6), ("n2", 3)))
    assert isinstance(done, Completion) and (done.type, done.error) == ("fail", "stale-metadata")
    assert c.consumer.positions["t0-1"] == 2
    # a send still goes where the metadata says: Produce carries no leader epoch
    assert c.leaders["t0-1"] == "n3"
    # the current leader's out-of-range answer resets the position (auto.offset.reset=earliest)
    c.invoke({"f": "poll", "key": "t0-1"})
    step = c.receive(epoch_metadata(("n2", 3), ("n1", 9), ("n2", 3)))
    assert step == Request("n1", Fetch("t0", 1, 2, leader_epoch=9), w.timeout_s)
    assert c.receive(Reply(Fetched(OFFSET_OUT_OF_RANGE, "offset_out_of_range"))).type == "fail"  # type: ignore[union-attr]
    assert c.consumer.positions["t0-1"] == 0


def test_a_member_fetches_no_older_leader_than_its_committed_leader_epoch_and_commits_its_own() -> None:
    w = workload(sub_via="subscribe")
    c = w.client(0, 0)
    assert c.invoke({"f": "subscribe", "key": None, "value": w.all_keys()}).type == "ok"
    c.invoke({"f": "poll", "key": None, "value": None, "time": 5})
    c.receive(Reply(CoordinatorFound(0, "none", "n2")))
    c.receive(Reply(GroupJoined(0, "none", 4, "m1", "m1", (("m1", b"t0"),))))
    c.receive(Reply(GroupSynced(0, "none", b'["t0-1"]')))
    step = c.receive(Reply(OffsetsFetched(0, "none", ((1, 145),), ((1, 9),))))
    assert isinstance(step, Request) and isinstance(step.body, Metadata)
    # the only metadata at hand names n3 at epoch 6, older than the commit's 9: no fetch, no reset
    done = c.receive(epoch_metadata(("n1", 9), ("n3", 6), ("n1", 9)))
    assert done.type == "fail" and done.error == "stale-metadata"
    assert c.consumer.positions == {"t0-1": 145}
    c.consumer.last_heartbeat = 5
    step = c.invoke({"f": "poll", "key": None, "value": None, "time": 6})
    step = c.receive(epoch_metadata(("n1", 9), ("n1", 10), ("n1", 9)))
    assert step == Request("n1", Fetch("t0", 1, 145, leader_epoch=10), w.timeout_s)
    assert c.receive(Reply(Fetched(0, "none", 146, ((145, b"7"),)))).type == "ok"  # type: ignore[union-attr]
    step = c.invoke({"f": "commit", "key": None, "value": None})
    assert step.body == CommitOffsets(GROUP, 4, "m1", "t0", ((1, 146),), ((1, 10),))


def test_an_explicit_assignment_is_checked_against_the_topic_and_the_nodes() -> None:
    nodes = ["n1", "n2", "n3"]
    w = QueueWorkload(nodes, 0, partitions=1, assignment={0: ["n2", "n3", "n1"]})
    assert w.create_topic().assignments == ((0, ("n2", "n3", "n1")),)
    assert QueueWorkload(nodes, 0).create_topic().assignments == ()
    bad = [
        ({1: ["n1", "n2", "n3"]}, "partitions 0..0"),
        ({0: ["n1", "n2"]}, "not 3 distinct replicas"),
        ({0: ["n1", "n1", "n2"]}, "not 3 distinct replicas"),
        ({0: ["n1", "n2", "n9"]}, "n9 not among the nodes"),
    ]
    for assignment, why in bad:
        with pytest.raises(ValueError, match=why):
            QueueWorkload(nodes, 0, partitions=1, assignment=assignment)
    with pytest.raises(ValueError, match="not a node name"):
        broker_id("x1")


def test_the_clients_use_only_what_queue_state_declares_and_the_workload_has_it() -> None:
    """The client modules are typed against `QueueState` (workload.py imports them, so they cannot import it):
    every attribute they read or set on the workload (`self.workload.x`, `workload.x`, `w.x`) is a member of
    QueueState, every member is used, and a QueueWorkload has each (it satisfies the Protocol structurally)."""
    members = {n for n in vars(QueueState) if not n.startswith("_")} | set(QueueState.__annotations__)
    used: dict[str, str] = {}
    for module in ("client_base", "client", "producer", "consumer", "groups", "transactions", "setup"):
        path = Path(workloads.queue.__file__).with_name(f"{module}.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            v = node.value
            on_self = isinstance(v, ast.Attribute) and v.attr == "workload" and ast.unparse(v.value) == "self"
            if on_self or (isinstance(v, ast.Name) and v.id in ("workload", "w")):
                used.setdefault(node.attr, f"{module}.py:{node.lineno}")
    assert {a: where for a, where in used.items() if a not in members} == {}, "not declared in QueueState"
    assert members - set(used) == set(), "declared in QueueState but no client uses it"
    w = workload(txn=True, idempotent=True)
    assert [m for m in sorted(members) if not hasattr(w, m)] == []
    assert all(callable(getattr(w, m)) for m in members if inspect.isfunction(vars(QueueState).get(m)))
