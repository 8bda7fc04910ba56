"""``draguard validate PATH...`` and ``draguard schema``: check scenario files, publish their schema.

Thin: loads the fault kinds (``draguard.chaos``, when present) so that step params are checked,
then delegates to :mod:`draguard.harness.scenario`.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import click

from draguard.harness.core.errors import EXIT_OK, EXIT_USAGE, ScenarioError, UsageError
from draguard.harness.scenario import discover, json_schema, load_scenario

__all__ = ["COMMANDS", "validate", "schema"]


def _load_faults() -> None:
    """Register the fault kinds; the chaos package may not exist yet on a bare harness."""
    try:
        importlib.import_module("draguard.chaos")
    except ModuleNotFoundError as exc:
        if exc.name not in ("draguard.chaos", "draguard"):
            raise


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check scenario files (folders are searched for *.yaml and *.yml).

    Prints `ok FILE` for each valid scenario and `FILE:LINE:COL: FIELD: MESSAGE` for every problem,
    and a one-line note for a file whose `expect.hold` leaves out invariants the run judges all the
    same (a violation of one fails the run). Exit code 0 when all are valid, 2 otherwise.
    """
    _load_faults()
    failed = False
    for path in discover(paths):
        try:
            scenario = load_scenario(path)
        except ScenarioError as exc:
            failed = True
            for problem in exc.problems:
                click.echo(str(problem))
        except UsageError as exc:
            failed = True
            click.echo(str(exc))
        else:
            click.echo(f"ok {path}")
            if scenario.hold_note:
                click.echo(scenario.hold_note)
    raise click.exceptions.Exit(EXIT_USAGE if failed else EXIT_OK)


@click.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
def schema(output: Path | None) -> None:
    """Print the JSON Schema of scenario files (for editors: yaml-language-server, IDEs)."""
    _load_faults()
    text = json.dumps(json_schema(), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{output}: cannot write: {exc.strerror or exc}") from exc


COMMANDS = [validate, schema]
