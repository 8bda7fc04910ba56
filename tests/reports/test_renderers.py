"""Each format renders what the result says: JUnit cases, Allure results, the terminal's signs and exit codes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from draguard import reports
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from draguard.harness.result import CheckResult, Evidence, InvariantResult, RunResult, ScenarioResult, StepResult
from draguard.reports.terminal import print_summary
from report_samples import broken_result, deadlock_result


def _with_checks(result: RunResult) -> RunResult:
    result.checks = [
        CheckResult("sanity.prepare.idempotent", "a second prepare returns the same devices", "kubelet dra manager",
                    "passed", duration=0.2),
        CheckResult("sanity.unprepare.unknown-claim", "unprepare of an unknown claim succeeds", "KEP-4381", "failed",
                    "the driver returned NotFound", [Evidence("NodeUnprepareResources(uid-x) -> NotFound")], 0.1),
        CheckResult("sanity.health.stream", "the driver streams device health", "KEP-4680", "skipped",
                    "the driver serves no dra-health"),
    ]
    return result


def test_junit_has_one_case_per_invariant_step_and_check(tmp_path: Path) -> None:
    result = _with_checks(broken_result())
    reports.render(result, tmp_path, ["junit"])
    root = ET.parse(tmp_path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    s = result.scenarios[0]
    assert len(cases) == len(s.invariants) + len(s.steps) + len(result.checks)
    leak = cases["invariant no-leak"].find("failure")
    assert leak is not None and "claim leaky still allocated after cleanup" in leak.get("message", "")
    assert "gpu.draguard.dev/gpu-node-1/gpu-3" in (leak.text or "")
    assert cases["invariant gang-atomic"].find("failure") is None  # violated, as expected: passed
    skipped = cases["invariant topology"].find("skipped")
    assert skipped is not None and "not checked" in skipped.get("message", "")
    assert cases["step 0-evict (evict)"].find("failure") is None
    assert cases["sanity.unprepare.unknown-claim"].find("failure") is not None
    assert cases["sanity.health.stream"].find("skipped").get("message") == "the driver serves no dra-health"  # type: ignore[union-attr]
    assert root.get("failures") == "3" and root.get("skipped") == "2"


def test_junit_marks_a_scenario_stopped_by_an_error(tmp_path: Path) -> None:
    s = ScenarioResult("s", "s.yaml", 1, hold=("no-leak",), error="port 6443 is taken", error_kind="HarnessError")
    s.invariants["no-leak"] = InvariantResult("no-leak", "free after cleanup", "not-checked", "hold")
    s.steps.append(StepResult("late-one", "evict", 9.0, False, "ran 4s late", due=5.0, ran=9.0, finished=9.2, status="late"))
    reports.render(RunResult("r", [s]), tmp_path, ["junit"])
    root = ET.parse(tmp_path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["run"].find("error").get("type") == "HarnessError"  # type: ignore[union-attr]
    assert "port 6443 is taken" in cases["invariant no-leak"].find("skipped").get("message", "")  # type: ignore[union-attr]
    assert cases["step late-one (evict)"].find("failure").get("type") == "late"  # type: ignore[union-attr]


def test_allure_results_carry_statuses_evidence_and_environment(tmp_path: Path) -> None:
    result = _with_checks(broken_result())
    reports.render(result, tmp_path, ["allure"])
    results_dir = tmp_path / "allure-results"
    tests = [json.loads(p.read_text()) for p in results_dir.glob("*-result.json")]
    by_name = {t["name"]: t for t in tests}
    s = result.scenarios[0]
    assert len(tests) == len(s.invariants) + 1 + len(result.checks)
    leak = by_name["gang-deadlock-per-pod: no-leak"]
    assert leak["status"] == "failed" and "claim leaky" in leak["statusDetails"]["message"]
    evidence = results_dir / leak["attachments"][0]["source"]
    assert json.loads(evidence.read_text())[0]["devices"] == ["gpu.draguard.dev/gpu-node-1/gpu-3"]
    assert by_name["gang-deadlock-per-pod: topology"]["status"] == "skipped"
    run = by_name["gang-deadlock-per-pod: run"]
    assert [st["name"] for st in run["steps"]] == ["0-evict (evict)"]
    assert {a["name"] for a in run["attachments"]} == {"timeline", "environment"}
    assert by_name["sanity.unprepare.unknown-claim"]["status"] == "failed"
    assert "draguardVersion=0.1.0" in (results_dir / "environment.properties").read_text()
    # rendering again replaces the folder whole
    reports.render(deadlock_result(), tmp_path, ["allure"])
    assert len(list(results_dir.glob("*-result.json"))) == len(deadlock_result().scenarios[0].invariants) + 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_exit_codes_follow_from_the_result() -> None:
    assert deadlock_result().exit_code == EXIT_OK
    assert broken_result().exit_code == EXIT_FAILED
    env = ScenarioResult("s", None, 1, error="kube-apiserver not found", error_kind="HarnessError")
    assert RunResult("r", [env]).exit_code == EXIT_USAGE
    assert RunResult("r", [env, *broken_result().scenarios]).exit_code == EXIT_USAGE
    stopped = ScenarioResult("s", None, 1, error="invariant no-leak could not be judged")
    assert RunResult("r", [stopped]).exit_code == EXIT_FAILED
    assert RunResult("r").exit_code == EXIT_USAGE  # nothing ran
    assert _with_checks(deadlock_result()).exit_code == EXIT_FAILED
    assert not _with_checks(deadlock_result()).ok


def test_terminal_never_checked_is_not_violated(capsys: pytest.CaptureFixture[str]) -> None:
    s = ScenarioResult("s", "s.yaml", 1, hold=("no-leak", "claim-atomic"), error="stopped early")
    s.invariants["no-leak"] = InvariantResult("no-leak", "free after cleanup", "not-checked", "hold")
    s.invariants["claim-atomic"] = InvariantResult("claim-atomic", "all or nothing", "violated", "hold", [Evidence("c half")])
    print_summary(RunResult("r", [s]))
    err = capsys.readouterr().err
    assert "–no-leak(not checked)" in err and "✗no-leak" not in err
    assert "✗claim-atomic(violated)" in err
    assert "not checked: no-leak" in err


def test_terminal_shows_one_error_for_an_unusable_environment(capsys: pytest.CaptureFixture[str]) -> None:
    s = ScenarioResult("s", "s.yaml", 1, hold=("no-leak",), error="/x: cannot load kubeconfig", error_kind="HarnessError")
    s.invariants["no-leak"] = InvariantResult("no-leak", "free after cleanup", "not-checked", "hold")
    print_summary(RunResult("r", [s]))
    err = capsys.readouterr().err
    assert "ERROR" in err and "s: error: /x: cannot load kubeconfig" in err
    assert "✗" not in err and "NOT met" not in err and "replay:" not in err


def test_a_scenario_that_missed_its_expectations_prints_how_to_replay_it(capsys: pytest.CaptureFixture[str]) -> None:
    failed = ScenarioResult("gang-x", "scenarios/gang-x.yaml", 42, hold=("gang-atomic",))
    failed.invariants["gang-atomic"] = InvariantResult(
        "gang-atomic", "a gang binds all or nothing", "violated", "hold", [Evidence("gang a is partial: 2 of 4 bound")]
    )
    print_summary(RunResult("r1", [failed]))
    err = capsys.readouterr().err
    assert "replay: draguard run scenarios/gang-x.yaml --seed 42" in err
    assert "gang-atomic should hold but was violated" in err
    assert "gang a is partial: 2 of 4 bound" in err
    # Played against a retargeted driver, the replay names the same driver and cluster.
    print_summary(RunResult("r2", [failed], environment={"replayOptions": [
        "--cluster", "local", "--driver", "test-driver.cdi.k8s.io", "--device-class", "test gpus"]}))
    err = capsys.readouterr().err
    assert ("replay: draguard run scenarios/gang-x.yaml --seed 42 --cluster local --driver test-driver.cdi.k8s.io "
            "--device-class 'test gpus'") in err


def test_a_check_run_renders_in_every_format_and_an_error_only_run_exits_2(tmp_path: Path) -> None:
    checks = _with_checks(RunResult("sanity")).checks
    run = RunResult("sanity", checks=checks)
    written = reports.render(run, tmp_path, ["terminal", "json", "junit", "html", "allure"])
    assert {f for f, _ in written} == {"json", "junit", "html", "allure"}
    page = (tmp_path / "report.html").read_text()
    assert "sanity.unprepare.unknown-claim" in page and "the driver returned NotFound" in page
    assert reports.load_report(tmp_path).checks == checks
    assert run.exit_code == EXIT_FAILED
    errored = RunResult("sanity", checks=[CheckResult("sanity.x", "r", "s", "error", "socket gone"), checks[0]])
    assert errored.exit_code == EXIT_USAGE and not errored.ok
    assert RunResult("sanity", checks=[checks[0], checks[2]]).exit_code == EXIT_OK


def test_shortfalls_name_what_kept_a_scenario_from_ok() -> None:
    assert deadlock_result().scenarios[0].shortfalls == []
    broken = broken_result().scenarios[0]
    assert [f.split(":")[0] for f in broken.shortfalls] == ["no-leak", "no-double-allocation"]
    assert "violated, expected hold" in broken.shortfalls[0]
    s = ScenarioResult("s", None, 1, error="stopped early",
                       steps=[StepResult("0-x", "driver-restart", 1.0, False, "never fired", status="not-fired"),
                              StepResult("1-y", "node-down", 2.0, False, "skipped", optional=True, status="error")])
    assert s.shortfalls == ["error: stopped early", "step 0-x (driver-restart): not-fired never fired"]
