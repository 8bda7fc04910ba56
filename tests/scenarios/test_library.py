"""Every scenario in scenarios/ runs on the local backend and meets its own expectations.

Each run is rendered as JSON, JUnit and HTML into the test's tmp folder; when ``DRAGUARD_CI_REPORTS``
names a folder (``.ci/run`` sets it), the whole library run is rendered there once at the end
(``verdict.json``, ``junit.xml``, ``report.html``) for CI.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds for validation)
from draguard import reports
from draguard.harness.environment import run_environment
from draguard.harness.result import RunResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


def test_the_library_has_at_least_twelve_documented_scenarios() -> None:
    assert len(SCENARIOS) >= 12
    for path in SCENARIOS:
        head = path.read_text().splitlines()[0]
        assert head.startswith("# "), f"{path.name} must open with a comment block saying what it shows"


@pytest.fixture(scope="module")
def library_run() -> Iterator[RunResult]:
    run = RunResult("library", environment={**run_environment(), "started": time.time()})
    yield run
    out = os.environ.get("DRAGUARD_CI_REPORTS")
    if out and run.scenarios:
        run.environment["ended"] = time.time()
        reports.render(run, Path(out), ["json", "junit", "html"])


@pytest.mark.cluster
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_meets_its_expectations(path: Path, tmp_path: Path, library_run: RunResult) -> None:
    scenario = load_scenario(path)
    result = Runner(scenario, RunOptions(backend="local", report_dir=tmp_path)).run()
    assert not (tmp_path / "verdict.json").exists(), "the runner writes no report files itself"
    library_run.scenarios.append(result)
    reports.render(RunResult(scenario.name, [result]), tmp_path, ["json", "junit", "html"])
    problems = [f"{n}: expected {r.expected}, was {r.status}: {[v.message for v in r.violations][:3]}"
                for n, r in result.invariants.items() if not r.met]
    assert result.error is None, result.error
    assert result.ok, problems
    assert (tmp_path / "verdict.json").exists() and (tmp_path / scenario.name / "timeline.json").exists()
    assert (tmp_path / "junit.xml").exists() and (tmp_path / "report.html").exists()
    failed_steps = [s for s in result.steps if not s.ok]
    assert not failed_steps, failed_steps
