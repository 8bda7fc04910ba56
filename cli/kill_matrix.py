"""``draguard mutants [SCENARIO...] [--mutant NAME...]``: the kill matrix of the fake driver's mutants.

Runs each scenario against the correct driver and against each mutant (replacing the scenario's
own ``driver.mutant``), each run on its own local control plane, ``--parallel`` runs at a time in
separate processes (:func:`draguard.harness.campaign.kill_matrix.measure`); prints the matrix and
writes ``kill-matrix.json`` and ``kill-matrix.md`` into the report folder (``--doc`` writes the
Markdown elsewhere too, e.g. ``docs/kill-matrix.md``, with the JSON beside it, ``docs/kill-matrix.json``)
through :mod:`draguard.reports.kill_matrix`. ``--from-json`` (repeatable) renders measured matrices
again, merged, without running anything: a matrix measured in parts.

Exit: 0 every mutant caught and the correct driver passing everything; 1 a survivor, a false
positive or a run in error; 2 an unknown mutant or scenario (the known names are listed).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.console import Console

import draguard.chaos  # noqa: F401  (registers the fault kinds before scenarios are validated)
from draguard.harness.campaign.kill_matrix import Cell, measure, resolve_mutants, resolve_scenarios
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK
from draguard.reports.console import print_kill_matrix
from draguard.reports.kill_matrix import read_kill_matrices, write_doc, write_kill_matrix

from . import options

__all__ = ["command"]

_err = Console(stderr=True)


@click.command("mutants")
@click.argument("scenarios", nargs=-1)
@click.option("--mutant", "mutants", multiple=True, help="A mutant to run (repeatable; default: every mutant).")
@options.report_dir("draguard-report/mutants", help="Where kill-matrix.json and kill-matrix.md go (what each run records: under <mutant>/).")
@click.option("--parallel", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Runs at a time, each with its own control plane (about 1 core each).")
@click.option("--doc", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the Markdown here (docs/kill-matrix.md), and the JSON beside it.")
@click.option("--from-json", "from_json", multiple=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Render measured kill-matrix.json files again, merged (with --doc); run nothing. Repeatable.")
@options.bin_dir()
def command(scenarios: tuple[str, ...], mutants: tuple[str, ...], report_dir: Path, parallel: int, doc: Path | None,
            from_json: tuple[Path, ...], bin_dir: str | None) -> None:
    """Run scenarios against the correct driver and each mutant; print and write the kill matrix."""
    if from_json:
        matrix = read_kill_matrices(list(from_json))
        print_kill_matrix(matrix)
        if doc:
            written = write_doc(matrix, doc)
            click.echo(f"doc: {written[0].resolve()}")
        raise click.exceptions.Exit(EXIT_OK if matrix.ok else EXIT_FAILED)
    chosen = resolve_mutants(mutants)
    loaded = resolve_scenarios(scenarios)
    total = len(loaded) * (len(chosen) + 1)
    _err.print(f"{total} runs: {len(loaded)} scenario(s) x (correct driver + {len(chosen)} mutant(s)), "
               f"{parallel} at a time")
    count = 0

    def progress(cell: Cell) -> None:
        nonlocal count
        count += 1
        _err.print(f"[{count}/{total}] {cell.mutant} × {cell.scenario}: {cell.verdict} "
                   f"{' '.join(cell.detectors)} ({cell.duration:.0f}s)", highlight=False)

    matrix = measure(loaded, chosen, parallel, bin_dir, progress)
    matrix.command = "draguard mutants " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    print_kill_matrix(matrix)
    click.echo(f"kill matrix: {write_kill_matrix(matrix, report_dir)[0].resolve()}")
    if doc is not None:
        written = write_doc(matrix, doc)
        click.echo(f"doc: {written[0].resolve()} (data: {written[1].name})")
    raise click.exceptions.Exit(EXIT_OK if matrix.ok else EXIT_FAILED)
