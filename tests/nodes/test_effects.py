"""One effect dispatch (nodes/effects.py): every effect type of every core has a handler method,
every handler (runtime driver, simulator node) has every method, and effects apply in order up
to a Fatal."""

import dataclasses
import inspect

import pytest

import nodes.broker.effects
import nodes.kv.effects
import nodes.raft.effects
from harness.sim.node import SimNode
from nodes.effects import METHODS, Dispatcher, EffectHandler, dispatch
from nodes.raft import AppendLog, Committed, Event, Fatal, Flush, Record, Send
from nodes.runtime.driver import NodeDriver

EFFECT_MODULES = (nodes.raft.effects, nodes.broker.effects, nodes.kv.effects)


def effect_types() -> set[type]:
    return {
        obj
        for module in EFFECT_MODULES
        for obj in vars(module).values()
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
    }


def protocol_methods() -> set[str]:
    return {name for name in vars(EffectHandler) if name.startswith("on_")}


def test_every_effect_type_has_one_method_of_the_protocol():
    assert set(METHODS) == effect_types()
    assert set(METHODS.values()) == protocol_methods()
    assert len(set(METHODS.values())) == len(METHODS)


@pytest.mark.parametrize("handler", [SimNode, NodeDriver])
def test_every_handler_implements_every_method(handler):
    missing = sorted(name for name in protocol_methods() if not callable(getattr(handler, name, None)))
    assert missing == []


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __getattr__(self, name: str):
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda effect: self.seen.append(f"{name}:{type(effect).__name__}")


def test_effects_apply_in_order_and_a_fatal_stops_the_step():
    handler = Recorder()
    record = Record(0, 1, b"x")
    effects = [AppendLog((record,)), Flush(1), Send(2, None), Fatal("boom"), Committed(1, (record,))]
    assert dispatch(effects, handler) is False
    assert handler.seen == ["on_append_log:AppendLog", "on_flush:Flush", "on_send:Send", "on_fatal:Fatal"]
    handler.seen.clear()
    assert Dispatcher(handler)([Event({"type": "hw"}), Committed(1, (record,))]) is True
    assert handler.seen == ["on_event:Event", "on_committed:Committed"]


def test_an_unknown_effect_is_refused_by_name():
    class Mystery:
        pass

    with pytest.raises(TypeError, match="Mystery"):
        dispatch([Mystery()], Recorder())
