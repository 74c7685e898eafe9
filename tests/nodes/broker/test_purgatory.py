"""The purgatory: try-complete-else-watch, completion by key, expiry in deadline order."""

from hypothesis import given
from hypothesis import strategies as st

from nodes.broker.purgatory import DelayedOperation, Purgatory


class Op(DelayedOperation):
    def __init__(self, name, deadline, log, ready=False):
        super().__init__(deadline)
        self.name, self.log, self.ready = name, log, ready

    def try_complete(self):
        return self.force_complete() if self.ready else False

    def on_expiration(self):
        self.log.append(("expired", self.name))

    def on_complete(self):
        self.log.append(("done", self.name))


def test_an_operation_that_can_complete_now_is_not_watched():
    log, purgatory = [], Purgatory()
    assert purgatory.try_complete_else_watch(Op("a", 10, log, ready=True), ["k"])
    assert log == [("done", "a")] and len(purgatory) == 0 and purgatory.next_deadline() is None


def test_check_and_complete_retries_the_watchers_of_a_key_once_each():
    log, purgatory = [], Purgatory()
    a, b = Op("a", 10, log), Op("b", 20, log)
    purgatory.try_complete_else_watch(a, ["k1", "k2"])
    purgatory.try_complete_else_watch(b, ["k2"])
    assert purgatory.check_and_complete("k1") == 0
    a.ready = True
    assert purgatory.check_and_complete("k2") == 1 and purgatory.check_and_complete("k1") == 0
    assert log == [("done", "a")] and purgatory.watched("k2") == 1 and purgatory.watched("k1") == 0
    assert purgatory.next_deadline() == 20


def test_expiry_force_completes_in_deadline_order():
    log, purgatory = [], Purgatory()
    for name, deadline in [("c", 30), ("a", 10), ("b", 20)]:
        purgatory.try_complete_else_watch(Op(name, deadline, log), ["k"])
    assert purgatory.expire(9) == 0
    assert purgatory.expire(20) == 2
    assert log == [("expired", "a"), ("done", "a"), ("expired", "b"), ("done", "b")]
    assert purgatory.next_deadline() == 30 and purgatory.watched("k") == 1


@given(st.lists(st.tuples(st.integers(0, 100), st.booleans()), max_size=20), st.integers(0, 100))
def test_every_operation_completes_exactly_once(ops, now):
    log, purgatory = [], Purgatory()
    made = [Op(i, deadline, log) for i, (deadline, _) in enumerate(ops)]
    for op in made:
        purgatory.try_complete_else_watch(op, [op.name % 3])
    for op, (_, ready) in zip(made, ops):
        op.ready = ready
    for key in range(3):
        purgatory.check_and_complete(key)
    purgatory.expire(now)
    done = [name for kind, name in log if kind == "done"]
    assert len(done) == len(set(done))
    expected = {i for i, (deadline, ready) in enumerate(ops) if ready or deadline <= now}
    assert set(done) == expected
    purgatory.expire(10**9)
    assert sorted(name for kind, name in log if kind == "done") == list(range(len(ops)))
