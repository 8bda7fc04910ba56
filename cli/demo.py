"""``draguard demo``: the README's main command.

Reproduces a gang deadlock (two gangs bind partially under per-pod scheduling) and then runs the
same gangs with gang scheduling on, each on a fresh local control plane; ends by printing the path
of the HTML report, where the deadlock shows as two partial gangs holding devices side by side.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import click

from draguard.harness.scenario.loader import load_scenarios

from .run import run_scenarios

__all__ = ["command", "DEMO_SCENARIOS"]

DEMO_SCENARIOS = ("gang-deadlock-per-pod.yaml", "gang-deadlock-gang-scheduling.yaml")


@click.command("demo")
@click.option("--report-dir", type=click.Path(file_okay=False), default="draguard-report", show_default=True)
@click.option("--bin-dir", envvar="DRAGUARD_BIN_DIR", help="Directory with the control-plane binaries.")
def command(report_dir: str, bin_dir: str | None) -> None:
    """Reproduce a gang deadlock, then show gang scheduling fixing it; print the report paths."""
    root = files("draguard.scenarios")
    paths = [str(root / name) for name in DEMO_SCENARIOS]
    result = run_scenarios(load_scenarios(paths), Path(report_dir), backend="local", bin_dir=bin_dir,
                           formats=("terminal", "json", "junit", "html"))
    click.get_current_context().exit(result.exit_code)
