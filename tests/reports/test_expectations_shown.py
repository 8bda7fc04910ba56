"""An expectation beyond hold/violate (progress, an Event, evidence, a baseline) that was not met shows in
every renderer with its detail: a "NOT met" verdict always says why."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from draguard import reports
from draguard.harness.result import ExpectationResult, RunResult
from draguard.reports.terminal import print_summary
from report_samples import deadlock_result

DETAIL = "workloads [second] never reached Running within 30s (0 of 2 pods)"


def _result() -> RunResult:
    result = deadlock_result()
    s = result.scenarios[0]
    s.expectation_results += [ExpectationResult("progress", "second: Running", False, DETAIL),
                              ExpectationResult("event", "no FailedPrepareDynamicResources", True, "none came")]
    assert not s.ok and s.shortfalls[-1] == f"progress second: Running: not met {DETAIL}"
    return result


def test_the_terminal_says_which_expectation_was_not_met(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(_result())
    err = " ".join(capsys.readouterr().err.split())
    assert f"gang-deadlock-per-pod: expect progress second: Running: not met: {DETAIL}" in err
    assert "no FailedPrepareDynamicResources" not in err  # a met one is not repeated on the screen


def test_junit_allure_and_html_carry_each_expectation(tmp_path: Path) -> None:
    reports.render(_result(), tmp_path, ["junit", "allure", "html"])
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    failed = cases["expect progress second: Running"].find("failure")
    assert failed is not None and DETAIL in (failed.get("message") or "")
    assert cases["expect event no FailedPrepareDynamicResources"].find("failure") is None
    tests = {t["name"]: t for t in (json.loads(p.read_text()) for p in (tmp_path / "allure-results").glob("*-result.json"))}
    progress = tests["gang-deadlock-per-pod: expect progress second: Running"]
    assert progress["status"] == "failed" and DETAIL in progress["statusDetails"]["message"]
    assert tests["gang-deadlock-per-pod: expect event no FailedPrepareDynamicResources"]["status"] == "passed"
    html = (tmp_path / "report.html").read_text()
    assert "<h3>Expectations</h3>" in html and DETAIL in html and "✗ not met" in html
