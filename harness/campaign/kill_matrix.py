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
:class:`KillMatrix` holds the cells with where and when they were measured and round-trips through
JSON (``kill-matrix.json``). Renderers (``reports.kill_matrix``) read only this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from draguard.harness.result import ScenarioResult
from draguard.harness.scenario.types import Scenario

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
    "KILL_MATRIX_VERSION",
]

CORRECT = "none"
"""The name the matrix gives the correct driver (as ``--mutant none`` does)."""
KILL_MATRIX_VERSION = 1

Verdict = Literal["passed", "false-positive", "caught", "survived", "error"]


def cell_expectations(scenario: Scenario) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(must hold, must be violated) for the correct driver on ``scenario`` (see the module docstring)."""
    hold, violate = tuple(scenario.expect.hold), tuple(scenario.expect.violate)
    if scenario.driver.mutant:
        return tuple(dict.fromkeys(hold + violate)), ()
    return hold, violate


@dataclass(frozen=True)
class Cell:
    """One scenario run with one driver, judged."""

    mutant: str
    """The mutant's name, or ``none`` for the correct driver."""
    scenario: str
    verdict: Verdict
    detectors: tuple[str, ...] = ()
    """``invariant:<name>``, ``step:<name>`` or ``expected:<name>``, in that order."""
    evidence: tuple[str, ...] = ()
    """The first violation messages and step errors behind the detectors."""
    error: str | None = None
    duration: float = 0.0
    source: str | None = None

    @property
    def invariants(self) -> tuple[str, ...]:
        """The invariants among the detectors."""
        return tuple(d.split(":", 1)[1] for d in self.detectors if d.startswith("invariant:"))

    def as_dict(self) -> dict[str, Any]:
        return {"mutant": self.mutant, "scenario": self.scenario, "verdict": self.verdict,
                "detectors": list(self.detectors), "evidence": list(self.evidence), "error": self.error,
                "durationSeconds": round(self.duration, 1), "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(mutant=d["mutant"], scenario=d["scenario"], verdict=d["verdict"], detectors=tuple(d["detectors"]),
                   evidence=tuple(d.get("evidence", ())), error=d.get("error"),
                   duration=float(d.get("durationSeconds", 0.0)), source=d.get("source"))


def judge(scenario: Scenario, mutant: str | None, result: ScenarioResult) -> Cell:
    """The cell of ``result`` (``scenario`` run with ``mutant``, None for the correct driver)."""
    name = mutant or CORRECT
    source = str(scenario.source) if scenario.source else None
    if result.error is not None:
        return Cell(name, scenario.name, "error", error=result.error, duration=result.duration, source=source)
    hold, violate = cell_expectations(scenario)
    detectors: list[str] = []
    evidence: list[str] = []
    for inv in hold:
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


@dataclass
class KillMatrix:
    """Cells of mutants x scenarios, and where and when they were measured."""

    cells: list[Cell] = field(default_factory=list)
    measured_at: str = ""
    """UTC time the measurement started (ISO 8601)."""
    machine: str = ""
    """Where: host, cores, Kubernetes version."""
    command: str = ""
    """The command line that measured it."""
    parallel: int = 1
    wall_seconds: float = 0.0
    about: dict[str, dict[str, str]] = field(default_factory=dict)
    """Mutant name -> ``{"bug": first docstring line, "upstream": citation}``."""

    # -- queries ---------------------------------------------------------------------------------
    @property
    def mutants(self) -> list[str]:
        """Mutants in the matrix, the correct driver first."""
        names = sorted({c.mutant for c in self.cells} - {CORRECT})
        return ([CORRECT] if any(c.mutant == CORRECT for c in self.cells) else []) + names

    @property
    def scenarios(self) -> list[str]:
        return sorted({c.scenario for c in self.cells})

    def cell(self, mutant: str, scenario: str) -> Cell | None:
        for c in self.cells:
            if c.mutant == mutant and c.scenario == scenario:
                return c
        return None

    def caught_by(self, mutant: str) -> list[Cell]:
        """The cells in which ``mutant`` was caught."""
        return [c for c in self.cells if c.mutant == mutant and c.verdict == "caught"]

    def survivors(self) -> list[str]:
        """Mutants no scenario of the matrix caught."""
        return [m for m in self.mutants if m != CORRECT and not self.caught_by(m)]

    def false_positives(self) -> list[Cell]:
        return [c for c in self.cells if c.verdict == "false-positive"]

    def errors(self) -> list[Cell]:
        return [c for c in self.cells if c.verdict == "error"]

    @property
    def ok(self) -> bool:
        """Every mutant caught, the correct driver passing everything, no run in error."""
        return not self.survivors() and not self.false_positives() and not self.errors()

    # -- JSON ------------------------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        return {
            "version": KILL_MATRIX_VERSION, "measuredAt": self.measured_at, "machine": self.machine,
            "command": self.command, "parallel": self.parallel, "wallSeconds": round(self.wall_seconds, 1),
            "ok": self.ok, "survivors": self.survivors(), "about": self.about,
            "cells": [c.as_dict() for c in sorted(self.cells, key=lambda c: (c.mutant != CORRECT, c.mutant, c.scenario))],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KillMatrix:
        if d.get("version") != KILL_MATRIX_VERSION:
            raise ValueError(f"unsupported kill matrix version {d.get('version')!r}")
        return cls(cells=[Cell.from_dict(c) for c in d.get("cells", [])], measured_at=d.get("measuredAt", ""),
                   machine=d.get("machine", ""), command=d.get("command", ""), parallel=int(d.get("parallel", 1)),
                   wall_seconds=float(d.get("wallSeconds", 0.0)), about=dict(d.get("about", {})))

    def merge(self, cells: Iterable[Cell]) -> None:
        """Add cells, replacing any earlier cell of the same mutant and scenario."""
        new = {(c.mutant, c.scenario): c for c in cells}
        self.cells = [c for c in self.cells if (c.mutant, c.scenario) not in new] + list(new.values())


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


def run_cell(scenario: Scenario, mutant: str | None, report_dir: Path, bin_dir: str | None = None) -> Cell:
    """Run ``scenario`` on a fresh local control plane with ``mutant`` and judge it.

    The fault kinds of the scenario's steps must be registered (the caller imports ``draguard.chaos``).
    """
    from draguard.harness.runner.runner import Runner, RunOptions

    name = mutant or CORRECT
    if scenario.driver.kind != "fake":
        return Cell(name, scenario.name, "error", error=f"driver kind {scenario.driver.kind}: mutants need the fake driver",
                    source=str(scenario.source) if scenario.source else None)
    result = Runner(with_mutant(scenario, mutant), RunOptions(backend="local", report_dir=report_dir, bin_dir=bin_dir)).run()
    return judge(scenario, mutant, result)


def plan(scenarios: Sequence[Scenario], mutants: Sequence[str]) -> list[tuple[Scenario, str | None]]:
    """Every (scenario, driver) cell to run: the correct driver first, then each mutant."""
    return [(sc, None) for sc in scenarios] + [(sc, m) for m in mutants for sc in scenarios]
