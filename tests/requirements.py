"""The one place that decides what a test does when a component it needs is missing.

Locally a test whose component (the docker engine, root, etcd, Java, Chromium, …) is missing is
skipped, with the reason. Under CI (the environment variable CI is "true", as `./run tests` and CI
set it) it fails instead, naming the component: CI must run every test, and a skip there would hide
a test that never ran.

    need("etcd")                          # in a test or fixture
    @pytest.mark.needs("root", "iproute2")  # on a test, class or module (tests/conftest.py applies it)
    kafka = need_module("confluent_kafka", "confluent-kafka")  # an optional Python package, at import
    lacking("nfnetlink_queue", why)       # when the caller probed the component itself

Every probe runs once per session (the result is kept).
"""

from __future__ import annotations

import importlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

__all__ = ["COMPONENTS", "Component", "forget", "in_ci", "lacking", "need", "need_module", "why_missing"]


@dataclass(frozen=True)
class Component:
    """Something a test may need: `probe()` is None when it is here, else why not; `hint` says how to get it."""

    probe: Callable[[], str | None]
    hint: str = ""


def _command(*names: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        if any(shutil.which(n) for n in names):
            return None
        return f"no {' or '.join(repr(n) for n in names)} on PATH"

    return probe


def _root() -> str | None:
    return None if os.geteuid() == 0 else f"running as uid {os.geteuid()}, not root"


def _docker_engine() -> str | None:
    try:
        import docker

        docker.from_env(timeout=30).ping()
    except Exception as e:  # noqa: BLE001 - any failure means no engine to use
        return f"no docker engine: {type(e).__name__}: {e}"
    return None


def _libfaketime() -> str | None:
    if list(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1")):
        return None
    return "no /usr/lib/*/faketime/libfaketimeMT.so.1"


COMPONENTS: dict[str, Component] = {
    "root": Component(_root, "run the tests as root (network namespaces, iptables)"),
    "iproute2": Component(_command("ip"), "apt-get install iproute2"),
    "iptables": Component(_command("iptables"), "apt-get install iptables"),
    "docker": Component(_docker_engine, "a running Docker engine the tests can reach"),
    "docker-cli": Component(_command("docker"), "the docker command"),
    "etcd": Component(_command("etcd"), "./run setup (apt-get install etcd-server)"),
    "gcc": Component(_command("gcc"), "./run setup (apt-get install gcc libc6-dev)"),
    "libfaketime": Component(_libfaketime, "./run setup (apt-get install libfaketime)"),
    "java": Component(_command("java"), "Java 17 or 21 for Spark (apt-get install openjdk-17-jre-headless)"),
    "chromium": Component(_command("chromium", "chromium-browser"), "apt-get install chromium"),
}

_seen: dict[str, str | None] = {}


def in_ci() -> bool:
    """Whether this is CI: the environment variable CI is "true" (what `./run tests` and CI runners set)."""
    return os.environ.get("CI") == "true"


def why_missing(name: str) -> str | None:
    """None when component `name` is here, else why not (probed once per session)."""
    if name not in COMPONENTS:
        raise KeyError(f"unknown component {name!r} (known: {', '.join(sorted(COMPONENTS))})")
    if name not in _seen:
        _seen[name] = COMPONENTS[name].probe()
    return _seen[name]


def forget(name: str) -> None:
    """Probe component `name` again next time (after installing it)."""
    _seen.pop(name, None)


def lacking(component: str, why: str, hint: str = "") -> NoReturn:
    """`component` is missing (`why`): skip the test, or under CI fail it."""
    how = f" ({hint})" if hint else ""
    if in_ci():
        pytest.fail(f"CI=true: this test needs {component}, which is missing: {why}{how}", pytrace=False)
    pytest.skip(f"needs {component}: {why}{how}")


def need(*names: str) -> None:
    """Every component in `names` must be here: otherwise skip the test, or under CI fail it."""
    for name in names:
        why = why_missing(name)
        if why is not None:
            lacking(name, why, COMPONENTS[name].hint)


def need_module(module: str, package: str | None = None) -> ModuleType:
    """Import an optional Python module (`package`: what pip calls it); when it is missing, skip the test
    (the whole test module when called at import), or under CI fail it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        what = f"the Python package {package or module}"
        why = f"cannot import {module}: {e}"
        if in_ci():
            pytest.fail(f"CI=true: this test needs {what}, which is missing: {why} (./run setup)", pytrace=False)
        pytest.skip(f"needs {what}: {why} (./run setup)", allow_module_level=True)
