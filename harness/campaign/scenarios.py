"""Running a list of scenarios into one result: one after the other, or ``parallel`` at a time each in a
process and on a local control plane of its own (:mod:`.parallel`), or retargeted at an installed
driver (:mod:`.retarget`: a scenario that is not applicable there is reported with the reasons, not run).

``draguard run`` and ``draguard demo`` call :func:`run_scenarios`, then render the result (the reports
are ``draguard.reports``'s, never written here). Each scenario is played by a
:class:`~draguard.harness.runner.runner.Runner`; progress goes through callbacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from draguard.harness.core.environment import run_environment
from draguard.harness.core.process import interrupt_on_sigterm
from draguard.harness.result import RunResult, ScenarioResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.types import Scenario

from .parallel import run_in_parallel
from .retarget import Retargeting, not_applicable_result, retarget

__all__ = ["ScenarioProgress", "run_scenarios"]


class ScenarioProgress(Protocol):
    """The runner's progress callback that also frames each scenario (``draguard.reports.terminal.RunProgress``)."""

    def __call__(self, message: str) -> None: ...

    def scenario(self, name: str) -> AbstractContextManager[Any]: ...


def _quiet(message: str) -> None:
    pass


def run_scenarios(scenarios: Sequence[Scenario], *, backend: str | None = None,
                  kubeconfig: str | None = None, context: str | None = None, seed: int | None = None,
                  bin_dir: str | None = None, retargeting: Retargeting | None = None, parallel: int = 1,
                  progress: ScenarioProgress | None = None, note: Callable[[str], None] = _quiet) -> RunResult:
    """Run ``scenarios`` (``parallel`` at a time, each in its own process); the result of them all, each
    scenario's record waiting in its run's state folder for the reports to place it.

    With ``retargeting`` each scenario runs against the installed driver, or is reported not applicable
    with the reasons (it is not run then). ``progress`` sees the runner's progress within each scenario;
    ``note`` one line per event of the whole run (a parallel run's start and each scenario's end, a
    scenario not applicable)."""
    interrupt_on_sigterm()
    result = RunResult(run_id="", environment={**run_environment(seed), "started": time.time()})
    sequential = list(scenarios)
    if parallel > 1:
        note(f"{len(sequential)} scenario(s), {parallel} at a time")

        def done(r: ScenarioResult) -> None:
            note(f"{r.name}: {r.outcome} in {r.duration:.1f}s")

        for run_id, scenario_result in run_in_parallel(sequential, parallel, seed=seed, bin_dir=bin_dir, done=done):
            result.run_id = result.run_id or run_id
            result.scenarios.append(scenario_result)
        sequential = []
    for sc in sequential:
        if retargeting is not None:
            reasons, plan = retargeting.decide(sc)
            if plan is None:
                skipped = not_applicable_result(sc, reasons, retargeting.target)
                note(f"{sc.name}: {skipped.not_applicable}")
                result.scenarios.append(skipped)
                continue
            sc = retarget(sc, retargeting.target, plan)
        with progress.scenario(sc.name) if progress is not None else nullcontext():
            runner = Runner(sc, RunOptions(backend=backend, kubeconfig=kubeconfig, context=context, bin_dir=bin_dir,
                                           seed=seed, progress=progress or _quiet))
            result.run_id = result.run_id or runner.run_id
            result.scenarios.append(runner.run())
    result.environment["ended"] = time.time()
    return result
