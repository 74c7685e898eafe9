"""The real-time interpreter with fake clients and a fake nemesis: history, crashes, timing, realised schedule."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from pathlib import Path
from typing import Any

import pytest

from checkers.history import read_jsonl
from harness.core.recorder import Recorder
from harness.real.interpreter import Applied, Completion, Interpreter, monotonic_clock
from workloads import generator as gen
from workloads.protocol import Failure, Reply, Request
from workloads.register import KvReply


class FakeClient:
    """Answers ok after `delay`; `info` for values in `crash`; raises for values in `boom`; hangs for `hang`."""

    timeout = 0.2

    def __init__(self, thread: int, process: int, log: list[tuple[int, int]], delay: float = 0.005) -> None:
        self.thread, self.process, self.delay = thread, process, delay
        log.append((thread, process))
        self.closed = False

    async def invoke(self, op: dict[str, Any]) -> Completion:
        await asyncio.sleep(self.delay)
        v = op.get("value")
        if v == "crash":
            return Completion("info", v, "timeout", "n1")
        if v == "boom":
            raise ConnectionError("boom")
        if v == "hang":
            await asyncio.sleep(100)
        return Completion("ok", v, None, "n1")

    async def close(self) -> None:
        self.closed = True


def make(tmp_path: Path, concurrency: int = 3, nemesis: Any = None) -> tuple[Interpreter, list[tuple[int, int]]]:
    opened: list[tuple[int, int]] = []
    clock = monotonic_clock()
    recorder = Recorder(clock, tmp_path / "history.jsonl")
    interp = Interpreter(
        concurrency,
        lambda t, p: FakeClient(t, p, opened),
        nemesis,
        recorder,
        clock,
        rng=random.Random(1),
    )
    return interp, opened


def run(interp: Interpreter, g: gen.Generator) -> None:
    async def main() -> None:
        try:
            await interp.run(g)
        finally:
            await interp.close()

    asyncio.run(main())


def test_crashed_process_reopens_as_process_plus_concurrency(tmp_path: Path) -> None:
    interp, opened = make(tmp_path)
    values = ["a", "crash", "b", "boom", "c", "d", "crash", "e"]
    g = gen.clients(gen.lift([{"f": "write", "key": "k", "value": v} for v in values]))
    run(interp, g)
    interp.recorder.close()
    history = read_jsonl(tmp_path / "history.jsonl")  # validates: one open op per process, dense indexes
    ops = history.operations()
    assert len(ops) == len(values)
    infos = [op for op in ops if op.type == "info"]
    assert len(infos) == 3 and {op.complete.error for op in infos} == {
        "timeout",
        "indeterminate: ConnectionError('boom')",
    }
    for crashed in infos:
        # the thread carries on as process + 3, with a client opened for it, and never reuses the old id
        later = [op for op in ops if op.call > crashed.call and op.process % 3 == crashed.process % 3]
        assert all(op.process != crashed.process for op in later)
        if later:
            assert later[0].process == crashed.process + 3
            assert (crashed.process % 3, crashed.process + 3) in opened
    assert all(t == p % 3 for t, p in opened)
    assert len(opened) == len(set(opened))


def test_a_hung_client_call_is_abandoned_as_info(tmp_path: Path) -> None:
    interp, _ = make(tmp_path, concurrency=1)
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("harness.real.interpreter.GUARD_S", 0.1)
        run(interp, gen.clients({"f": "write", "key": "k", "value": "hang"}))
    assert time.monotonic() - started < 5
    last = interp.recorder.ops[-1]
    assert (last.type, last.error) == ("info", "timeout (client hung)")


def test_nemesis_events_are_one_info_op_with_the_applied_value(tmp_path: Path) -> None:
    async def nemesis(op: dict[str, Any]) -> Applied:
        await asyncio.sleep(0.01)
        if op["f"] == "pause":
            raise RuntimeError("cannot pause")
        return Applied(["n3"], ["n3"])

    interp, _ = make(tmp_path, nemesis=nemesis)
    events = [{"at": 0, "package": "kill", "f": "kill", "value": "leader"}, {"at": 10**7, "f": "pause", "value": "x"}]
    run(interp, gen.nemesis(gen.schedule(events)))
    ops = interp.recorder.ops
    assert [(o.process, o.type, o.f, o.value) for o in ops] == [
        ("nemesis", "info", "kill", ["n3"]),
        ("nemesis", "info", "pause", "x"),
    ]
    assert ops[1].error == "RuntimeError: cannot pause"
    kill, pause = interp.nemesis_log
    assert kill["package"] == "kill" and kill["value"] == ["n3"] and kill["planned-at"] == 0 and kill["at"] >= 0
    assert "package" not in pause and pause["error"] == "RuntimeError: cannot pause"


def test_a_fault_due_later_does_not_hold_up_clients(tmp_path: Path) -> None:
    async def nemesis(op: dict[str, Any]) -> Applied:
        return Applied(op["value"], op["value"])

    interp, _ = make(tmp_path, concurrency=2, nemesis=nemesis)
    later = 0.5
    main = gen.any_of(
        gen.clients(gen.time_limit(later + 0.2, gen.repeat({"f": "read", "key": "k", "value": None}))),
        gen.nemesis(gen.schedule([{"at": int(later * 1e9), "package": "kill", "f": "kill", "value": ["n1"]}])),
    )
    started = time.monotonic()
    run(interp, main)
    elapsed = time.monotonic() - started
    ops = interp.recorder.ops
    fault = next(o for o in ops if o.process == "nemesis")
    before = [o for o in ops if o.process != "nemesis" and o.type == "ok" and o.time < fault.time]
    assert len(before) > 20  # clients ran at full speed while the fault waited for its time
    assert later * 1e9 <= fault.time < (later + 0.15) * 1e9
    assert 0.65 < elapsed < 1.5
    assert interp.ops[0]["node"] == "n1" and interp.ops[0]["client"] in (0, 1)


def test_stagger_sets_the_rate_and_time_limit_ends_the_run(tmp_path: Path) -> None:
    interp, _ = make(tmp_path, concurrency=5)
    g = gen.clients(gen.time_limit(1.0, gen.stagger(0.02, gen.Fn(lambda c: {"f": "read", "key": "k"}))))
    started = time.monotonic()
    run(interp, g)
    assert 0.95 < time.monotonic() - started < 1.5
    invokes = [o for o in interp.recorder.ops if o.type == "invoke"]
    assert 30 < len(invokes) < 75  # ~50 at a mean spacing of 20 ms


def test_final_reads_until_ok_per_key(tmp_path: Path) -> None:
    from workloads.register import Register

    workload = Register(["n1"], seed=1)
    final = workload.final(["r0", "r1", "r2", "r3", "r4"], threads=2)
    interp, _ = make(tmp_path, concurrency=2)
    run(interp, gen.clients(gen.time_limit(5, final)))
    reads = [o for o in interp.recorder.ops if o.type == "ok"]
    assert sorted(o.key for o in reads) == ["r0", "r1", "r2", "r3", "r4"]
    by_process = {o.key: o.process for o in reads}
    assert {by_process[k] for k in ("r0", "r2", "r4")} == {0} and {by_process[k] for k in ("r1", "r3")} == {1}


def test_cancel_is_honoured_even_when_wait_for_swallows_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.11's wait_for returns the inner result when it completes in the same step as a cancel,
    dropping the cancellation; Ctrl-C (asyncio.Runner cancels the main task) must still end the run."""
    real_wait = Interpreter._wait

    async def swallowing_wait(self: Interpreter, seconds: float | None) -> Any:
        try:
            return await real_wait(self, seconds)
        except asyncio.CancelledError:  # as 3.11 when a completion arrives in the same step: the cancel is lost
            assert self._done is not None
            return await self._done.get()

    monkeypatch.setattr(Interpreter, "_wait", swallowing_wait)
    interp, _ = make(tmp_path, concurrency=5)
    g = gen.clients(gen.time_limit(3.0, gen.stagger(0.002, gen.Fn(lambda c: {"f": "read", "key": "k"}))))

    async def main() -> float:
        task = asyncio.create_task(interp.run(g))
        await asyncio.sleep(0.3)
        task.cancel()
        started = time.monotonic()
        try:
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await interp.close()
        return time.monotonic() - started

    assert asyncio.run(main()) < 1.0


def test_a_worker_whose_cancel_was_swallowed_still_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hang behind a Ctrl-C that never exited: a client worker lost its one cancel in wait_for
    (Python 3.11 returns the result when it lands in the same step as the cancel) and went back to
    waiting for work, so asyncio.Runner.close() waited for it forever."""

    async def swallowing_wait_for(aw: Any, timeout: float | None) -> Any:
        inner = asyncio.ensure_future(aw)
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            return await inner  # the outer cancel is dropped

    monkeypatch.setattr(asyncio, "wait_for", swallowing_wait_for)
    interp, _ = make(tmp_path, concurrency=1)

    async def main() -> bool:
        interp._start_workers()
        worker = next(t for t in interp._tasks if t.get_name() == "worker-0")
        interp._inbox[0].put_nowait({"process": 0, "f": "read", "key": "k", "value": None})
        await asyncio.sleep(0.001)  # the worker is inside invoke
        worker.cancel()  # once, as asyncio.Runner.close() does
        await asyncio.wait({worker}, timeout=1.0)
        done = worker.done()
        await interp.close()
        return done

    assert asyncio.run(main()) is True


def test_close_loop_cancels_until_tasks_give_up_and_abandons_the_truly_stuck() -> None:
    from harness.real.interpreter import close_loop

    async def swallow_once() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(100)
        await asyncio.sleep(100)  # only a second cancel ends this

    async def never() -> None:
        while True:
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                continue

    async def start(*coros: Any) -> list[asyncio.Task[None]]:
        tasks = [asyncio.create_task(c, name=c.__name__) for c in coros]
        await asyncio.sleep(0)
        return tasks

    runner = asyncio.Runner()
    (once,) = runner.run(start(swallow_once()))
    close_loop(runner, grace=2.0)
    assert once.cancelled()

    messages: list[str] = []
    runner = asyncio.Runner()
    runner.run(start(never()))
    started = time.monotonic()
    close_loop(runner, grace=0.6, log=messages.append)
    assert time.monotonic() - started < 3.0
    assert messages and "never" in messages[0]


class FakeConnection:
    """Answers a KvRequest: `fail-refused` never leaves, `lost` gets no answer, anything else ok via n2."""

    def __init__(self, calls: list[Request]) -> None:
        self.calls = calls
        self.closed = False

    async def call(self, request: Request) -> Reply | Failure:
        self.calls.append(request)
        await asyncio.sleep(0.001)
        if request.body.value == "fail-refused":
            return Failure("connect-failed: refused", sent=False)
        if request.body.value == "lost":
            return Failure("timeout", sent=True)
        return Reply(KvReply("ok", request.body.value, None, leader="n2"))

    async def close(self) -> None:
        self.closed = True


def test_sans_io_clients_go_through_the_transport_one_connection_per_process(tmp_path: Path) -> None:
    from workloads.register import Register

    calls: list[Request] = []
    conns: list[FakeConnection] = []

    def transport() -> FakeConnection:
        conns.append(FakeConnection(calls))
        return conns[-1]

    workload = Register(["n1", "n2", "n3"], seed=4)
    clock = monotonic_clock()
    interp = Interpreter(1, workload.client, None, Recorder(clock, tmp_path / "h.jsonl"), clock, transport=transport)
    ops = [{"f": "write", "key": "r0", "value": v} for v in ("a", "fail-refused", "b", "lost", "c")]
    run(interp, gen.clients(ops))
    done = [(o.process, o.type, o.value) for o in interp.recorder.ops if o.type != "invoke"]
    assert done == [(0, "ok", "a"), (0, "fail", "fail-refused"), (0, "ok", "b"), (0, "info", "lost"), (1, "ok", "c")]
    assert len(conns) == 2 and conns[0].closed  # the process retired after `info`: its connection closed
    assert calls[1].node == "n2"  # the leader the first answer named (9 times in 10: seed 4 draws it)
