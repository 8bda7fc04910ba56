"""The kill matrix model: how a run becomes a cell, JSON round trip, the Markdown, the CLI's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import draguard.chaos  # noqa: F401  (fault kinds for loading the library)
from draguard.cli.main import cli, main
from draguard.harness.campaign.kill_matrix import Cell, KillMatrix, cell_expectations, judge, with_mutant
from draguard.harness.core.registry import INVARIANTS
from draguard.harness.result import Evidence, InvariantResult, ScenarioResult, StepResult
from draguard.harness.scenario.loader import load_scenario
from draguard.reports.kill_matrix import render_markdown

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"


def _result(name: str, violated: dict[str, str], steps: list[StepResult] | None = None) -> ScenarioResult:
    r = ScenarioResult(name, None, 1)
    for inv in INVARIANTS.names():
        found = [Evidence(violated[inv])] if inv in violated else []
        r.invariants[inv] = InvariantResult(inv, "", "violated" if found else "held", None, found)
    r.steps = steps or []
    return r


def test_an_incident_that_pins_a_mutant_is_expected_to_hold_everything_with_the_correct_driver() -> None:
    incident = load_scenario(LIBRARY / "reset-leak-forget-before-reset.yaml")
    hold, violate = cell_expectations(incident)
    assert "no-leak" in hold and violate == ()
    assert with_mutant(incident, None).driver.mutant is None
    assert with_mutant(incident, "stale-prepare").driver.mutant == "stale-prepare"
    caught = judge(incident, "forget-before-reset", _result(incident.name, {"no-leak": "device gpu-1 failed"}))
    assert (caught.verdict, caught.detectors, caught.invariants) == ("caught", ("invariant:no-leak",), ("no-leak",))
    assert caught.evidence == ("no-leak: device gpu-1 failed",)
    assert judge(incident, None, _result(incident.name, {})).verdict == "passed"


def test_a_scheduling_incident_keeps_its_expected_violation_for_every_driver() -> None:
    deadlock = load_scenario(LIBRARY / "gang-deadlock-per-pod.yaml")
    assert cell_expectations(deadlock)[1] == ("gang-atomic",)
    assert judge(deadlock, None, _result(deadlock.name, {"gang-atomic": "partial"})).verdict == "passed"
    missing = judge(deadlock, "stale-prepare", _result(deadlock.name, {}))
    assert (missing.verdict, missing.detectors) == ("caught", ("expected:gang-atomic",))


def test_the_correct_driver_failing_is_a_false_positive_and_a_broken_run_is_an_error_never_a_pass() -> None:
    sc = load_scenario(LIBRARY / "evict-before-prepare-succeeded.yaml")
    fp = judge(sc, None, _result(sc.name, {}, [StepResult("s1", "evict", 4.0, False, "no pod matches")]))
    assert (fp.verdict, fp.detectors) == ("false-positive", ("step:s1",))
    survived = judge(sc, "silent-health", _result(sc.name, {}))
    assert survived.verdict == "survived"
    broken = _result(sc.name, {})
    broken.error = "the driver did not publish ResourceSlices"
    assert judge(sc, "silent-health", broken).verdict == "error"
    unjudged = _result(sc.name, {})
    unjudged.invariants["no-leak"] = InvariantResult("no-leak", "", "not-checked", "hold")
    assert judge(sc, "stale-prepare", unjudged).verdict == "error"


def _matrix() -> KillMatrix:
    return KillMatrix(
        cells=[Cell("none", "a", "passed"), Cell("none", "b", "passed"),
               Cell("m1", "a", "caught", ("invariant:no-leak",), ("no-leak: x",)), Cell("m1", "b", "survived"),
               Cell("m2", "a", "survived"), Cell("m2", "b", "survived")],
        measured_at="2026-12-03 20:00 UTC", machine="test", command="draguard mutants a b", parallel=2,
        wall_seconds=120, about={"m1": {"bug": "bug one", "upstream": "k/k#1"}, "m2": {"bug": "bug two", "upstream": "x"}},
    )  # fmt: skip


def test_the_matrix_names_survivors_and_round_trips_through_json() -> None:
    m = _matrix()
    assert m.mutants == ["none", "m1", "m2"] and m.survivors() == ["m2"] and not m.ok
    again = KillMatrix.from_dict(json.loads(json.dumps(m.as_dict())))
    assert again.as_dict() == m.as_dict()
    assert render_markdown(again) == render_markdown(m)


def test_the_markdown_says_when_where_and_what_caught_each_mutant() -> None:
    md = render_markdown(_matrix())
    assert "Measured 2026-12-03 20:00 UTC on test, 6 runs, 2 in parallel, 2 min wall time" in md
    assert "| `m1` | bug one | k/k#1 | a (`no-leak`) |" in md
    assert "| `m2` | bug two | x | **survived** |" in md
    assert "- survivors: `m2`" in md
    assert "| a | pass | `no-leak` | survived |" in md


def test_a_matrix_merged_from_parts_measured_on_other_days_says_so() -> None:
    later = KillMatrix(cells=[Cell("m3", "a", "caught", ("invariant:no-leak",), ("no-leak: y",))],
                       measured_at="2026-12-07 17:34 UTC", machine="test", command="draguard mutants a --mutant m3")
    merged = KillMatrix.combined([_matrix(), later])
    assert (merged.measured_at, merged.measured_until) == ("2026-12-03 20:00 UTC", "2026-12-07 17:34 UTC")
    assert "Measured in parts from 2026-12-03 20:00 UTC to 2026-12-07 17:34 UTC on test" in render_markdown(merged)
    again = KillMatrix.from_dict(json.loads(json.dumps(merged.as_dict())))
    assert again.measured_until == merged.measured_until
    # Merged once more with a part of the first day, the range stays; one part measured in one go has none.
    assert KillMatrix.combined([again, _matrix()]).measured_until == "2026-12-07 17:34 UTC"
    assert KillMatrix.combined([_matrix(), _matrix()]).measured_until == ""


def test_unknown_mutant_or_scenario_exits_2_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "--mutant", "forget-after-reset"]) == 2
    err = capsys.readouterr().err
    assert "--mutant forget-after-reset: no such mutant; known: batch-abort-on-error" in err and "Traceback" not in err
    assert main(["mutants", "no-such-scenario"]) == 2
    err = capsys.readouterr().err
    assert "unknown scenario(s) no-such-scenario" in err and "reset-leak-forget-before-reset" in err


def test_from_json_renders_the_doc_without_running(tmp_path: Path) -> None:
    src = tmp_path / "kill-matrix.json"
    src.write_text(json.dumps(_matrix().as_dict()))
    doc = tmp_path / "kill-matrix.md"
    out = CliRunner().invoke(cli, ["mutants", "--from-json", str(src), "--doc", str(doc)])
    assert out.exit_code == 1  # m2 survived
    assert doc.read_text() == render_markdown(_matrix())


@pytest.mark.parametrize("broken", ["{}", "[1]", "not json"])
def test_a_damaged_json_is_bad_input(tmp_path: Path, broken: str, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "kill-matrix.json"
    src.write_text(broken)
    assert main(["mutants", "--from-json", str(src)]) == 2
    assert "not a kill matrix" in capsys.readouterr().err


def test_a_violation_of_an_invariant_the_scenario_does_not_name_counts_in_the_matrix_too() -> None:
    """Every violation counts in a cell as in a run: an invariant left out of expect.hold must hold
    (the correct driver violating it is a false positive, a mutant violating it is caught), unless
    expect.ignore excuses it with a reason."""
    sc = load_scenario(LIBRARY / "evict-before-prepare-succeeded.yaml")
    unnamed = next(n for n in INVARIANTS.names() if n not in sc.expect.hold and n not in sc.expect.violate)

    def result(violated: dict[str, str], ignored: str | None = None) -> ScenarioResult:
        r = _result(sc.name, violated)
        for name, inv in r.invariants.items():
            inv.expected, inv.required = ("ignore", False) if name == ignored else ("hold", name in sc.expect.hold)
            inv.reason = "a member is removed on purpose" if name == ignored else ""
        return r

    fp = judge(sc, None, result({unnamed: "seen"}))
    assert (fp.verdict, fp.detectors) == ("false-positive", (f"invariant:{unnamed}",))
    caught = judge(sc, "silent-health", result({unnamed: "seen"}))
    assert (caught.verdict, caught.detectors) == ("caught", (f"invariant:{unnamed}",))
    assert judge(sc, None, result({unnamed: "seen"}, ignored=unnamed)).verdict == "passed"
