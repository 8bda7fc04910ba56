"""``draguard run --baseline``: a scenario much slower than in a finished run of the same scenarios is not met,
saying how much slower; a slowdown within the limit, or of a few seconds, is shown and counts for nothing; a
scenario the baseline did not meet is not compared. Bad input: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from draguard.cli.main import main
from draguard.harness.judge.baseline import judge_against
from draguard.harness.result import RunResult, ScenarioResult

ROOT = Path(__file__).resolve().parents[2]


def _run(*durations: tuple[str, float, bool]) -> RunResult:
    out = []
    for name, seconds, ok in durations:
        s = ScenarioResult(name, f"scenarios/{name}.yaml", 1, duration=seconds)
        if not ok:
            s.error = "it failed"
        out.append(s)
    return RunResult("r", out)


def test_only_a_slowdown_beyond_both_limits_counts() -> None:
    now = _run(("slow", 40.0, True), ("short", 9.0, True), ("steady", 30.0, True), ("new", 5.0, True), ("broken", 50.0, True))
    before = _run(("slow", 12.0, True), ("short", 2.0, True), ("steady", 20.0, True), ("broken", 5.0, False))
    skipped = judge_against(now, before, "base/", max_slowdown=2.0, min_seconds=10.0)
    got = {s.name: s.expectation_results for s in now.scenarios}
    [slow] = got["slow"]
    assert (slow.kind, slow.met) == ("baseline", False)
    assert slow.detail == "40.0s, 3.3x the baseline's 12.0s: the driver is much slower than in the baseline run (28s more)"
    assert slow.rule == "at most 2x the wall time of the baseline run (base/)"
    assert [e.met for e in got["short"]] == [True]  # 4.5x, but 7 s
    assert [e.met for e in got["steady"]] == [True]  # 1.5x
    assert got["new"] == [] and got["broken"] == []
    assert skipped == ["new: not compared: the baseline run did not run it",
                       "broken: not compared: the baseline run did not meet it (error)"]
    assert [s.name for s in now.scenarios if not s.ok] == ["slow"]


def _baseline(tmp_path: Path, name: str, seconds: float) -> Path:
    folder = tmp_path / "baseline"
    folder.mkdir()
    (folder / "verdict.json").write_text(json.dumps(RunResult("before", [
        ScenarioResult(name, f"scenarios/{name}.yaml", 1, duration=seconds)]).as_dict()))
    return folder


@pytest.mark.cluster
def test_a_run_against_a_much_faster_baseline_exits_1_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The baseline claims the scenario took a second: this run takes far longer, whatever the machine.
    base = _baseline(tmp_path, "gang-deadlock-per-pod", 1.0)
    code = main(["run", str(ROOT / "scenarios" / "gang-deadlock-per-pod.yaml"), "--baseline", str(base),
                 "--report-dir", str(tmp_path / "out")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1, err
    assert "gang-deadlock-per-pod: expect baseline at most 2x the wall time of the baseline run" in err
    assert "the baseline's 1.0s: the driver is much slower than in the baseline run" in err
    verdict: dict[str, Any] = json.loads((tmp_path / "out" / "verdict.json").read_text())
    [exp] = [e for e in verdict["scenarios"][0]["expectationResults"] if e["kind"] == "baseline"]
    assert exp["kind"] == "baseline" and exp["met"] is False


@pytest.mark.parametrize(("args", "words"), [
    (["--baseline", "/nonexistent/run"], "--baseline: /nonexistent/run: no such report directory or verdict file"),
    (["--baseline", "BASE", "--repeat", "2"], "--baseline compares one run with another: not with --repeat"),
    (["--baseline", "BASE", "--max-slowdown", "1"], "--max-slowdown"),
])
def test_bad_baseline_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   args: list[str], words: str) -> None:
    base = str(_baseline(tmp_path, "gang-deadlock-per-pod", 1.0))
    code = main(["run", str(ROOT / "scenarios" / "gang-deadlock-per-pod.yaml"), *[base if a == "BASE" else a for a in args]])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
