"""``draguard mutants [SCENARIO...] [--mutant NAME...]``: the kill matrix of the fake driver's mutants.

Runs each scenario against the correct driver and against each mutant (replacing the scenario's
own ``driver.mutant``), each run on its own local control plane, ``--parallel`` runs at a time in
separate processes; prints the matrix and writes ``kill-matrix.json`` and ``kill-matrix.md`` into
the report folder (``--doc`` writes the Markdown elsewhere too, e.g. ``docs/kill-matrix.md``).
``--doc`` also writes the JSON beside it (``docs/kill-matrix.json``). ``--from-json`` (repeatable)
renders measured matrices again, merged, without running anything: a matrix measured in parts.

Exit: 0 every mutant caught and the correct driver passing everything; 1 a survivor, a false
positive or a run in error; 2 an unknown mutant or scenario (the known names are listed).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from rich.console import Console

import draguard.chaos  # noqa: F401  (registers the fault kinds before scenarios are validated)
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, UsageError
from draguard.harness.core.process import in_processes
from draguard.harness.campaign.killmatrix import CORRECT, Cell, KillMatrix, plan, run_cell
from draguard.harness.scenario.loader import load_scenario, load_scenarios
from draguard.harness.scenario.types import Scenario
from draguard.reports.console import print_kill_matrix
from draguard.reports.kill_matrix import render_markdown

__all__ = ["command", "library_dir", "resolve_scenarios", "resolve_mutants", "measure", "measure_cells"]

_err = Console(stderr=True)


def library_dir() -> Path:
    """The scenario library shipped with draguard (``scenarios/``)."""
    import draguard.scenarios

    return Path(draguard.scenarios.__file__).resolve().parent


def resolve_scenarios(names: tuple[str, ...]) -> list[Scenario]:
    """Scenario files or folders, or names of library scenarios; all of the library when empty."""
    library = {p.stem: p for p in sorted(library_dir().glob("*.yaml"))}
    if not names:
        return load_scenarios([library_dir()])
    paths: list[str | Path] = []
    unknown = []
    for n in names:
        if Path(n).exists():
            paths.append(n)
        elif n in library:
            paths.append(library[n])
        else:
            unknown.append(n)
    if unknown:
        raise UsageError(f"unknown scenario(s) {', '.join(unknown)}: give a scenario file or folder, or one of the "
                         f"library's: {', '.join(library)}")
    return load_scenarios(paths)


def resolve_mutants(names: tuple[str, ...]) -> list[str]:
    """Mutant names (all registered ones when empty); the correct driver is always run besides."""
    unknown = [n for n in names if n not in MUTANTS and n != CORRECT]
    if unknown:
        raise UsageError(f"--mutant {', '.join(unknown)}: no such mutant; known: {', '.join(sorted(MUTANTS))}")
    return [n for n in dict.fromkeys(names) if n != CORRECT] if names else sorted(MUTANTS)


def _about() -> dict[str, dict[str, str]]:
    return {name: {"bug": cls.describe(), "upstream": cls.upstream} for name, cls in sorted(MUTANTS.items())}


def _cell_worker(source: str, mutant: str | None, report_dir: str, bin_dir: str | None) -> Cell:
    """One cell in a child process (its own runner, control plane and fleet)."""
    return run_cell(load_scenario(Path(source)), mutant, Path(report_dir), bin_dir)


def _machine() -> str:
    return f"{platform.node() or 'unknown host'} ({os.cpu_count()} cores, {platform.machine()}), Kubernetes v1.37.2"


def measure(scenarios: list[Scenario], mutants: list[str], out: Path, parallel: int = 1,
            bin_dir: str | None = None, progress: Any = None) -> KillMatrix:
    """Run the correct driver and every mutant on every scenario and return the matrix."""
    return measure_cells(plan(scenarios, mutants), out, parallel, bin_dir, progress)


def measure_cells(cells: list[tuple[Scenario, str | None]], out: Path, parallel: int = 1,
                  bin_dir: str | None = None, progress: Any = None) -> KillMatrix:
    """Run the given (scenario, mutant) cells, ``parallel`` at a time, each in its own process."""
    for sc, _ in cells:
        if sc.source is None:
            raise UsageError(f"scenario {sc.name}: the kill matrix runs scenario files, not text")
    matrix = KillMatrix(measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), machine=_machine(),
                        parallel=parallel, about=_about())
    started = time.monotonic()

    def failed(i: int, exc: Exception) -> Cell:  # a worker that died: an error cell, never a pass
        sc, m = cells[i]
        return Cell(m or CORRECT, sc.name, "error", error=f"worker failed: {exc}", source=str(sc.source))

    jobs = [(str(sc.source), m, str(out / (m or CORRECT)), bin_dir) for sc, m in cells]
    matrix.cells += in_processes(_cell_worker, jobs, parallel, failed, progress)
    matrix.wall_seconds = time.monotonic() - started
    return matrix


DOC_JSON = "kill-matrix.json"
"""The name the doc gives its data file (written beside it, ``docs/kill-matrix.json``)."""


def _load(paths: tuple[str, ...]) -> KillMatrix:
    """Measured matrices merged in order (a later cell replaces an earlier one of the same mutant and scenario)."""
    merged = KillMatrix()
    for path in paths:
        try:
            part = KillMatrix.from_dict(json.loads(Path(path).read_text()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"{path}: not a kill matrix: {exc}") from exc
        if len(paths) == 1:
            return part
        merged.merge(part.cells)
        merged.measured_at = min(filter(None, (merged.measured_at, part.measured_at)), default="")
        merged.machine = merged.machine or part.machine
        merged.command = "; ".join(filter(None, (merged.command, part.command)))
        merged.parallel = max(merged.parallel, part.parallel)
        merged.wall_seconds += part.wall_seconds
        merged.about = {**merged.about, **part.about}
    return merged


def write(matrix: KillMatrix, out: Path, doc: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "kill-matrix.json").write_text(json.dumps(matrix.as_dict(), indent=1) + "\n")
    (out / "kill-matrix.md").write_text(render_markdown(matrix))
    click.echo(f"kill matrix: {(out / 'kill-matrix.json').resolve()}")
    if doc is not None:
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text(render_markdown(matrix, DOC_JSON))
        doc.with_suffix(".json").write_text(json.dumps(matrix.as_dict(), indent=1) + "\n")
        click.echo(f"doc: {doc.resolve()} (data: {doc.with_suffix('.json').name})")


@click.command("mutants")
@click.argument("scenarios", nargs=-1)
@click.option("--mutant", "mutants", multiple=True, help="A mutant to run (repeatable; default: every mutant).")
@click.option("--report-dir", type=click.Path(file_okay=False), default="draguard-report/mutants", show_default=True,
              help="Where kill-matrix.json, kill-matrix.md and each run's verdict go.")
@click.option("--parallel", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Runs at a time, each with its own control plane (about 1 core each).")
@click.option("--doc", type=click.Path(dir_okay=False), help="Also write the Markdown here (docs/kill-matrix.md).")
@click.option("--from-json", "from_json", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="Render measured kill-matrix.json files again, merged (with --doc); run nothing. Repeatable.")
@click.option("--bin-dir", envvar="DRAGUARD_BIN_DIR", help="Directory with the control-plane binaries.")
def command(scenarios: tuple[str, ...], mutants: tuple[str, ...], report_dir: str, parallel: int, doc: str | None,
            from_json: tuple[str, ...], bin_dir: str | None) -> None:
    """Run scenarios against the correct driver and each mutant; print and write the kill matrix."""
    if from_json:
        matrix = _load(from_json)
        print_kill_matrix(matrix)
        if doc:
            Path(doc).write_text(render_markdown(matrix, DOC_JSON))
            click.echo(f"doc: {Path(doc).resolve()}")
            Path(doc).with_suffix(".json").write_text(json.dumps(matrix.as_dict(), indent=1) + "\n")
        sys.exit(EXIT_OK if matrix.ok else EXIT_FAILED)
    chosen = resolve_mutants(mutants)
    loaded = resolve_scenarios(scenarios)
    out = Path(report_dir)
    total = len(loaded) * (len(chosen) + 1)
    _err.print(f"{total} runs: {len(loaded)} scenario(s) x (correct driver + {len(chosen)} mutant(s)), "
               f"{parallel} at a time")
    count = 0

    def progress(cell: Cell) -> None:
        nonlocal count
        count += 1
        _err.print(f"[{count}/{total}] {cell.mutant} × {cell.scenario}: {cell.verdict} "
                   f"{' '.join(cell.detectors)} ({cell.duration:.0f}s)", highlight=False)

    matrix = measure(loaded, chosen, out, parallel, bin_dir, progress)
    matrix.command = "draguard mutants " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    print_kill_matrix(matrix)
    write(matrix, out, Path(doc) if doc else None)
    sys.exit(EXIT_OK if matrix.ok else EXIT_FAILED)
