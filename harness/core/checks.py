"""Judging a run: the test's checkers (as its workload composes them) over what the run left.

The one place that turns a TestSpec and a run's artifacts into a verdict, for a run just made (`test`,
`replay`, `shrink`, `explore`, `suite`, on either runtime) and for a stored one (`check RUN_DIR`): the
workload's `Checking` (its model, allowed anomalies, ww-deps) through `checkers.registry.judge`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checkers.errors import InputError
from checkers.history import History
from checkers.registry import Checking, judge, observed_of, stored_observations
from harness.core.spec import SpecError, TestSpec


def check_run(
    spec: TestSpec,
    history: History,
    events: Sequence[dict[str, Any]] | None,
    logs: Mapping[str, list[dict[str, Any]]] | None,
    observed: Mapping[str, Any] | None = None,
    partition_logs: Mapping[str, Mapping[str, list[dict[str, Any]]]] | None = None,
    main: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Every checker the run of `spec` needs, composed (false beats unknown beats true).

    `observed`: the runtime's own result (the simulator's invariants; real nodes that stopped on an illegal
    state), or None. `main`: the main phase's [start, end) in the history's ns, for the stats rule.
    """
    return judge(
        history,
        spec.checking(),
        events=events,
        logs=logs,
        partition_logs=partition_logs,
        observed=observed,
        main=main,
        time_limit=spec.check_time_limit,
    )


def judging(test: Mapping[str, Any]) -> tuple[Checking, float, dict[str, Any]]:
    """How a stored run's test (its test.json) is judged: its workload's checking, its checker budget and its
    configuration, for the Spark pipeline (`checkers.pipeline`, which does not import the harness). SpecError if
    it is no test."""
    spec = TestSpec.from_json(test)
    return spec.checking(), spec.check_time_limit, spec.config()


def stored_spec(run_dir: str | Path) -> TestSpec:
    """The TestSpec a stored run's test.json describes; InputError if it is missing or not one."""
    path = Path(run_dir) / "test.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("no test.json (is this a kraftwerk run directory?)", str(run_dir)) from None
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"unreadable test.json: {e}", str(run_dir)) from None
    try:
        return TestSpec.from_json(doc)
    except SpecError as e:
        raise InputError(str(e), str(run_dir)) from None


__all__ = ["check_run", "judging", "observed_of", "stored_observations", "stored_spec"]
