"""examples/ci/: the GitHub Actions workflow and the GitLab CI job parse, and every command they run exists with
the options they give it (and the files they name are in the repository)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import build_parser
from harness.core.argtypes import UsageError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "ci"
RUN_VERBS = ("demo", "tests", "setup")  # ./run's own verbs


def github_commands(doc: dict[str, Any]) -> Iterator[str]:
    for job in doc["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                yield from step["run"].splitlines()


def gitlab_commands(doc: dict[str, Any]) -> Iterator[str]:
    for name, job in doc.items():
        if isinstance(job, dict) and not name.startswith("variables"):
            for key in ("before_script", "script", "after_script"):
                yield from job.get(key, [])


def kraftwerk_argvs(lines: Iterator[str]) -> list[list[str]]:
    out = []
    for line in lines:
        for command in line.split("&&"):
            words = shlex.split(command)
            if words and words[0] in (".venv/bin/kraftwerk", "kraftwerk"):
                out.append(words[1:])
            elif words and words[0] == "./run":
                assert words[1] in RUN_VERBS, line
    return out


def test_the_github_workflow() -> None:
    doc = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    triggers = doc[True]  # YAML 1.1 reads the key `on` as true
    assert {"push", "pull_request", "schedule"} <= set(triggers)
    assert set(doc["jobs"]) == {"smoke", "nightly"}
    uses = [s.get("uses", "") for job in doc["jobs"].values() for s in job["steps"]]
    assert any(u.startswith("mikepenz/action-junit-report") for u in uses)
    assert any(u.startswith("actions/upload-artifact") for u in uses)
    check_commands(kraftwerk_argvs(github_commands(doc)))


def test_the_gitlab_job() -> None:
    doc = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    assert doc["smoke"]["artifacts"]["reports"]["junit"] == "reports/smoke.xml"
    assert doc["nightly"]["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    check_commands(kraftwerk_argvs(gitlab_commands(doc)))


def check_commands(argvs: list[list[str]]) -> None:
    verbs = {argv[0] for argv in argvs}
    assert {"suite", "analyze"} <= verbs
    parser = build_parser()
    for argv in argvs:
        try:
            args = parser.parse_args(argv)
        except (UsageError, SystemExit) as e:
            pytest.fail(f"kraftwerk {shlex.join(argv)}: {e}")
        if args.command == "suite":
            assert (ROOT / args.suite).is_file(), args.suite
            assert args.junit and args.store
