"""``draguard demo``: the README's main command.

Reproduces a gang deadlock (two gangs bind partially under per-pod scheduling) and then runs the
same gangs with gang scheduling on, each on a fresh local control plane; ends by printing the path
of the HTML report, where the deadlock shows as two partial gangs holding devices side by side.
Calls :func:`draguard.harness.campaign.scenarios.run_scenarios` and renders with :mod:`draguard.reports`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import click
from rich.console import Console

import draguard.chaos  # noqa: F401  (registers the fault kinds before scenarios are validated)
from draguard import reports
from draguard.harness.campaign.scenarios import run_scenarios
from draguard.harness.scenario.loader import load_scenarios
from draguard.reports.terminal import RunProgress, print_paths

from . import options

__all__ = ["command", "DEMO_SCENARIOS"]

DEMO_SCENARIOS = ("gang-deadlock-per-pod.yaml", "gang-deadlock-gang-scheduling.yaml")
FORMATS = ("terminal", "json", "junit", "html")


@click.command("demo")
@options.report_dir()
@options.bin_dir()
def command(report_dir: Path, bin_dir: str | None) -> None:
    """Reproduce a gang deadlock, then show gang scheduling fixing it; print the report paths."""
    root = files("draguard.scenarios")
    paths = [str(root / name) for name in DEMO_SCENARIOS]
    result = run_scenarios(load_scenarios(paths), backend="local", bin_dir=bin_dir,
                           progress=RunProgress(Console(stderr=True, log_path=False)))
    print_paths(reports.render(result, report_dir, FORMATS))
    click.get_current_context().exit(result.exit_code)
