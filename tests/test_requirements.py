"""tests/requirements.py: a missing component skips a test locally and fails it under CI=true."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import conftest, requirements
from tests.requirements import Component, need, need_module

SKIPPED = pytest.skip.Exception
FAILED = pytest.fail.Exception


@pytest.fixture
def components(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Two fake components, one here and one missing; returns how often each was probed."""
    probed = {"here": 0, "gone": 0}

    def probe(name: str, why: str | None):  # noqa: ANN202
        def run() -> str | None:
            probed[name] += 1
            return why

        return run

    monkeypatch.setattr(requirements, "_seen", {})
    monkeypatch.setitem(requirements.COMPONENTS, "here", Component(probe("here", None)))
    monkeypatch.setitem(requirements.COMPONENTS, "gone", Component(probe("gone", "no gone on PATH"), "install gone"))
    return probed


@pytest.mark.parametrize("ci", [None, "false", "1", "yes"])
def test_outside_ci_a_missing_component_skips_the_test(
    monkeypatch: pytest.MonkeyPatch, components: dict[str, int], ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    need("here")
    with pytest.raises(SKIPPED, match=r"needs gone: no gone on PATH \(install gone\)"):
        need("here", "gone")


def test_under_ci_a_missing_component_fails_the_test_naming_it(
    monkeypatch: pytest.MonkeyPatch, components: dict[str, int]
) -> None:
    monkeypatch.setenv("CI", "true")
    need("here")
    with pytest.raises(FAILED, match=r"CI=true: this test needs gone, which is missing: no gone on PATH"):
        need("gone")


def test_each_component_is_probed_once(monkeypatch: pytest.MonkeyPatch, components: dict[str, int]) -> None:
    monkeypatch.delenv("CI", raising=False)
    for _ in range(3):
        need("here")
        with pytest.raises(SKIPPED):
            need("gone")
    assert components == {"here": 1, "gone": 1}
    requirements.forget("gone")
    with pytest.raises(SKIPPED):
        need("gone")
    assert components["gone"] == 2


def test_an_unknown_component_is_a_mistake_in_the_test() -> None:
    with pytest.raises(KeyError, match="unknown component 'gcc-9000'"):
        need("gcc-9000")


def test_lacking_skips_or_fails_for_a_probe_of_the_callers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(SKIPPED, match="needs nfnetlink_queue: no module"):
        requirements.lacking("nfnetlink_queue", "no module")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FAILED, match="needs nfnetlink_queue, which is missing: no module"):
        requirements.lacking("nfnetlink_queue", "no module")


def test_need_module_imports_or_skips_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert need_module("json").dumps([1]) == "[1]"
    with pytest.raises(SKIPPED, match="needs the Python package no-such-pkg: cannot import no_such_module_here"):
        need_module("no_such_module_here", "no-such-pkg")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FAILED, match="CI=true: this test needs the Python package no-such-pkg"):
        need_module("no_such_module_here", "no-such-pkg")


def test_the_needs_marker_goes_through_need(monkeypatch: pytest.MonkeyPatch, components: dict[str, int]) -> None:
    """tests/conftest.py applies `@pytest.mark.needs(...)` before the test's fixtures are set up."""
    item = SimpleNamespace(
        iter_markers=lambda name: [pytest.mark.needs("here", "gone").mark] if name == "needs" else []
    )
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(SKIPPED, match="needs gone"):
        conftest.pytest_runtest_setup(item)  # type: ignore[arg-type]
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FAILED, match="needs gone"):
        conftest.pytest_runtest_setup(item)  # type: ignore[arg-type]


def test_every_component_has_a_probe_that_answers() -> None:
    """The real probes run (whatever this machine has): each answers None or a reason, never raises."""
    for name in requirements.COMPONENTS:
        requirements.forget(name)
        why = requirements.why_missing(name)
        assert why is None or (isinstance(why, str) and why), name
