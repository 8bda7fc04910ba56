"""`draguard run` at its edges: bad input exits 2 with the location, --dry-run touches nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draguard.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def test_an_invalid_scenario_exits_2_naming_file_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: draguard.dev/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\nspec:\n"
        "  workloads:\n    - name: w\n      replicas: two\n"
    )
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:7:" in err and "replicas" in err
    assert "Traceback" not in err
    assert not (tmp_path / "state" / "draguard" / "journal").exists()


def test_a_missing_scenario_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_dry_run_prints_objects_and_fault_targets_and_starts_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--dry-run", str(ROOT / "scenarios" / "preempt-gang-member.yaml")]) == 0
    out = capsys.readouterr().out
    assert "create ResourceClaimTemplate batch-gpus" in out
    assert "create pods in order: batch-0, batch-1, batch-2, batch-3\n" in out
    assert "hold back workload urgent until step 0-preempt (preempt)" in out
    assert "step 0-preempt: preempt when" in out
    state = tmp_path / "state" / "draguard"
    assert not (state / "clusters").exists() and not (state / "journal").exists()


def test_cleanup_with_nothing_to_do_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup"]) == 0
    assert "nothing to clean up" in capsys.readouterr().err


def test_a_kubeconfig_that_cannot_be_loaded_is_one_error_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    code = main(["run", str(ROOT / "scenarios" / "gang-deadlock-per-pod.yaml"), "--cluster", "kubeconfig",
                 "--kubeconfig", str(tmp_path / "missing-kubeconfig"), "--report-dir", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("cannot load kubeconfig") == 2  # the progress line and the one error of the summary
    assert "✗" not in captured.err and "NOT met" not in captured.err
    assert "Traceback" not in captured.err
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["exitCode"] == 2 and verdict["scenarios"][0]["errorKind"] == "HarnessError"
    assert f"report: {out / 'report.html'}" in captured.out


def test_missing_binaries_exit_2_and_the_verdict_keeps_the_error_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "report"
    code = main(["run", str(ROOT / "scenarios" / "gang-deadlock-per-pod.yaml"), "--bin-dir", str(empty),
                 "--report-dir", str(out), "--report", "terminal,json,junit"])
    err = capsys.readouterr().err
    assert code == 2
    assert "lacks executable" in err and "none judged" in err and "✗" not in err
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["scenarios"][0]["errorKind"] == "HarnessError" and verdict["exitCode"] == 2
    assert 'type="HarnessError"' in (out / "junit.xml").read_text()


def test_dry_run_shows_steps_that_follow_another_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--dry-run", str(ROOT / "scenarios" / "force-delete-driver-down.yaml")]) == 0
    out = capsys.readouterr().out
    assert "step force-delete: force-delete 2s after step down started" in out
    assert "hold back workload newcomer until step arrive (arrive)" in out


def test_repeat_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--repeat", "0", str(ROOT / "scenarios" / "preempt-gang-member.yaml")]) == 2
    assert "--repeat" in capsys.readouterr().err


def test_repeated_runs_count_each_verdict_and_show_a_flaky_one() -> None:
    from draguard.harness.campaign.repeat import rates
    from draguard.harness.result import InvariantResult, ScenarioResult, StepResult

    def one(status: str) -> ScenarioResult:
        r = ScenarioResult("inc", None, 1, violate=("gang-atomic",))
        r.invariants["gang-atomic"] = InvariantResult("gang-atomic", "s", status, "violate")  # type: ignore[arg-type]
        r.invariants["no-leak"] = InvariantResult("no-leak", "s", "held", "hold")
        r.steps.append(StepResult("0-preempt", "preempt", 1.0, True))
        return r

    r = rates([one("violated"), one("held"), one("violated")])
    assert r.runs == 3 and r.met == 2
    assert dict(r.invariants["gang-atomic"]) == {"violated": 2, "held": 1} and r.flaky("gang-atomic")
    assert not r.flaky("no-leak")
    assert r.as_dict()["invariants"]["gang-atomic"] == {
        "expected": "violate", "verdicts": {"violated": 2, "held": 1}, "flaky": True}
    assert r.as_dict()["steps"] == {"0-preempt": {"ok": 3}}


def test_parallel_is_refused_where_runs_would_share_a_cluster_or_repeat(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    deadlock = str(ROOT / "scenarios" / "gang-deadlock-per-pod.yaml")
    assert main(["run", deadlock, "--parallel", "2", "--cluster", "kubeconfig",
                 "--kubeconfig", str(tmp_path / "kc")]) == 2
    err = capsys.readouterr().err
    assert "--parallel runs each scenario on a local control plane of its own; gang-deadlock-per-pod runs on an " \
           "existing cluster" in err and "Traceback" not in err
    assert main(["run", deadlock, "--parallel", "2", "--repeat", "2"]) == 2
    assert "not with --driver, --device-class, --allow-context or --repeat" in capsys.readouterr().err
    assert not (tmp_path / "state" / "draguard" / "clusters").exists()


@pytest.mark.cluster
def test_parallel_runs_each_scenario_on_its_own_cluster_and_keeps_their_order(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Two incident reproductions side by side: each meets its own expectation, as when run alone."""
    out = tmp_path / "report"
    names = ["incomplete-cdi-spec", "gang-deadlock-per-pod"]
    code = main(["run", *(str(ROOT / "scenarios" / f"{n}.yaml") for n in names), "--parallel", "2",
                 "--report-dir", str(out), "--report", "json"])
    err = capsys.readouterr().err
    verdict = json.loads((out / "verdict.json").read_text())
    assert code == 0, [s.get("error") for s in verdict["scenarios"]]
    assert [s["name"] for s in verdict["scenarios"]] == names
    assert verdict["scenarios"][0]["invariants"]["container-devices"]["status"] == "violated"
    assert verdict["scenarios"][1]["invariants"]["gang-atomic"]["status"] == "violated"
    # no interposer in these runs: per-claim-errors is not judged, and says why, rather than held
    unjudged = verdict["scenarios"][1]["invariants"]["per-claim-errors"]
    assert unjudged["status"] == "not-checked" and unjudged["required"] is False and "interposer" in unjudged["note"]
    assert "2 scenario(s), 2 at a time" in err and "incomplete-cdi-spec: met in" in err
    assert not list((tmp_path / "state" / "draguard" / "clusters").glob("*/cluster.json"))  # both torn down
    # what each process's run recorded is placed by the render in this one, and no run folder is left
    assert all(list((out / n / "devices").glob("*.json")) for n in names)
    assert not list((tmp_path / "state" / "draguard" / "runs").glob("*"))


@pytest.mark.cluster
def test_repeat_writes_each_run_and_the_verdict_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An incident reproduction run twice: each run's reports in its own folder, repeat.json counts both."""
    out = tmp_path / "report"
    name = "reset-leak-forget-before-reset"
    code = main(["run", str(ROOT / "scenarios" / f"{name}.yaml"), "--repeat", "2", "--report-dir", str(out),
                 "--report", "json"])
    captured = capsys.readouterr()
    rates = json.loads((out / name / "repeat.json").read_text())
    assert code == 0, rates
    assert rates["scenario"] == name and rates["runs"] == 2 and rates["met"] == 2
    assert rates["invariants"]["no-leak"] == {"expected": "violate", "verdicts": {"violated": 2}, "flaky": False}
    for i in (1, 2):
        verdict = json.loads((out / name / f"run-{i}" / "verdict.json").read_text())
        assert verdict["exitCode"] == 0 and verdict["scenarios"][0]["name"] == name
        assert list((out / name / f"run-{i}" / name / "devices").glob("*.json"))  # what the run recorded
    assert f"rates: {(out / name / 'repeat.json').resolve()}" in captured.out
    assert f"{name}: run 2 of 2" in captured.err and "violated 2/2" in captured.err  # the rates table
    assert not list((tmp_path / "state" / "draguard" / "clusters").glob("*/cluster.json"))  # both torn down
