"""The shipped suite files never rot: the nightly suite covers every workload mode, nemesis package, real backend,
DB and seeded bug, and every suite file still runs, scaled down (`kraftwerk suite FILE --quick`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.db import registry as dbs
from harness.nemesis.schedule import PACKAGES
from harness.tools.suite import QUICK_TIME_LIMIT, Planned, load_suite
from tests.conftest import ROOT

SUITES = sorted((ROOT / "suites").glob("*.toml"))


def mode(spec: object) -> str:
    options = spec.workload_options  # type: ignore[attr-defined]
    if spec.workload != "queue":  # type: ignore[attr-defined]
        return spec.workload  # type: ignore[attr-defined]
    return "queue --txn" if options.txn else f"queue --sub-via {options.sub_via}"


def test_the_nightly_suite_covers_everything() -> None:
    runs = load_suite(ROOT / "suites" / "nightly.toml").runs
    specs = [r.spec for r in runs]
    assert all(s is not None for s in specs)
    modes = {mode(s) for s in specs}
    assert modes >= {"register", "queue --sub-via assign", "queue --sub-via subscribe", "queue --txn"}
    assert {p for s in specs for p in s.nemeses} == set(PACKAGES)
    assert {s.backend for s in specs} >= {"sim", "docker"}
    real_modes = {mode(s) for s in specs if s.backend != "sim"}
    assert real_modes >= {"register", "queue --sub-via subscribe"}
    assert {s.db for s in specs} >= {"kraftwerk", "etcd"}
    measured = {bug for r in runs if r.expect in ("invalid", "any") for bug in r.spec.bugs}
    assert measured == set(dbs.kind("kraftwerk").bugs), "every seeded bug's detection rate is measured"
    clean = [r for r in runs if not r.spec.bugs]
    assert clean and all(r.expect == "valid" for r in clean if r.spec.db == "kraftwerk")


def shape(run: Planned) -> str:
    """A combination of the matrix, whatever its time limit."""
    assert run.spec is not None
    return json.dumps({k: v for k, v in run.spec.config().items() if k != "time-limit"}, sort_keys=True, default=str)


@pytest.mark.parametrize("path", SUITES, ids=[p.stem for p in SUITES])
def test_quick_keeps_every_combination_once_and_short(path: Path) -> None:
    full, quick = load_suite(path).runs, load_suite(path, quick=True).runs
    assert {shape(r) for r in quick} == {shape(r) for r in full}
    assert len(quick) == len({shape(r) for r in full})
    assert all(r.spec.time_limit <= QUICK_TIME_LIMIT and r.expect != "invalid" for r in quick)


@pytest.mark.slow
@pytest.mark.needs("docker")
@pytest.mark.parametrize("path", SUITES, ids=[p.stem for p in SUITES])
def test_every_suite_file_runs_scaled_down(path: Path, tmp_path: Path) -> None:
    argv = ["suite", str(path), "--quick", "--store", str(tmp_path), "--parallel", "2"]
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True, cwd=ROOT, timeout=3000
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert " 0 failed, 0 unknown, 0 crashed" in r.stdout
