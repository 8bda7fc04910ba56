"""docs/kill-matrix.md stays true without running the whole cross product in CI.

- The Markdown is exactly what the generator renders from docs/kill-matrix.json.
- Every mutant is recorded as caught by a library scenario whose ``expect`` names the catching
  invariant, except the survivors listed here with what they wait for.
- Each mutant recorded as caught is run again against the quickest scenario that caught it and must
  be caught by the same invariant; the correct driver runs those scenarios too (those that pin a
  mutant of their own are not run with the correct driver by tests/scenarios/test_library.py) and
  must pass. The runs go in parallel, each on its own control plane.

The full matrix is measured by hand or nightly with ``draguard mutants --doc docs/kill-matrix.md``
(the doc says when and where).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (fault kinds for loading the library)
from draguard.cli.mutants import measure_cells
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.killmatrix import CORRECT, Cell, KillMatrix
from draguard.harness.scenario.loader import load_scenario
from draguard.reports.kill_matrix import render_markdown

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kill-matrix.md"
DATA = ROOT / "docs" / "kill-matrix.json"
LIBRARY = ROOT / "scenarios"

KNOWN_SURVIVORS = {
    "incomplete-cdi": "needs the fake nodes to resolve CDI IDs against the specs on disk (issue 8, item 2)",
    "double-allocation": "needs a scenario where the API frees devices the node still holds and a node-level "
    "check of the driver's books or the device truth (issue 8, items 1-2)",
    "batch-abort-on-error": "shows only as healthy claims stranded behind a failing one: needs evidence or "
    "progress expectations (issue 8, item 5)",
    "lock-across-reset": "shows only as prepares delayed behind a slow reset: needs progress expectations "
    "or gang-atomic judged over time (issue 8, item 5)",
    "silent-health": "needs the device health in the node's device truth to judge allocations of failed devices "
    "(issue 8, item 1)",
}
"""Mutants no library scenario catches yet, and what they wait for. A test fails when this list is wrong."""


def _matrix() -> KillMatrix:
    return KillMatrix.from_dict(json.loads(DATA.read_text()))


def test_the_doc_is_what_the_generator_renders_from_the_measured_json() -> None:
    assert DOC.read_text() == render_markdown(_matrix(), DATA.name), (
        "docs/kill-matrix.md is stale: draguard mutants --from-json docs/kill-matrix.json --doc docs/kill-matrix.md"
    )


def test_the_matrix_covers_every_mutant_and_the_correct_driver_passed_everything() -> None:
    m = _matrix()
    assert set(m.mutants) == {CORRECT, *MUTANTS}
    assert [c.scenario for c in m.false_positives()] == []
    assert {c.scenario for c in m.cells} <= {p.stem for p in LIBRARY.glob("*.yaml")} | {
        load_scenario(p).name for p in LIBRARY.glob("*.yaml")}


def _named_catches(m: KillMatrix, mutant: str) -> list[tuple[Cell, str]]:
    """(cell, invariant) where ``mutant`` was caught by an invariant the scenario's ``expect`` names."""
    out = []
    for cell in m.caught_by(mutant):
        sc = load_scenario(LIBRARY / f"{cell.scenario}.yaml")
        named = set(sc.expect.hold) | set(sc.expect.violate)
        out += [(cell, inv) for inv in cell.invariants if inv in named]
    return out


def test_every_mutant_but_the_listed_survivors_is_caught_by_an_invariant_the_scenario_names() -> None:
    m = _matrix()
    survivors = {name for name in MUTANTS if not _named_catches(m, name)}
    assert survivors == set(KNOWN_SURVIVORS), "update KNOWN_SURVIVORS (and the README) to what was measured"


def _rerun_plan() -> list[tuple[str, str, str]]:
    """(mutant, scenario, invariant): the quickest recorded catch of each caught mutant."""
    m = _matrix()
    out = []
    for name in sorted(MUTANTS):
        catches = sorted(_named_catches(m, name), key=lambda ci: ci[0].duration)
        if catches:
            out.append((name, catches[0][0].scenario, catches[0][1]))
    return out


@pytest.fixture(scope="module")
def reruns(tmp_path_factory: pytest.TempPathFactory) -> KillMatrix:
    planned = _rerun_plan()
    scenarios = {sc: load_scenario(LIBRARY / f"{sc}.yaml") for _, sc, _ in planned}
    cells: list[tuple[object, str | None]] = [(scenarios[sc], mutant) for mutant, sc, _ in planned]
    cells += [(s, None) for s in scenarios.values() if s.driver.mutant]  # the rest run in test_library
    parallel = max(1, min(4, (os.cpu_count() or 2) // 2))
    return measure_cells(cells, tmp_path_factory.mktemp("kill-matrix"), parallel)  # type: ignore[arg-type]


@pytest.mark.cluster
@pytest.mark.timeout(2400)
@pytest.mark.parametrize(("mutant", "scenario", "invariant"), _rerun_plan(), ids=[p[0] for p in _rerun_plan()])
def test_the_mutant_is_caught_again_as_the_doc_says(reruns: KillMatrix, mutant: str, scenario: str, invariant: str) -> None:
    cell = reruns.cell(mutant, scenario)
    assert cell is not None and cell.verdict == "caught", cell
    assert invariant in cell.invariants, (cell.detectors, cell.evidence)
    correct = reruns.cell(CORRECT, scenario)
    assert correct is None or correct.verdict == "passed", correct
