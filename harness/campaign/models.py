"""The campaign models: what campaigns hand to the reports, as plain values.

- :class:`Cell` and :class:`KillMatrix`: which scenario catches which fake-driver mutant (measured by
  :mod:`.kill_matrix`, written and rendered by ``draguard.reports.kill_matrix``);
- :class:`Rates`: how often each verdict came out over repeated runs of one scenario (counted by
  :mod:`.repeat`);
- :class:`ScenarioPlan`: what a run of one scenario would create and do (built by :mod:`.dry_run`).

Reports read these and the result model (``draguard.harness.result``) only, so this module imports
nothing of the runner or the scenario types: a report never reaches into the engine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from draguard.harness.result import RunRecord

__all__ = [
    "CORRECT",
    "KILL_MATRIX_VERSION",
    "Verdict",
    "Cell",
    "KillMatrix",
    "Rates",
    "PlannedStep",
    "ScenarioPlan",
]

CORRECT = "none"
"""The name the kill matrix gives the correct driver (as ``--mutant none`` does)."""
KILL_MATRIX_VERSION = 1

Verdict = Literal["passed", "false-positive", "caught", "survived", "error"]


@dataclass(frozen=True)
class Cell:
    """One scenario run with one driver, judged (:func:`draguard.harness.campaign.kill_matrix.judge`)."""

    mutant: str
    """The mutant's name, or ``none`` for the correct driver."""
    scenario: str
    verdict: Verdict
    detectors: tuple[str, ...] = ()
    """``invariant:<name>``, ``step:<name>``, ``expect:<kind>`` or ``expected:<name>``, in that order."""
    evidence: tuple[str, ...] = ()
    """The first violation messages and step errors behind the detectors."""
    error: str | None = None
    duration: float = 0.0
    source: str | None = None
    record: RunRecord | None = field(default=None, compare=False, repr=False)
    """What the cell's run recorded besides its result (not in ``kill-matrix.json``): the reports place it
    at ``<report-dir>/<mutant>/<scenario>/`` with the matrix."""

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


@dataclass
class KillMatrix:
    """Cells of mutants x scenarios, and where and when they were measured."""

    cells: list[Cell] = field(default_factory=list)
    measured_at: str = ""
    """UTC time the measurement started (ISO 8601)."""
    measured_until: str = ""
    """For a matrix merged from parts measured at different times: when its last part started ("" when
    it was measured in one go)."""
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
            "version": KILL_MATRIX_VERSION, "measuredAt": self.measured_at,
            **({"measuredUntil": self.measured_until} if self.measured_until else {}), "machine": self.machine,
            "command": self.command, "parallel": self.parallel, "wallSeconds": round(self.wall_seconds, 1),
            "ok": self.ok, "survivors": self.survivors(), "about": self.about,
            "cells": [c.as_dict() for c in sorted(self.cells, key=lambda c: (c.mutant != CORRECT, c.mutant, c.scenario))],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KillMatrix:
        if d.get("version") != KILL_MATRIX_VERSION:
            raise ValueError(f"unsupported kill matrix version {d.get('version')!r}")
        return cls(cells=[Cell.from_dict(c) for c in d.get("cells", [])], measured_at=d.get("measuredAt", ""),
                   measured_until=d.get("measuredUntil", ""),
                   machine=d.get("machine", ""), command=d.get("command", ""), parallel=int(d.get("parallel", 1)),
                   wall_seconds=float(d.get("wallSeconds", 0.0)), about=dict(d.get("about", {})))

    def merge(self, cells: Iterable[Cell]) -> None:
        """Add cells, replacing any earlier cell of the same mutant and scenario."""
        new = {(c.mutant, c.scenario): c for c in cells}
        self.cells = [c for c in self.cells if (c.mutant, c.scenario) not in new] + list(new.values())

    @classmethod
    def combined(cls, parts: list[KillMatrix]) -> KillMatrix:
        """Matrices measured in parts, merged in order (a later cell replaces an earlier one of the same
        mutant and scenario); one part is returned as it is."""
        if len(parts) == 1:
            return parts[0]
        merged = cls()
        for part in parts:
            merged.merge(part.cells)
            starts = list(filter(None, (merged.measured_at, merged.measured_until, part.measured_at,
                                        part.measured_until)))
            merged.measured_at = min(starts, default="")
            last = max(starts, default="")
            merged.measured_until = last if last != merged.measured_at else ""
            merged.machine = merged.machine or part.machine
            merged.command = "; ".join(filter(None, (merged.command, part.command)))
            merged.parallel = max(merged.parallel, part.parallel)
            merged.wall_seconds += part.wall_seconds
            merged.about = {**merged.about, **part.about}
        return merged


@dataclass
class Rates:
    """The verdicts of repeated runs of one scenario (``draguard run --repeat N``)."""

    scenario: str
    runs: int
    met: int
    """Runs that met every expectation."""
    invariants: dict[str, Counter[str]] = field(default_factory=dict)
    """Invariant -> verdict (held, violated, not-checked) -> runs."""
    expected: dict[str, str | None] = field(default_factory=dict)
    steps: dict[str, Counter[str]] = field(default_factory=dict)
    """Step -> status -> runs."""
    errors: Counter[str] = field(default_factory=Counter)

    def flaky(self, invariant: str) -> bool:
        """More than one verdict came out over the runs."""
        return len(+self.invariants[invariant]) > 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "runs": self.runs, "met": self.met,
            "invariants": {n: {"expected": self.expected.get(n), "verdicts": dict(c), "flaky": self.flaky(n)}
                           for n, c in self.invariants.items()},
            "steps": {n: dict(c) for n, c in self.steps.items()},
            "errors": dict(self.errors),
        }


@dataclass(frozen=True)
class PlannedStep:
    """A timeline step as a dry run shows it."""

    name: str
    fault: str
    index: int
    at: float | None = None
    """Seconds after the start (an ``at`` step)."""
    after: tuple[float, str] | None = None
    """(delay in seconds, the step it follows) for an ``after`` step."""
    when: str | None = None
    """The condition of a ``when`` step."""
    target: str | None = None
    """The step's target, None for the fault's default."""
    touches: tuple[str, ...] = ()
    """What the step may touch, each a line: nodes, the run's pods, the driver's pods (the blast radius)."""


@dataclass(frozen=True)
class ScenarioPlan:
    """What a run of one scenario would create, in which order, and which fault hits which target when."""

    name: str
    source: str
    seed: int
    """The seed its random choices are drawn from (a ``--seed`` override or the scenario's)."""
    backend: str
    feature_gates: Mapping[str, bool]
    driver: str
    """``<kind> <name>`` of the driver."""
    mutant: str | None
    nodes: tuple[tuple[str, str], ...]
    """(node, what its topology has)."""
    device_classes: tuple[str, ...]
    creates: tuple[tuple[str, str, str], ...]
    """(kind, name, detail) of the claim objects and pod groups, in the order they are created."""
    pods: tuple[str, ...]
    """Pods in the order they are created (those of held-back workloads left out)."""
    held_back: tuple[tuple[str, str, str], ...]
    """(workload, step, fault): a workload held back until that step brings it in."""
    steps: tuple[PlannedStep, ...]
    hold: tuple[str, ...]
    violate: tuple[str, ...]
    ignore: tuple[tuple[str, str], ...] = ()
    """(invariant, reason) the scenario ignores."""
    unnamed: tuple[str, ...] = ()
    """Invariants judged although ``expect.hold`` does not name them."""
