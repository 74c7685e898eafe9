"""Linearizable keyed registers (read/write/cas) replicated through the raft core."""

from .commands import Command, CommandError, decode_command, encode_command
from .effects import FAIL, INFO, OK, ClientReply
from .machine import Outcome, RegisterMachine
from .node import KVNode

__all__ = [
    "FAIL",
    "INFO",
    "OK",
    "ClientReply",
    "Command",
    "CommandError",
    "KVNode",
    "Outcome",
    "RegisterMachine",
    "decode_command",
    "encode_command",
]
