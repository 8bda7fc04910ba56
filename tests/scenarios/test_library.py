"""Every scenario in scenarios/ runs on the local backend and meets its own expectations."""

from __future__ import annotations

from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds for validation)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario
from truth_evidence import check_evidence

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


def test_the_library_has_at_least_twelve_documented_scenarios() -> None:
    assert len(SCENARIOS) >= 12
    for path in SCENARIOS:
        head = path.read_text().splitlines()[0]
        assert head.startswith("# "), f"{path.name} must open with a comment block saying what it shows"


@pytest.mark.cluster
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_meets_its_expectations(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    result = Runner(scenario, RunOptions(backend="local", report_dir=tmp_path)).run()
    problems = [f"{n}: expected {r.expected}, was {r.status}: {[v.message for v in r.violations][:3]}"
                for n, r in result.invariants.items() if not r.met]
    assert result.error is None, result.error
    assert result.ok, problems
    assert (tmp_path / scenario.name / "verdict.json").exists()
    assert (tmp_path / scenario.name / "timeline.json").exists()
    failed_steps = [s for s in result.steps if not s.ok]
    assert not failed_steps, failed_steps
    check_evidence(result)
