"""Every violation counts: an invariant the run judged must hold unless ``expect.violate`` names it or
``expect.ignore`` excuses it with a reason; every renderer shows every violated invariant.

The scenario side is real (files parsed by the loader); the run side is the result a run ends with,
built as ``Runner._finish`` builds it (:meth:`ScenarioResult.expectation` per registered invariant)
with a synthesized violation, so no cluster is needed. The CLI run of a gang against the
``incomplete-cdi`` mutant on both node agents is in test_every_violation_counts_cli.py.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

import draguard.chaos  # noqa: F401  (registers the fault kinds)
from draguard import reports
from draguard.cli.main import main
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, ScenarioError
from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants import NAMES
from draguard.harness.result import Evidence, InvariantResult, RunResult, ScenarioResult, Status, expectation_of
from draguard.harness.scenario import discover, load_scenario, parse_scenario
from draguard.harness.scenario.checks import lacking
from draguard.harness.scenario.types import Scenario
from draguard.reports.diff import diff_runs
from draguard.reports.terminal import print_summary

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: gang}
spec:
  driver: {interpose: true}
  nodes:
    - namePrefix: gpu-node
      count: 2
      topology: {gpus: 2}
  deviceClasses:
    - name: gpu.draguard.dev
      selectors: ["device.driver == 'gpu.draguard.dev'"]
  workloads:
    - name: llm
      replicas: 2
      claims:
        - name: gpus
          requests: [{name: gpu, deviceClassName: gpu.draguard.dev, count: 2}]
  expect:
"""


def _scenario(expect: str, name: str = "s.yaml") -> Scenario:
    return parse_scenario(BASE + expect, name)


def _finish(sc: Scenario, statuses: dict[str, Status]) -> ScenarioResult:
    """The result a run of ``sc`` ends with when each invariant ended as ``statuses`` says (default held)."""
    r = ScenarioResult(sc.name, str(sc.source) if sc.source else "s.yaml", sc.seed, hold=sc.expect.hold,
                       violate=sc.expect.violate, ignore=sc.expect.ignored)
    for entry in INVARIANTS:
        want = r.expectation(entry.name)
        status = statuses.get(entry.name, "held")
        found = [Evidence(f"{entry.name} broken on gpu-node-1", ("Pod/ns/llm-1",), ("gpu.draguard.dev/gpu-node-1/gpu-0",),
                          3.5)] if status == "violated" else []
        r.invariants[entry.name] = InvariantResult(entry.name, entry.summary, status, want.expected, found, "",
                                                   want.required, want.reason)
    return r


def _terminal(result: RunResult) -> str:
    out = io.StringIO()
    print_summary(result, Console(file=out, width=400, color_system=None))
    return out.getvalue()


@pytest.mark.parametrize("invariant", NAMES)
def test_a_violation_of_an_invariant_left_out_of_hold_fails_the_run(invariant: str) -> None:
    others = [n for n in NAMES if n != invariant]
    sc = _scenario(f"    hold: [{', '.join(others[:3])}]\n")
    assert invariant not in sc.expect.hold
    judgeable = not set(INVARIANTS.get(invariant).meta.get("needs", ())) & set(lacking("fake", "local", True))
    assert (invariant in sc.expect.unnamed) == judgeable
    result = RunResult("r", [_finish(sc, {invariant: "violated"})])
    s = result.scenarios[0]
    inv = s.invariants[invariant]
    assert (inv.expected, inv.required, inv.met) == ("hold", False, False)
    assert not s.ok and s.outcome == "not-met" and s.exit_code == EXIT_FAILED and result.exit_code == EXIT_FAILED
    assert any(line.startswith(f"{invariant}: violated") for line in s.shortfalls)
    text = _terminal(result)
    assert "NOT met" in text and f"✗{invariant}(violated)" in text
    assert f"{invariant} should hold but was violated (not named in expect.hold" in text
    assert f"{invariant} broken on gpu-node-1" in text


@pytest.mark.parametrize("invariant", NAMES)
def test_the_same_run_is_met_when_the_invariant_is_ignored_with_a_reason(invariant: str) -> None:
    others = [n for n in NAMES if n != invariant]
    sc = _scenario(f"    hold: [{', '.join(others[:3])}]\n    ignore:\n"
                   f"      - {{invariant: {invariant}, reason: a known upstream bug tracked elsewhere}}\n")
    s = _finish(sc, {invariant: "violated"})
    assert s.ok and s.exit_code == EXIT_OK
    assert s.invariants[invariant].expected == "ignore"
    assert s.invariants[invariant].reason == "a known upstream bug tracked elsewhere"
    text = _terminal(RunResult("r", [s]))
    assert f"{invariant} ignored (a known upstream bug tracked elsewhere): violated" in text


def test_an_unnamed_invariant_that_was_not_checked_does_not_fail_but_a_named_one_does() -> None:
    sc = _scenario("    hold: [claim-atomic, no-leak]\n")
    s = _finish(sc, {"no-leak": "not-checked", "topology": "not-checked"})
    assert s.invariants["topology"].met, "not named: not judged is not a failure"
    assert not s.invariants["no-leak"].met, "named in hold: it must be judged"
    assert [line.split(":")[0] for line in s.shortfalls] == ["no-leak"]


def test_without_hold_every_judgeable_invariant_is_named_and_no_note_is_due() -> None:
    sc = _scenario("    violate: [gang-atomic]\n    ignore: [{invariant: no-legacy-mix, reason: no device plugin here}]\n")
    assert set(sc.expect.hold) == set(NAMES) - {"gang-atomic", "no-legacy-mix"}
    assert sc.expect.unnamed == () and sc.hold_note is None


def test_expectation_of_is_violate_then_ignore_then_hold() -> None:
    ignore = {"no-leak": "why"}
    assert expectation_of("gang-atomic", hold=(), violate=("gang-atomic",), ignore=ignore).expected == "violate"
    got = expectation_of("no-leak", hold=(), violate=(), ignore=ignore)
    assert (got.expected, got.required, got.reason) == ("ignore", False, "why")
    assert expectation_of("topology", hold=("topology",), violate=(), ignore=ignore).required
    unnamed = expectation_of("topology", hold=(), violate=(), ignore=ignore)
    assert (unnamed.expected, unnamed.required) == ("hold", False)
    assert [unnamed.met(s) for s in ("held", "violated", "not-checked")] == [True, False, True]


def test_every_renderer_shows_an_unnamed_violation_and_an_ignored_one_with_its_reason(tmp_path: Path) -> None:
    sc = _scenario("    hold: [claim-atomic, gang-atomic]\n    ignore:\n"
                   "      - {invariant: no-leak, reason: the reset of these devices is out of scope}\n")
    result = RunResult("r", [_finish(sc, {"container-devices": "violated", "no-leak": "violated"})])
    reports.render(result, tmp_path, ["json", "junit", "allure", "html"])

    verdict = json.loads((tmp_path / "verdict.json").read_text())
    s = verdict["scenarios"][0]
    assert verdict["exitCode"] == 1 and s["outcome"] == "not-met"
    assert s["invariants"]["container-devices"] | {"violations": []} == {
        "status": "violated", "expected": "hold", "required": False, "met": False,
        "summary": INVARIANTS.get("container-devices").summary, "violations": []}
    assert s["invariants"]["no-leak"]["reason"] == "the reset of these devices is out of scope"
    assert s["expectations"]["ignore"] == [{"invariant": "no-leak", "reason": "the reset of these devices is out of scope"}]
    back = RunResult.from_dict(verdict)
    assert back.as_dict() == result.as_dict()

    cases = {c.get("name"): c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    failure = cases["invariant container-devices"].find("failure")
    assert failure is not None and "container-devices broken on gpu-node-1" in failure.get("message", "")
    skipped = cases["invariant no-leak"].find("skipped")
    assert skipped is not None and "the reset of these devices is out of scope" in skipped.get("message", "")

    allure = [json.loads(p.read_text()) for p in (tmp_path / "allure-results").glob("*-result.json")]
    by = {a["name"]: a for a in allure}
    assert by["gang: container-devices"]["status"] == "failed"
    assert by["gang: no-leak"]["status"] == "skipped"
    assert "the reset of these devices is out of scope" in by["gang: no-leak"]["statusDetails"]["message"]

    html = (tmp_path / "report.html").read_text()
    assert "✗ container-devices (violated)" in html
    assert "ignored: the reset of these devices is out of scope" in html

    old = RunResult("r0", [_finish(sc, {})])
    d = diff_runs(old, result)
    assert [n.key for _, n in d.new_failures] == ["gang/run", "gang/invariant/container-devices"]
    assert any(n.key == "gang/invariant/no-leak" and "ignored (the reset" in n.evidence[0] for _, n in d.evidence)


def test_a_verdict_written_before_required_reads_an_unnamed_invariant_as_hold() -> None:
    old = {"status": "violated", "expected": None, "met": True, "summary": "s", "violations": []}
    inv = InvariantResult.from_dict("container-devices", old)
    assert (inv.expected, inv.required, inv.met) == ("hold", False, False)
    named = InvariantResult.from_dict("no-leak", {"status": "not-checked", "expected": "hold", "summary": "s"})
    assert named.required and not named.met


@pytest.mark.parametrize(("ignore", "where", "message"), [
    ("      - {invariant: no-leek, reason: r}\n", "ignore[0].invariant", "unknown invariant 'no-leek'; did you mean 'no-leak'?"),
    ("      - {invariant: no-leak}\n", "ignore[0].reason", "missing required key 'reason'"),
    ("      - {invariant: no-leak, reason: ''}\n", "ignore[0].reason", "at least 1 character"),
    ("      - {invariant: no-leak, reason: '   '}\n", "ignore[0].reason", "got only blanks"),
    ("      - {invariant: claim-atomic, reason: r}\n", "ignore[0].invariant", "cannot both hold and be ignored"),
    ("      - {invariant: topology, reason: r}\n      - {invariant: topology, reason: s}\n", "ignore[1].invariant",
     "is ignored twice"),
    ("      - {invariant: no-leak, reason: r, why: s}\n", "ignore[0].why", "unknown"),
])  # fmt: skip
def test_a_bad_ignore_entry_is_one_problem_at_its_place(ignore: str, where: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        _scenario("    hold: [claim-atomic]\n    ignore:\n" + ignore, "f.yaml")
    lines = [str(p) for p in caught.value.problems]
    assert len(lines) == 1, lines
    assert lines[0].startswith("f.yaml:") and f"spec.expect.{where}" in lines[0] and message in lines[0], lines[0]
    assert lines[0].split(":")[1].isdigit() and lines[0].split(":")[2].isdigit()


def test_an_ignored_invariant_cannot_also_be_expected_violated() -> None:
    with pytest.raises(ScenarioError) as caught:
        _scenario("    violate: [gang-atomic]\n    ignore: [{invariant: gang-atomic, reason: r}]\n", "f.yaml")
    assert "cannot both be violated and be ignored" in str(caught.value.problems[0])


def test_validate_notes_a_hold_that_leaves_out_invariants_the_run_judges(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(BASE + "    hold: [claim-atomic, gang-atomic, no-double-allocation, topology, no-leak]\n")
    full = tmp_path / "full.yaml"
    full.write_text(BASE + "    hold: [claim-atomic, gang-atomic, no-double-allocation, topology, no-leak]\n"
                    "    ignore:\n      - {invariant: container-devices, reason: r1}\n"
                    "      - {invariant: no-legacy-mix, reason: r2}\n      - {invariant: sharing-explicit, reason: r3}\n"
                    "      - {invariant: per-claim-errors, reason: r4}\n      - {invariant: no-prepare-loop, reason: r5}\n"
                    "      - {invariant: prepare-idempotent, reason: r6}\n"
                    "      - {invariant: unprepare-unknown, reason: r7}\n"
                    "      - {invariant: prepared-devices-allocated, reason: r8}\n"
                    "      - {invariant: cdi-specs-resolve, reason: r9}\n"
                    "      - {invariant: lock-free-handlers, reason: r10}\n")
    assert main(["validate", str(old), str(full)]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"ok {old}"
    assert out[1] == (f"{old}: note: expect.hold leaves out cdi-specs-resolve, container-devices, lock-free-handlers, "
                      "no-legacy-mix, no-prepare-loop, "
                      "per-claim-errors, prepare-idempotent, prepared-devices-allocated, sharing-explicit, "
                      "unprepare-unknown; they are judged all "
                      "the same and a violation fails the run (name them in expect.hold, or excuse each in "
                      "expect.ignore with a reason)")
    assert out[2:] == [f"ok {full}"]


def test_run_prints_the_same_note_before_it_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    old = tmp_path / "old.yaml"
    old.write_text(BASE + "    hold: [claim-atomic, gang-atomic, no-double-allocation, topology, no-leak]\n")
    assert main(["run", "--dry-run", str(old)]) == EXIT_OK
    captured = capsys.readouterr()
    assert f"{old}: note: expect.hold leaves out cdi-specs-resolve, container-devices, lock-free-handlers, no-legacy-mix" in captured.err
    assert "also judged (not named in hold, must not be violated): cdi-specs-resolve" in captured.out


def test_no_library_scenario_leaves_an_invariant_out_without_a_reason() -> None:
    paths = list(discover([ROOT / "scenarios"]))
    assert len(paths) >= 30
    for path in paths:
        sc = load_scenario(path)
        assert sc.hold_note is None, sc.hold_note
        assert all(i.reason.strip() for i in sc.expect.ignore)
