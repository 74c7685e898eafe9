"""`kraftwerk suite`: TOML matrices, validation, Jepsen test-all exit codes, JUnit output, real runs."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from checkers.pipeline.config import config_label
from harness.tools.suite import (
    Outcome,
    Planned,
    Suite,
    SuiteError,
    _judge,
    exit_code_test_all,
    junit_xml,
    known_options,
    load_suite,
)

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )


def write(tmp_path: Path, text: str, name: str = "suite.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- JUnit XML: the common schema (Ant / Jenkins junit-10 / GitLab), encoded as checks ---------------

_INT = re.compile(r"^[0-9]+$")
_DECIMAL = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$")
SCHEMA = {
    # element: (required attributes, optional attributes, allowed children)
    "testsuites": (
        set(),
        {"name", "tests", "failures", "errors", "skipped", "disabled", "time", "timestamp"},
        {"testsuite"},
    ),
    "testsuite": (
        {"name", "tests"},
        {"failures", "errors", "skipped", "disabled", "time", "timestamp", "hostname", "id", "package", "file"},
        {"properties", "testcase", "system-out", "system-err"},
    ),
    "properties": (set(), set(), {"property"}),
    "property": ({"name", "value"}, set(), set()),
    "testcase": (
        {"name"},
        {"classname", "time", "file", "line", "assertions", "status"},
        {"skipped", "error", "failure", "system-out", "system-err"},
    ),
    "failure": (set(), {"message", "type"}, set()),
    "error": (set(), {"message", "type"}, set()),
    "skipped": (set(), {"message"}, set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}
_INT_ATTRS = {"tests", "failures", "errors", "skipped", "disabled", "assertions", "line"}


def validate_junit(root: ET.Element) -> list[str]:
    """Problems with a JUnit report (empty when it conforms); structure, types, order and counts."""
    problems: list[str] = []

    def walk(el: ET.Element, path: str) -> None:
        if el.tag not in SCHEMA:
            problems.append(f"{path}: unknown element <{el.tag}>")
            return
        required, optional, children = SCHEMA[el.tag]
        for a in sorted(required - set(el.attrib)):
            problems.append(f"{path}: missing attribute {a}")
        for a in sorted(set(el.attrib) - required - optional):
            problems.append(f"{path}: unexpected attribute {a}")
        for a, v in el.attrib.items():
            if a in _INT_ATTRS and not _INT.match(v):
                problems.append(f"{path}@{a}: not a non-negative integer: {v!r}")
            if a == "time" and not _DECIMAL.match(v):
                problems.append(f"{path}@time: not a non-negative decimal: {v!r}")
            if a == "timestamp" and not _TIMESTAMP.match(v):
                problems.append(f"{path}@timestamp: not an ISO 8601 date-time without zone: {v!r}")
        if not children and len(el):
            problems.append(f"{path}: <{el.tag}> must not have child elements")
        for i, child in enumerate(el):
            if child.tag not in children:
                problems.append(f"{path}: <{child.tag}> not allowed in <{el.tag}>")
            walk(child, f"{path}/{child.tag}[{i}]")
        if el.tag == "testsuite":
            order = [c.tag for c in el]
            if "properties" in order and order.index("properties") != 0:
                problems.append(f"{path}: <properties> must come first")
            cases = el.findall("testcase")
            counted = {
                "tests": len(cases),
                "failures": sum(1 for c in cases if c.find("failure") is not None),
                "errors": sum(1 for c in cases if c.find("error") is not None),
                "skipped": sum(1 for c in cases if c.find("skipped") is not None),
            }
            for a, n in counted.items():
                if a in el.attrib and int(el.attrib[a]) != n:
                    problems.append(f"{path}@{a}={el.attrib[a]} but {n} counted")
        if el.tag == "testcase":
            outcomes = [c.tag for c in el if c.tag in ("failure", "error", "skipped")]
            if len(outcomes) > 1:
                problems.append(f"{path}: more than one outcome {outcomes}")
            order = [c.tag for c in el]
            if order != sorted(order, key=lambda t: t.startswith("system")):
                problems.append(f"{path}: system-out/err must follow the outcome")

    if root.tag not in ("testsuites", "testsuite"):
        return [f"root element is <{root.tag}>, expected <testsuites> or <testsuite>"]
    walk(root, root.tag)
    if root.tag == "testsuites":
        for a in ("tests", "failures", "errors", "skipped"):
            if a in root.attrib:
                total = sum(int(s.get(a, "0")) for s in root.findall("testsuite"))
                if int(root.attrib[a]) != total:
                    problems.append(f"testsuites@{a}={root.attrib[a]} but the suites add up to {total}")
    return problems


def test_validator_catches_broken_reports() -> None:
    bad = ET.fromstring(
        '<testsuites tests="2"><testsuite name="s" tests="2" failures="0" time="x">'
        '<testcase name="a"><failure/><error/></testcase><testcase classname="c"/><bogus/></testsuite></testsuites>'
    )
    problems = "\n".join(validate_junit(bad))
    for expected in (
        "time: not a non-negative decimal",
        "failures=0 but 1 counted",
        "more than one outcome",
        "missing attribute name",
        "unknown element <bogus>",
    ):
        assert expected in problems


# -- planning and validation ---------------------------------------------------------------------------


def test_matrix_expands_every_dimension(tmp_path: Path) -> None:
    suite = load_suite(
        write(
            tmp_path,
            """
            [suite]
            name = "m"
            seeds = 2
            [defaults]
            time-limit = 7
            [[matrix]]
            nemeses = ["partition", "kill,pause"]
            nodes = [3, 5]
            [[matrix]]
            bugs = ["stale-read", ["forget-vote", "lazy-flush"]]
            expect = "invalid"
            seeds = [40]
            """,
        )
    )
    assert suite.name == "m"
    assert len(suite.runs) == 2 * 2 * 2 + 2
    first = suite.runs[0]
    assert first.seed == 1 and first.argv[-2:] == ("--seed", "1")
    assert "--time-limit" in first.argv and "7" in first.argv
    bug_runs = [r for r in suite.runs if r.expect == "invalid"]
    assert [r.seed for r in bug_runs] == [40, 40]
    assert bug_runs[1].config.endswith("/bugs=forget-vote+lazy-flush")
    assert bug_runs[1].argv.count("--bug") == 2
    assert {r.config for r in suite.runs[:8]} == {
        f"register/sim/{n}/concurrency=10,interval=5,nodes={k},time-limit=7"
        for n in ("partition", "kill+pause")
        for k in (3, 5)
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[matrix]]\nflux = 'all'\nquorum-size = 2\n", "unknown option(s) flux, quorum-size"),
        ("[[matrix]]\nexpect = 'maybe'\n", "expect must be one of valid, invalid, any"),
        ("[[matrix]]\nseeds = []\n", "seeds must be a non-empty list"),
        ("[[matrix]]\nseeds = {count = 0}\n", "seeds count must be a positive integer"),
        ("[[matrix]]\nnodes = 0\n", "--nodes must be between 1 and 15"),
        ("[[matrix]]\nbugs = ['no-such-bug']\n", "--bug no-such-bug: not a seeded bug of --db kraftwerk"),
        ("[[matrix]]\nnemeses = ['flood']\n", "unknown nemesis flood"),
        ("[[matrix]]\nbackends = ['mars']\n", "invalid choice: 'mars'"),
        ("[suite]\nparalel = 2\n[[matrix]]\n", "unknown [suite] key(s) paralel"),
        ("[suite]\n", "needs at least one [[matrix]] entry"),
        ("[matrix\n", "not valid TOML"),
        ("[[matrix]]\nnodes = []\n", "empty list of values"),
    ],
)
def test_bad_suites_are_rejected_with_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SuiteError, match=re.escape(message)):
        load_suite(write(tmp_path, text))


def test_bad_suite_exits_254_before_running_anything(tmp_path: Path) -> None:
    r = kraftwerk("suite", str(write(tmp_path, "[[matrix]]\nflux = 'all'\n")), "--store", str(tmp_path / "s"))
    assert r.returncode == 254
    assert "unknown option(s) flux" in r.stderr
    assert not (tmp_path / "s").exists()
    assert kraftwerk("suite", str(tmp_path / "missing.toml")).returncode == 254


def test_queue_options_are_matrix_dimensions(tmp_path: Path) -> None:
    # options `kraftwerk test` gained later (acks, min-isr) are accepted without touching the suite code
    suite = load_suite(
        write(tmp_path, "[[matrix]]\nworkloads = ['queue']\nacks = ['all', '1']\nmin-isr = [1, 2]\nseeds = [5]\n")
    )
    assert len(suite.runs) == 4
    assert len({r.config for r in suite.runs}) == 4
    assert any("acks=1," in r.config and "min-isr=1," in r.config for r in suite.runs)
    assert all(r.argv[:2] == ("--workload", "queue") for r in suite.runs)


def test_known_options_follow_the_test_command() -> None:
    names = set(known_options())
    assert {"nodes", "concurrency", "time-limit", "interval", "bug", "check-time-limit"} <= names
    assert not names & {"seed", "store", "name", "workload", "backend", "nemesis"}


def test_test_all_exit_priority() -> None:
    # worst of: crashed (255) > failed (1) > unknown (2) > all passed (0)
    assert exit_code_test_all([]) == 0
    assert exit_code_test_all(["passed", "skipped"]) == 0
    assert exit_code_test_all(["passed", "failed"]) == 1
    assert exit_code_test_all(["failed", "unknown"]) == 1  # a finding outranks an inconclusive run
    assert exit_code_test_all(["passed", "unknown"]) == 2
    assert exit_code_test_all(["failed", "unknown", "crashed", "passed"]) == 255


# -- real runs ------------------------------------------------------------------------------------------

MIXED = """
[suite]
name = "mixed"
seeds = [1, 2]

[defaults]
time-limit = 5

[[matrix]]
nemeses = ["partition"]

[[matrix]]
name = "caught"
bugs = ["stale-read"]
time-limit = 20
seeds = [1]
expect = "invalid"

[[matrix]]
name = "slow"
nemeses = ["kill"]
seeds = [3]
timeout = 0.05

[[matrix]]
nemeses = ["none"]
skip = "not in this suite"
seeds = [9]
"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("suite")
    suite = write(tmp, MIXED)
    r = kraftwerk(
        "suite", str(suite), "--store", str(tmp / "store"), "--junit", str(tmp / "out" / "junit.xml"), "--parallel", "2"
    )
    return r, tmp


def test_suite_runs_every_test_in_its_own_run_directory(mixed: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    r, tmp = mixed
    assert r.returncode == 255, r.stdout + r.stderr  # a crashed (timed-out) run beats everything
    runs = sorted(p.parent for p in (tmp / "store").glob("*/*/test.json"))
    assert len(runs) >= 3  # the timed-out run may or may not have created its directory
    assert len({p for p in runs}) == len(runs)
    seeds = {json.loads((p / "test.json").read_text())["seed"] for p in runs if (p / "results.json").exists()}
    assert seeds == {1, 2}
    # the suite's configuration label is the one the pipeline computes from test.json
    for p in runs:
        test = json.loads((p / "test.json").read_text())
        if test["bugs"]:
            assert config_label(test).endswith("/bugs=stale-read")
    assert "Suite summary" in r.stdout and "Runs that did not pass" in r.stdout
    assert "3 passed, 0 failed, 0 unknown, 1 crashed, 1 skipped" in r.stdout


def test_junit_report(mixed: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, tmp = mixed
    tree = ET.parse(tmp / "out" / "junit.xml")
    root = tree.getroot()
    assert validate_junit(root) == []
    assert root.attrib["tests"] == "5" and root.attrib["errors"] == "1" and root.attrib["skipped"] == "1"
    assert root.attrib["failures"] == "0"
    cases = root.findall("./testsuite/testcase")
    assert [c.attrib["name"] for c in cases] == ["seed=1", "seed=2", "seed=1", "seed=3", "seed=9"]
    assert cases[0].attrib["classname"] == "register/sim/partition/concurrency=10,interval=5,nodes=5,time-limit=5"
    error = cases[3].find("error")
    assert error is not None and "timed out" in error.attrib["message"]
    assert "kraftwerk test --workload register --backend sim --nemesis kill" in (error.text or "")
    assert cases[4].find("skipped").attrib["message"] == "not in this suite"
    caught = cases[2].find("system-out").text or ""
    assert "anomaly types: nonlinearizable" in caught and "--bug stale-read" in caught


def test_failures_carry_anomalies_and_reproduce_and_exit_1(tmp_path: Path) -> None:
    # a clean run expected invalid (the bug is not reachable in 5 s): a failure, exit 1
    suite = write(tmp_path, "[[matrix]]\ntime-limit = 5\nbugs = ['stale-read']\nexpect = 'invalid'\nseeds = [1]\n")
    r = kraftwerk("suite", str(suite), "--store", str(tmp_path / "s"), "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 1, r.stdout + r.stderr
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert validate_junit(root) == []
    failure = root.find("./testsuite/testcase/failure")
    assert failure is not None and failure.attrib["type"] == "missed-bug"
    assert "--seed 1 --bug stale-read" in (failure.text or "")


def test_invalid_run_is_a_failure_with_anomaly_types(tmp_path: Path) -> None:
    suite = write(tmp_path, "[[matrix]]\ntime-limit = 20\nbugs = ['stale-read']\nseeds = [1]\n")
    r = kraftwerk("suite", str(suite), "--store", str(tmp_path / "s"), "--junit", str(tmp_path / "j.xml"))
    assert r.returncode == 1, r.stdout + r.stderr
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert validate_junit(root) == []
    failure = root.find("./testsuite/testcase/failure")
    assert failure is not None and failure.attrib["type"] == "invalid"
    assert failure.attrib["message"] == "invalid: nonlinearizable"
    assert "anomaly types: nonlinearizable" in (failure.text or "")
    assert "reproduce: kraftwerk test" in (failure.text or "") and "--seed 1 --bug stale-read" in (failure.text or "")


def _outcome(tmp_path: Path, name: str, results: dict | None, exit_code: int, expect: str = "valid") -> Outcome:
    run_dir = tmp_path / name
    run_dir.mkdir()
    if results is not None:
        (run_dir / "results.json").write_text(json.dumps(results))
    planned = Planned(index=0, entry=1, config="c", name="t", seed=7, argv=("--seed", "7"), expect=expect)
    outcome = Outcome(planned, exit=exit_code, run_dir=str(run_dir), reproduce=planned.reproduce)
    _judge(outcome)
    return outcome


def test_judging_verdicts_against_expectations(tmp_path: Path) -> None:
    unknown = _outcome(tmp_path, "u", {"valid": "unknown", "linearizable": {"valid": "unknown", "cause": "timeout"}}, 2)
    assert unknown.status == "unknown" and "timeout" in unknown.message
    assert _outcome(tmp_path, "v", {"valid": True}, 0).status == "passed"
    assert _outcome(tmp_path, "w", {"valid": True}, 0, expect="invalid").status == "failed"
    assert _outcome(tmp_path, "x", {"valid": False, "anomaly-types": ["x"]}, 1, expect="invalid").status == "passed"
    assert _outcome(tmp_path, "y", {"valid": False}, 1, expect="any").status == "passed"
    assert _outcome(tmp_path, "z", None, 255).status == "crashed"  # no results.json
    assert _outcome(tmp_path, "z2", {"valid": True}, 254).status == "crashed"  # exit code without a verdict
    # in JUnit an unknown run is a failure of type "unknown", a crash an error
    suite = Suite(name="s", path="s.toml", description="", parallel=None, store=None, runs=[])
    crashed = _outcome(tmp_path, "z3", None, 255)
    root = junit_xml(suite, [unknown, crashed], dt.datetime(2026, 1, 2, 3, 4, 5), 1.5).getroot()
    assert validate_junit(root) == []
    assert root.find("./testsuite/testcase/failure").attrib["type"] == "unknown"
    assert root.find("./testsuite/testcase/error").attrib["type"] == "crashed"
    assert root.find("./testsuite").attrib["timestamp"] == "2026-01-02T03:04:05"


def test_shipped_suites_load() -> None:
    smoke = load_suite(ROOT / "suites" / "smoke.toml")
    nightly = load_suite(ROOT / "suites" / "nightly.toml")
    assert smoke.name == "smoke" and 30 <= len(smoke.runs) <= 120
    assert any(r.expect == "invalid" for r in smoke.runs)
    assert all(r.timeout <= 600 for r in smoke.runs)
    assert len(nightly.runs) > len(smoke.runs)


def test_live_and_summary_tables_render(tmp_path: Path) -> None:
    from rich.console import Console

    from harness.tools.suite import live_table, summary_tables

    passed = _outcome(tmp_path, "p", {"valid": True}, 0)
    failed = _outcome(tmp_path, "f", {"valid": False, "anomaly-types": ["nonlinearizable"]}, 1)
    queued = Outcome(passed.planned)
    console = Console(record=True, width=200)
    console.print(live_table([passed, failed, queued], "demo"))
    for table in summary_tables([passed, failed, queued]):
        console.print(table)
    text = console.export_text()
    assert "demo: 2/3 done" in text and "invalid: nonlinearizable" in text
    assert "Suite summary" in text and "Runs that did not pass" in text and "--seed 7" in text


@pytest.mark.slow
def test_smoke_suite_passes_and_its_junit_validates(tmp_path: Path) -> None:
    """The CI gate itself: `kraftwerk suite suites/smoke.toml --junit out.xml` exits 0 with valid JUnit."""
    out = tmp_path / "smoke.xml"
    r = kraftwerk("suite", str(ROOT / "suites" / "smoke.toml"), "--junit", str(out), "--store", str(tmp_path / "s"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    root = ET.parse(out).getroot()
    assert validate_junit(root) == []
    cases = root.findall(".//testcase")
    assert len(cases) >= 70 and not root.findall(".//failure") and not root.findall(".//error")


def test_quiet_prints_the_summary_without_a_line_per_run(tmp_path: Path) -> None:
    suite = write(tmp_path, "[[matrix]]\ntime-limit = 3\nseeds = [1, 2]\n")
    loud = kraftwerk("suite", str(suite), "--store", str(tmp_path / "a"))
    quiet = kraftwerk("suite", str(suite), "--store", str(tmp_path / "b"), "-q")
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    assert "[1/2]" in loud.stdout + loud.stderr
    assert "[1/2]" not in quiet.stdout + quiet.stderr
    assert "2 passed, 0 failed" in quiet.stdout
