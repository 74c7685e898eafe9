"""The register state machine: applies committed commands in log order (pure, deterministic)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .commands import Command


@dataclass(frozen=True, slots=True)
class Outcome:
    """Result of applying one command. ``ok`` False is a definite failure (cas did not swap)."""

    ok: bool
    value: Any
    error: str | None = None


class RegisterMachine:
    """Keyed registers, initially null. ``applied`` is the next log offset to apply."""

    def __init__(self) -> None:
        self.registers: dict[str, Any] = {}
        self.applied = 0

    def read(self, key: str) -> Any:
        """Local value, without any consistency guarantee."""
        return self.registers.get(key)

    def apply(self, command: Command) -> Outcome:
        current = self.registers.get(command.key)
        if command.f == "read":
            return Outcome(True, current)
        if command.f == "write":
            self.registers[command.key] = command.value
            return Outcome(True, command.value)
        expected, new = command.value
        if current == expected:
            self.registers[command.key] = new
            return Outcome(True, [expected, new])
        return Outcome(False, [expected, new], "cas-mismatch")
