"""Scenario files run side by side: each in its own process, on its own local control plane and fleet.

``draguard run --parallel N`` and the ``library-wall`` benchmark use it. A scenario's runner owns
process-wide things (signal handlers, the journal of its faults, its children's parent-death
signal), so each run gets a process of its own rather than a thread; the scenario is loaded again
from its file there and the result comes back whole (pickled). Results keep the order of the files.

Only for scenarios on a local control plane: two scenarios on one shared cluster would compete for
its devices and judge each other's pods.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from pathlib import Path

from draguard.harness.core.errors import UsageError
from draguard.harness.core.process import in_processes
from draguard.harness.core.registry import FAULTS, INVARIANTS
from draguard.harness.result import ScenarioResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario
from draguard.harness.scenario.types import Scenario

__all__ = ["run_in_parallel", "check_parallel", "registering_modules", "import_all"]


def check_parallel(scenarios: Sequence[Scenario], backend: str | None) -> None:
    """UsageError unless every scenario can run beside the others (its own local control plane, a file)."""
    for sc in scenarios:
        if (backend or sc.cluster.backend) != "local":
            raise UsageError(f"--parallel runs each scenario on a local control plane of its own; {sc.name} runs on "
                             "an existing cluster (backend kubeconfig), where parallel runs would share its devices")
        if sc.source is None:
            raise UsageError(f"--parallel loads each scenario again from its file; {sc.name} has none")



def registering_modules() -> list[str]:
    """The modules that registered the faults and invariants this process knows (draguard's own and any
    a user registered): a child imports them again (:func:`import_all`) before it validates a scenario."""
    return sorted({e.target.__module__ for e in FAULTS} | {e.target.__module__ for e in INVARIANTS})


def import_all(modules: list[str]) -> None:
    """In a child process: import what :func:`registering_modules` named in the parent."""
    for module in modules:
        importlib.import_module(module)


def _worker(source: str, seed: int | None, bin_dir: str | None,
            modules: list[str]) -> tuple[str, ScenarioResult]:
    """One scenario in a child process: (run id, result)."""
    import_all(modules)
    scenario = load_scenario(Path(source))
    started = time.monotonic()

    def progress(message: object) -> None:
        if isinstance(message, str):  # counted updates (progress bars) are for a terminal of one run
            print(f"{time.monotonic() - started:7.1f}s {scenario.name}: {message}", file=sys.stderr, flush=True)

    runner = Runner(scenario, RunOptions(seed=seed, bin_dir=bin_dir, progress=progress))
    return runner.run_id, runner.run()


def run_in_parallel(scenarios: Sequence[Scenario], parallel: int, *, seed: int | None = None,
                    bin_dir: str | None = None,
                    done: Callable[[ScenarioResult], None] | None = None) -> list[tuple[str, ScenarioResult]]:
    """Run ``scenarios``, ``parallel`` at a time; (run id, result) of each, in the order given.

    A worker that dies gives an error result for its scenario, never a pass."""
    check_parallel(scenarios, None)
    modules = registering_modules()

    def failed(i: int, exc: Exception) -> tuple[str, ScenarioResult]:
        sc = scenarios[i]
        return ("", ScenarioResult(sc.name, str(sc.source), seed if seed is not None else sc.seed,
                                   error=f"the process running it failed: {exc!r}", error_kind="HarnessError"))

    jobs = [(str(sc.source), seed, bin_dir, modules) for sc in scenarios]
    return in_processes(_worker, jobs, parallel, failed, (lambda r: done(r[1])) if done is not None else None)

