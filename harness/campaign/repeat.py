"""Verdict rates over repeated runs of one scenario: how often each invariant held or was violated.

``draguard run --repeat N`` runs a scenario N times (:func:`repeat_scenarios`); a reproduction that shows
its violation in 7 of 10 runs is flaky, and :func:`rates` says so per invariant (and per step status),
from the :class:`~draguard.harness.result.ScenarioResult` of each run, as a
:class:`~draguard.harness.campaign.models.Rates` (which ``draguard.reports`` prints and writes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import UsageError
from draguard.harness.result import RunResult, ScenarioResult
from draguard.harness.scenario.types import Scenario

from .models import Rates
from .retarget import Retargeting
from .scenarios import run_scenarios

__all__ = ["Rates", "rates", "repeat_scenarios"]


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


def _quiet(message: str) -> None:
    pass


def repeat_scenarios(scenarios: Sequence[Scenario], times: int, out: Path, *,
                     done: Callable[[Path, RunResult], None], retargeting: Retargeting | None = None,
                     note: Callable[[str], None] = _quiet, **options: Any) -> Iterator[Rates]:
    """Run each scenario ``times`` times (the runs of ``<name>`` under ``out/<name>/run-<i>``, each handed to
    ``done`` with its folder as it ends) and yield its :class:`Rates` once its runs are over.

    With ``retargeting``, what is not applicable is said once (``note``), not repeated; UsageError (exit 2)
    when nothing is. ``options`` are :func:`~draguard.harness.campaign.scenarios.run_scenarios`'s."""
    chosen = list(scenarios)
    if retargeting is not None:
        chosen = []
        for sc in scenarios:
            reasons, plan = retargeting.decide(sc)
            if plan is None:
                note(f"{sc.name}: not applicable on driver {retargeting.target.driver}: " + "; ".join(reasons))
            else:
                chosen.append(sc)
        if not chosen:
            raise UsageError(f"no scenario is applicable on driver {retargeting.target.driver}: nothing to repeat")
    for sc in chosen:
        results: list[ScenarioResult] = []
        for i in range(1, times + 1):
            note(f"{sc.name}: run {i} of {times}")
            folder = out / sc.name / f"run-{i}"
            run = run_scenarios([sc], retargeting=retargeting, note=note, **options)
            done(folder, run)
            results.extend(run.scenarios)
        yield rates(results)
