"""Every scenario in scenarios/ runs on the local backend and meets its own expectations, for the
right reason: each step ran on time and its fault fired, the expected progress happened, and every
expected violation carries the evidence listed here (independently of the scenario file).

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
from draguard.harness.core.environment import run_environment
from draguard.harness.result import RunResult, ScenarioResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario
from truth_evidence import EVIDENCE as TRUTH_EVIDENCE
from truth_evidence import check_evidence

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))

EVIDENCE: dict[str, dict[str, list[str]]] = {
    # scenario -> expected violated invariant -> text every one of which some violation must carry
    # (in its message, objects or devices)
    "gang-deadlock-per-pod": {"gang-atomic": ["/gang-a-", "/gang-b-", "gpu.draguard.dev/gpu-node-"]},
    "preempt-gang-member": {"gang-atomic": ["Pod/", "/batch-", "gpu.draguard.dev/gpu-node-", "partial"]},
    "reset-leak-forget-before-reset": {"no-leak": ["gpu.draguard.dev/gpu-node-0/"]},
    "legacy-extended-resource-mix": {"no-legacy-mix": ["/mixed-0", "nvidia.com/gpu"]},
}
"""Every incident scenario (one with expect.violate) must be listed."""


def _carried(result: ScenarioResult, invariant: str, text: str) -> bool:
    return any(text in v.message or any(text in o for o in v.objects) or any(text in d for d in v.devices)
               for v in result.invariants[invariant].violations)


def test_the_library_has_at_least_twelve_documented_scenarios() -> None:
    assert len(SCENARIOS) >= 12
    for path in SCENARIOS:
        head = path.read_text().splitlines()[0]
        assert head.startswith("# "), f"{path.name} must open with a comment block saying what it shows"


def test_every_incident_scenario_has_its_expected_evidence_listed() -> None:
    incidents = {p.stem for p in SCENARIOS if load_scenario(p).expect.violate}
    assert incidents == set(EVIDENCE) | set(TRUTH_EVIDENCE), "list the evidence of every incident scenario"
    for name in incidents & set(EVIDENCE):
        sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        assert set(EVIDENCE[name]) == set(sc.expect.violate)
        assert sc.expect.evidence, f"{name} must name in expect.evidence what its violation carries"


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
    result = Runner(scenario, RunOptions(backend="local")).run()
    library_run.scenarios.append(result)
    reports.render(RunResult(scenario.name, [result]), tmp_path, ["json", "junit", "html"])
    problems = [f"{n}: expected {r.expected}, was {r.status}: {[v.message for v in r.violations][:3]}"
                for n, r in result.invariants.items() if not r.met]
    assert result.error is None, result.error
    assert (tmp_path / "verdict.json").exists() and (tmp_path / scenario.name / "timeline.json").exists()
    assert (tmp_path / "junit.xml").exists() and (tmp_path / "report.html").exists()
    steps = [(s.name, s.status, s.detail) for s in result.steps if s.status != "ok"]
    assert not steps, steps
    for s in result.steps:
        assert s.ran is not None and s.finished is not None and s.ran <= s.finished
        assert s.fired is None or s.fired > 0
    unmet = [(e.rule, e.detail) for e in result.expectation_results if not e.met]
    assert not unmet, unmet
    assert result.ok, problems
    check_evidence(result)
    for invariant, texts in EVIDENCE.get(scenario.name, {}).items():
        for text in texts:
            assert _carried(result, invariant, text), f"{invariant} violations do not carry {text!r}"
    if scenario.name == "force-delete-driver-down":
        by = {s.name: s for s in result.steps}
        down, fd = by["down"], by["force-delete"]
        assert down.ran is not None and down.finished is not None and fd.ran is not None
        assert down.ran < fd.ran < down.finished, "the force-delete must happen while the driver is down"
    if scenario.name == "gang-deadlock-gang-scheduling":
        assert [e.met for e in result.expectation_results if e.kind == "progress"] == [True]


@pytest.mark.cluster
def test_the_gang_scheduling_fix_fails_when_no_gang_ever_runs() -> None:
    """Detection power of expect.progress: the same fix scenario where no gang can fit (3 GPUs per
    pod on 4-GPU nodes) holds every invariant by doing nothing, and must fail for that reason."""
    from draguard.harness.scenario import parse_scenario

    path = ROOT / "scenarios" / "gang-deadlock-gang-scheduling.yaml"
    text = path.read_text().replace("{name: gpu, deviceClassName: gpu.draguard.dev, count: 2}",
                                    "{name: gpu, deviceClassName: gpu.draguard.dev, count: 3}")
    text = text.replace("settle: {timeout: 20s, cleanup: 30s}", "settle: {timeout: 8s, cleanup: 20s}")
    scenario = parse_scenario(text, str(path))
    result = Runner(scenario, RunOptions(backend="local")).run()
    assert result.error is None, result.error
    assert all(r.met for r in result.invariants.values()), "nothing ran, so every invariant holds"
    [progress] = result.expectation_results
    assert not progress.met and progress.detail == "never reached during the run"
    assert not result.ok
