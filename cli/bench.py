"""``draguard bench``: run the benchmarks and write their results to benchmarks/results/."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from draguard.harness.bench import BENCHMARKS, run_benchmarks

__all__ = ["command"]


@click.command("bench")
@click.argument("names", nargs=-1, type=click.Choice(sorted(BENCHMARKS)))
@click.option("--repeat", type=click.IntRange(1, 50), default=5, show_default=True, help="Samples per benchmark (medians are reported).")
@click.option("--output-dir", type=click.Path(file_okay=False), default="benchmarks/results", show_default=True)
def command(names: tuple[str, ...], repeat: int, output_dir: str) -> None:
    """Measure cluster start-up, fake-node load, watch decoding and scenario loading (default: all)."""
    err = Console(stderr=True)
    results = run_benchmarks(list(names) or list(BENCHMARKS), repeat, Path(output_dir), lambda m: err.log(m, highlight=False))
    table = Table(title="draguard bench (medians)")
    for col in ("benchmark", "median", "unit", "detail"):
        table.add_column(col)
    for name, r in results.items():
        if name == "watch-decode":
            table.add_row(name, f"{r['plain_median']} vs {r['typed_median']}", r["unit"],
                          f"typed models {r['ratio_typed_over_plain']}x slower than plain JSON")
        else:
            detail = f"target {r['target']}: {'met' if r['met'] else 'NOT met'}" if "target" in r else ""
            table.add_row(name, str(r["median"]), r["unit"], detail)
    err.print(table)
    click.echo(str(Path(output_dir).resolve()))
