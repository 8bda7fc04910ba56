"""Verdict rates over repeated runs of one scenario: how often each invariant held or was violated.

``draguard run --repeat N`` runs a scenario N times; a reproduction that shows its violation in 7 of
10 runs is flaky, and :func:`rates` says so per invariant (and per step status), from the
:class:`~draguard.harness.result.ScenarioResult` of each run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from draguard.harness.result import ScenarioResult

__all__ = ["Rates", "rates"]


@dataclass
class Rates:
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


def rates(results: list[ScenarioResult]) -> Rates:
    """Count the verdicts of runs of the same scenario."""
    if not results:
        raise ValueError("no runs to count")
    out = Rates(results[0].name, len(results), sum(r.ok for r in results))
    for r in results:
        for name, inv in r.invariants.items():
            out.invariants.setdefault(name, Counter())[inv.status] += 1
            out.expected[name] = inv.expected
        for s in r.steps:
            out.steps.setdefault(s.name, Counter())[s.status] += 1
        if r.error:
            out.errors[r.error] += 1
    return out
