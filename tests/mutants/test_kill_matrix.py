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
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.campaign.kill_matrix import CORRECT, Cell, KillMatrix, measure_cells
from draguard.harness.scenario.loader import load_scenario
from draguard.reports.kill_matrix import render_markdown

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kill-matrix.md"
DATA = ROOT / "docs" / "kill-matrix.json"
LIBRARY = ROOT / "scenarios"

KNOWN_SURVIVORS: dict[str, str] = {}
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
    """(cell, what) where ``mutant`` was caught by an invariant the scenario's ``expect`` names, or
    (``progress``) by the progress its ``expect`` asks for not coming (in time)."""
    out = []
    for cell in m.caught_by(mutant):
        sc = load_scenario(LIBRARY / f"{cell.scenario}.yaml")
        named = set(sc.expect.hold) | set(sc.expect.violate)
        out += [(cell, inv) for inv in cell.invariants if inv in named]
        if sc.expect.progress and "expect:progress" in cell.detectors:
            out.append((cell, "progress"))
    return out


def test_every_mutant_but_the_listed_survivors_is_caught_by_an_invariant_the_scenario_names() -> None:
    m = _matrix()
    survivors = {name for name in MUTANTS if not _named_catches(m, name)}
    assert survivors == set(KNOWN_SURVIVORS), "update KNOWN_SURVIVORS (and the README) to what was measured"


def _pinned(scenario: str) -> str | None:
    return load_scenario(LIBRARY / f"{scenario}.yaml").driver.mutant


def _rerun_plan() -> list[tuple[str, str, str]]:
    """(mutant, scenario, invariant): the quickest recorded catch of each caught mutant.

    A mutant caught by the incident scenario that pins it is not run again here:
    tests/scenarios/test_library.py runs that scenario and asserts the violation and its evidence.
    """
    m = _matrix()
    out = []
    for name in sorted(MUTANTS):
        catches = sorted(_named_catches(m, name), key=lambda ci: ci[0].duration)
        if catches and _pinned(catches[0][0].scenario) != name:
            out.append((name, catches[0][0].scenario, catches[0][1]))
    return out


def test_a_mutant_caught_by_its_own_incident_scenario_is_asserted_by_the_library_test() -> None:
    m = _matrix()
    for name in sorted(MUTANTS):
        catches = sorted(_named_catches(m, name), key=lambda ci: ci[0].duration)
        if catches and _pinned(catches[0][0].scenario) == name:
            sc = load_scenario(LIBRARY / f"{catches[0][0].scenario}.yaml")
            assert sc.expect.violate and catches[0][1] in sc.expect.violate, (name, sc.name)


@pytest.fixture(scope="module")
def reruns() -> KillMatrix:
    planned = _rerun_plan()
    scenarios = {sc: load_scenario(LIBRARY / f"{sc}.yaml") for _, sc, _ in planned}
    cells: list[tuple[object, str | None]] = [(scenarios[sc], mutant) for mutant, sc, _ in planned]
    # The correct driver on every incident scenario that pins a mutant (test_library runs those with
    # their mutant only): it must pass them all.
    pinned = {p.stem: load_scenario(p) for p in LIBRARY.glob("*.yaml")}
    cells += [(s, None) for s in pinned.values() if s.driver.mutant]
    parallel = max(1, min(4, (os.cpu_count() or 2) // 2))
    return measure_cells(cells, parallel)  # type: ignore[arg-type]


@pytest.mark.cluster
@pytest.mark.timeout(2400)
@pytest.mark.parametrize(("mutant", "scenario", "invariant"), _rerun_plan(), ids=[p[0] for p in _rerun_plan()])
def test_the_mutant_is_caught_again_as_the_doc_says(reruns: KillMatrix, mutant: str, scenario: str, invariant: str) -> None:
    cell = reruns.cell(mutant, scenario)
    assert cell is not None and cell.verdict == "caught", cell
    assert (invariant in cell.invariants if invariant != "progress" else "expect:progress" in cell.detectors), (
        cell.detectors, cell.evidence)
    correct = reruns.cell(CORRECT, scenario)
    assert correct is None or correct.verdict == "passed", correct


@pytest.mark.cluster
@pytest.mark.timeout(2400)
def test_the_correct_driver_passes_every_incident_scenario_that_pins_a_mutant(reruns: KillMatrix) -> None:
    pinned = sorted(p.stem for p in LIBRARY.glob("*.yaml") if load_scenario(p).driver.mutant)
    assert pinned, "the library has incident scenarios that pin a mutant"
    cells = {c.scenario: c for c in reruns.cells if c.mutant == CORRECT}
    assert {s: cells[s].verdict if s in cells else "not run" for s in pinned} == {s: "passed" for s in pinned}, (
        [(c.scenario, c.detectors, c.evidence) for c in cells.values() if c.verdict != "passed"])
