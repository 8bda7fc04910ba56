"""`draguard diff` and `draguard history` over report directories."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from draguard import reports
from draguard.cli.main import main
from draguard.harness.result import Evidence, RunResult
from draguard.reports.diff import diff_runs
from report_samples import broken_result, deadlock_result


def _write(result: RunResult, where: Path) -> Path:
    reports.render(result, where, ["json"])
    return where


def test_a_new_failure_exits_1_and_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _write(deadlock_result(), tmp_path / "old"), _write(broken_result(), tmp_path / "new")
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "new failures (3)" in out
    assert "gang-deadlock-per-pod/invariant/no-leak: passed → failed: claim leaky still allocated after cleanup" in out
    assert "gang-deadlock-per-pod/invariant/no-double-allocation: absent → failed" in out
    assert "flips with the same inputs" in out  # same seed, driver and version: likely flaky


def test_a_fix_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _write(broken_result(), tmp_path / "old"), _write(deadlock_result(), tmp_path / "new")
    assert main(["diff", str(old / "verdict.json"), str(new / "verdict.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {f["case"] for f in d["fixes"]} == {"gang-deadlock-per-pod/run", "gang-deadlock-per-pod/invariant/no-leak"}
    assert d["newFailures"] == [] and d["gone"] == ["gang-deadlock-per-pod/invariant/no-double-allocation"]


def test_evidence_and_duration_changes_are_listed() -> None:
    old = deadlock_result()
    new = copy.deepcopy(old)
    s = new.scenarios[0]
    s.invariants["gang-atomic"].violations = [Evidence("gang gang-b is partial: 3 of 4 members hold devices")]
    s.duration = old.scenarios[0].duration * 2
    s.steps[0].finished = (s.steps[0].ran or 0) + 10
    d = diff_runs(old, new)
    assert [n.key for _, n in d.evidence] == ["gang-deadlock-per-pod/invariant/gang-atomic"]
    assert {n.key for _, n in d.durations} == {"gang-deadlock-per-pod/run", "gang-deadlock-per-pod/step/0-evict"}
    assert not d.regressed
    assert not diff_runs(old, copy.deepcopy(old)).durations
    small = copy.deepcopy(old)
    small.scenarios[0].duration += 1.0  # under the absolute threshold
    assert not diff_runs(old, small).durations


def test_flips_need_the_same_inputs() -> None:
    old, new = deadlock_result(), broken_result()
    new.scenarios[0].environment["driver"] = {"name": "gpu.draguard.dev", "kind": "fake", "mutant": "double-allocation"}
    d = diff_runs(old, new)
    assert d.new_failures and not d.flips  # a mutant was switched on: a regression, not a flake


def test_diff_of_a_missing_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(deadlock_result(), tmp_path / "old")
    assert main(["diff", str(tmp_path / "old"), str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err


def test_history_page_has_pass_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = []
    for i, r in enumerate([deadlock_result(), broken_result(), deadlock_result()]):
        r.environment["started"] = 1_800_000_000 + i * 86400
        dirs.append(_write(r, tmp_path / f"run{i}"))
    page = tmp_path / "history.html"
    assert main(["history", *map(str, dirs), "-o", str(page)]) == 0
    assert f"report: {page}" in capsys.readouterr().out
    text = page.read_text()
    assert "<td>gang-deadlock-per-pod</td><td>67%</td><td>3</td>" in text
    assert "draguard history: 3 run(s)" in text
