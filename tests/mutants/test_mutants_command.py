"""``draguard mutants`` end to end on one scenario and one mutant: the cells run on their own control
planes, the matrix is printed and written (kill-matrix.json, kill-matrix.md, --doc), and reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.campaign.models import KillMatrix
from draguard.reports.kill_matrix import render_markdown

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_a_caught_mutant_and_a_passing_correct_driver_exit_0_with_the_matrix_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, doc = tmp_path / "report", tmp_path / "docs" / "kill-matrix.md"
    scenario, mutant = "reset-leak-forget-before-reset", "forget-before-reset"
    code = main(["mutants", scenario, "--mutant", mutant, "--report-dir", str(out), "--doc", str(doc)])
    captured = capsys.readouterr()
    matrix = KillMatrix.from_dict(json.loads((out / "kill-matrix.json").read_text()))
    assert code == 0, [c.error for c in matrix.cells]
    assert matrix.cell("none", scenario).verdict == "passed"  # type: ignore[union-attr]
    caught = matrix.cell(mutant, scenario)
    assert caught is not None and caught.verdict == "caught" and "no-leak" in caught.invariants
    assert (out / "kill-matrix.md").read_text() == render_markdown(matrix)
    assert doc.read_text() == render_markdown(matrix, "kill-matrix.json")
    assert json.loads(doc.with_suffix(".json").read_text()) == matrix.as_dict()
    assert "[2/2]" in captured.err and f"kill matrix: {(out / 'kill-matrix.json').resolve()}" in captured.out
    assert not list((tmp_path / "state" / "draguard" / "clusters").glob("*/cluster.json"))
    # what each cell's run recorded is placed beside the matrix, and no run folder is left
    assert all(list((out / m / scenario / "devices").glob("*.json")) for m in ("none", mutant))
    assert not list((tmp_path / "state" / "draguard" / "runs").glob("*"))
    # measured in parts: --from-json merges and renders without running anything
    assert main(["mutants", "--from-json", str(out / "kill-matrix.json"), "--doc", str(tmp_path / "again.md")]) == 0
    assert (tmp_path / "again.md").read_text() == doc.read_text()
