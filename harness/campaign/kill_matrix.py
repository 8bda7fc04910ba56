"""The kill matrix: which scenario catches which fake-driver mutant, and with which detector.

A *cell* is one run of one scenario with one driver: the correct driver (``mutant`` None) or a
mutant that replaces the scenario's own ``driver.mutant``. Every cell is judged against the
scenario's expectations **for the correct driver**:

* the invariants in ``expect.hold`` must hold;
* a scenario that pins a mutant of its own (an incident reproduction such as
  ``reset-leak-forget-before-reset``) attributes its ``expect.violate`` to that mutant: for the
  correct driver those invariants must hold too, and the incident run is the cell of its mutant;
* a scenario that pins no mutant keeps its ``expect.violate`` (a scheduling incident such as a gang
  deadlock shows whatever the driver); those invariants must still be violated;
* every step must succeed.

A *detector* is what departs from that: ``invariant:<name>`` (an invariant that should hold was
violated; the cell keeps its first violations as evidence), ``step:<name>`` (a step failed),
``expected:<name>`` (an expected violation did not show). The correct driver must show none (else
the cell is a **false positive**); a mutant with at least one is **caught**, with none it
**survived**. A run that could not be judged (the cluster did not start, an invariant could not be
checked) is an **error**, never a pass.

:func:`judge` turns a :class:`~draguard.harness.result.ScenarioResult` into a :class:`Cell`;
:func:`measure` runs every cell of scenarios x mutants, each on its own local control plane in its
own process, into a :class:`KillMatrix` (both in :mod:`.models`, which the reports read:
``draguard.reports.kill_matrix`` writes ``kill-matrix.json`` and ``kill-matrix.md``).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from importlib.resources import files
from pathlib import Path

from draguard.harness.cluster.binaries import K8S_VERSION
from draguard.harness.core.errors import UsageError
from draguard.harness.core.process import in_processes
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.result import ScenarioResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario, load_scenarios
from draguard.harness.scenario.types import Scenario

from .models import CORRECT, KILL_MATRIX_VERSION, Cell, KillMatrix, Verdict
from .parallel import import_all, registering_modules

__all__ = [
    "CORRECT",
    "Verdict",
    "Cell",
    "KillMatrix",
    "judge",
    "cell_expectations",
    "with_mutant",
    "run_cell",
    "plan",
    "measure",
    "measure_cells",
    "library_dir",
    "resolve_scenarios",
    "resolve_mutants",
    "KILL_MATRIX_VERSION",
]


def cell_expectations(scenario: Scenario) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(must hold, must be violated) for the correct driver on ``scenario`` (see the module docstring)."""
    hold, violate = tuple(scenario.expect.hold), tuple(scenario.expect.violate)
    if scenario.driver.mutant:
        return tuple(dict.fromkeys(hold + violate)), ()
    return hold, violate


def judge(scenario: Scenario, mutant: str | None, result: ScenarioResult) -> Cell:
    """The cell of ``result`` (``scenario`` run with ``mutant``, None for the correct driver)."""
    name = mutant or CORRECT
    source = str(scenario.source) if scenario.source else None
    if result.error is not None:
        return Cell(name, scenario.name, "error", error=result.error, duration=result.duration, source=source)
    hold, violate = cell_expectations(scenario)
    detectors: list[str] = []
    evidence: list[str] = []
    # Every violation counts: an invariant the scenario does not name must hold too (expect.violate
    # and expect.ignore, with its reason, are the only ways out), so the cell reads the expectation the
    # run recorded for each invariant, not the hold list alone.
    must_hold = dict.fromkeys([*hold, *(n for n, r in result.invariants.items()
                                        if r.expectation.expected == "hold" and n not in violate)])
    for inv in must_hold:
        r = result.invariants.get(inv)
        if r is not None and r.status == "violated":
            detectors.append(f"invariant:{inv}")
            evidence += [f"{inv}: {v.message}" for v in r.violations[:2]]
    for step in result.steps:
        if not step.optional and (not step.ok or step.status != "ok"):
            detectors.append(f"step:{step.name}")
            evidence.append(f"step {step.name} ({step.status}): {step.detail}")
    for exp in result.expectation_results:
        if not exp.met:  # progress that did not happen, or a violation without the evidence it must carry
            detectors.append(f"expect:{exp.kind}")
            evidence.append(f"{exp.kind} {exp.rule}: {exp.detail}")
    for inv in violate:
        r = result.invariants.get(inv)
        if r is not None and r.status != "violated":
            detectors.append(f"expected:{inv}")
            evidence.append(f"{inv} was expected to be violated but was {r.status}")
    not_judged = [inv for inv in (*hold, *violate) if inv not in result.invariants
                  or result.invariants[inv].status == "not-checked"]
    if not_judged and not detectors:
        return Cell(name, scenario.name, "error", error=f"not judged: {', '.join(not_judged)}",
                    duration=result.duration, source=source)
    if mutant is None or mutant == CORRECT:
        verdict: Verdict = "false-positive" if detectors else "passed"
    else:
        verdict = "caught" if detectors else "survived"
    return Cell(name, scenario.name, verdict, tuple(detectors), tuple(evidence[:6]), None, result.duration, source)


def with_mutant(scenario: Scenario, mutant: str | None) -> Scenario:
    """``scenario`` with its fake driver switched to ``mutant`` (None: the correct driver).

    A scenario that pins a mutant of its own and runs with another driver keeps the expectations it
    has for the correct driver (see :func:`cell_expectations`): its incident's violations must now
    hold, and the evidence rules that describe those violations no longer apply (else the correct
    driver would be charged with evidence it rightly does not show).
    """
    chosen = None if mutant in (None, CORRECT) else mutant
    out = replace(scenario, driver=replace(scenario.driver, mutant=chosen))
    if scenario.driver.mutant and chosen != scenario.driver.mutant:
        hold, _ = cell_expectations(scenario)
        expect = scenario.expect
        out = replace(out, expect=replace(expect, hold=hold, violate=(), evidence=tuple(
            r for r in expect.evidence if r.invariant not in expect.violate)))
    return out


def run_cell(scenario: Scenario, mutant: str | None, bin_dir: str | None = None) -> Cell:
    """Run ``scenario`` on a fresh local control plane with ``mutant`` and judge it; the cell carries what
    the run recorded (:attr:`Cell.record`), for the reports to place with the matrix.

    The fault kinds of the scenario's steps must be registered (the caller imports ``draguard.chaos``).
    """
    name = mutant or CORRECT
    if scenario.driver.kind != "fake":
        return Cell(name, scenario.name, "error", error=f"driver kind {scenario.driver.kind}: mutants need the fake driver",
                    source=str(scenario.source) if scenario.source else None)
    result = Runner(with_mutant(scenario, mutant), RunOptions(backend="local", bin_dir=bin_dir)).run()
    return replace(judge(scenario, mutant, result), record=result.record)


def plan(scenarios: Sequence[Scenario], mutants: Sequence[str]) -> list[tuple[Scenario, str | None]]:
    """Every (scenario, driver) cell to run: the correct driver first, then each mutant."""
    return [(sc, None) for sc in scenarios] + [(sc, m) for m in mutants for sc in scenarios]


def library_dir() -> Path:
    """The scenario library shipped with draguard (``scenarios/``)."""
    return Path(str(files("draguard.scenarios")))


def resolve_scenarios(names: Sequence[str]) -> list[Scenario]:
    """Scenario files or folders, or names of library scenarios; all of the library when empty
    (UsageError naming the library's scenarios for an unknown one)."""
    library = {p.stem: p for p in sorted(library_dir().glob("*.yaml"))}
    if not names:
        return load_scenarios([library_dir()])
    paths: list[str | Path] = []
    unknown = []
    for n in names:
        if Path(n).exists():
            paths.append(n)
        elif n in library:
            paths.append(library[n])
        else:
            unknown.append(n)
    if unknown:
        raise UsageError(f"unknown scenario(s) {', '.join(unknown)}: give a scenario file or folder, or one of the "
                         f"library's: {', '.join(library)}")
    return load_scenarios(paths)


def resolve_mutants(names: Sequence[str]) -> list[str]:
    """Mutant names (all registered ones when empty); the correct driver is always run besides."""
    unknown = [n for n in names if n not in MUTANTS and n != CORRECT]
    if unknown:
        raise UsageError(f"--mutant {', '.join(unknown)}: no such mutant; known: {', '.join(sorted(MUTANTS))}")
    return [n for n in dict.fromkeys(names) if n != CORRECT] if names else sorted(MUTANTS)


def _about() -> dict[str, dict[str, str]]:
    return {name: {"bug": cls.describe(), "upstream": cls.upstream} for name, cls in sorted(MUTANTS.items())}


def _machine() -> str:
    return f"{platform.node() or 'unknown host'} ({os.cpu_count()} cores, {platform.machine()}), Kubernetes {K8S_VERSION}"


def _cell_worker(source: str, mutant: str | None, bin_dir: str | None, modules: list[str]) -> Cell:
    """One cell in a child process (its own runner, control plane and fleet); ``modules`` register the
    fault kinds and invariants the parent knows."""
    import_all(modules)
    return run_cell(load_scenario(Path(source)), mutant, bin_dir)


def measure(scenarios: list[Scenario], mutants: list[str], parallel: int = 1,
            bin_dir: str | None = None, progress: Callable[[Cell], None] | None = None) -> KillMatrix:
    """Run the correct driver and every mutant on every scenario and return the matrix."""
    return measure_cells(plan(scenarios, mutants), parallel, bin_dir, progress)


def measure_cells(cells: Sequence[tuple[Scenario, str | None]], parallel: int = 1,
                  bin_dir: str | None = None, progress: Callable[[Cell], None] | None = None) -> KillMatrix:
    """Run the given (scenario, mutant) cells, ``parallel`` at a time, each in its own process (what each
    run recorded comes back on its cell); ``progress`` is called with each cell as it is judged."""
    for sc, _ in cells:
        if sc.source is None:
            raise UsageError(f"scenario {sc.name}: the kill matrix runs scenario files, not text")
    matrix = KillMatrix(measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), machine=_machine(),
                        parallel=parallel, about=_about())
    started = time.monotonic()

    def failed(i: int, exc: Exception) -> Cell:  # a worker that died: an error cell, never a pass
        sc, m = cells[i]
        return Cell(m or CORRECT, sc.name, "error", error=f"worker failed: {exc}", source=str(sc.source))

    modules = registering_modules()
    jobs = [(str(sc.source), m, bin_dir, modules) for sc, m in cells]
    matrix.cells += in_processes(_cell_worker, jobs, parallel, failed, progress)
    matrix.wall_seconds = time.monotonic() - started
    return matrix
