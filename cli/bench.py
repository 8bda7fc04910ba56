"""``draguard bench``: run the benchmarks and write their results to benchmarks/results/."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

import draguard.chaos  # noqa: F401  (fault kinds: the runner-based benchmarks validate scenarios)
from draguard.harness.bench import BENCHMARKS, run_benchmarks

__all__ = ["command"]


@click.command("bench")
@click.argument("names", nargs=-1, type=click.Choice(sorted(BENCHMARKS)))
@click.option("--repeat", type=click.IntRange(1, 50), default=5, show_default=True, help="Samples per benchmark (medians are reported).")
@click.option("--output-dir", type=click.Path(file_okay=False), default="benchmarks/results", show_default=True)
@click.option("--nodes", type=click.IntRange(1, 1000), default=None, help="Fake nodes (dra-throughput, invariant-cost, churn).")
@click.option("--pods", type=click.IntRange(1, 20_000), default=None, help="Pods (dra-throughput, invariant-cost).")
@click.option("--devices", type=click.IntRange(1, 128), default=None, help="Devices per node.")
@click.option("--rate", type=click.FloatRange(0.1, 1000), default=None, help="Operations per second (churn).")
@click.option("--duration", type=click.FloatRange(1, 3600), default=None, help="Seconds (churn, fake-nodes).")
@click.option("--limit", type=click.IntRange(0, 1000), default=None, help="Scenarios to run (library-wall; 0: all).")
def command(names: tuple[str, ...], repeat: int, output_dir: str, nodes: int | None, pods: int | None,
            devices: int | None, rate: float | None, duration: float | None, limit: int | None) -> None:  # fmt: skip
    """Measure the pieces that have targets (default: all); sizes by flags, defaults at the issue's scale."""
    err = Console(stderr=True)
    sizes = {"nodes": nodes, "pods": pods, "devices": devices, "rate": rate, "duration": duration, "limit": limit,
             "count": nodes}  # fmt: skip
    results = run_benchmarks(list(names) or list(BENCHMARKS), repeat, Path(output_dir), lambda m: err.log(m, highlight=False),
                             sizes)  # fmt: skip
    table = Table(title="draguard bench (medians)")
    for col in ("benchmark", "median", "unit", "detail"):
        table.add_column(col)
    for name, r in results.items():
        if name == "watch-decode":
            table.add_row(name, f"{r['plain_median']} vs {r['typed_median']}", r["unit"],
                          f"typed models {r['ratio_typed_over_plain']}x slower than plain JSON")
        elif name == "dra-throughput":
            table.add_row(name, str(r["median"]), "pods/s scheduled",
                          f"{r['nodes']} nodes, {r['pods']} pods; upstream threshold {r['upstream_threshold_pods_per_s']} "
                          f"(at 500 nodes); control plane alone {r['control_plane_raised_limits_median']} "
                          f"(upstream client limits: {r['control_plane_default_limits_median']}); "
                          f"draguard/alone {r['draguard_over_control_plane_median']}; Running/s "
                          f"{r['draguard_running_per_s_median']}; harness {r['harness_machine_share_median']} of the "
                          f"machine, peak {r['harness_peak_rss_mib_median']} MiB")
        else:
            detail = f"target {r['target']}: {'met' if r['met'] else 'NOT met'}" if "target" in r else ""
            table.add_row(name, str(r["median"]), r["unit"], detail)
    err.print(table)
    click.echo(str(Path(output_dir).resolve()))
