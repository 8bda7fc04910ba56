"""``draguard bench``: run the benchmarks, write their results to benchmarks/results/, and render those as
docs/benchmarks.md (``--doc``)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

import draguard.chaos  # noqa: F401  (fault kinds: the runner-based benchmarks validate scenarios)
from draguard.harness.bench.suite import BENCHMARKS, run_benchmarks
from draguard.reports.benchmarks import write_benchmarks_doc
from draguard.reports.console import print_bench

__all__ = ["command"]


@click.command("bench")
@click.argument("names", nargs=-1, type=click.Choice(sorted(BENCHMARKS)))
@click.option("--repeat", type=click.IntRange(1, 50), default=5, show_default=True, help="Samples per benchmark (medians are reported).")
@click.option("--output-dir", type=click.Path(file_okay=False), default="benchmarks/results", show_default=True)
@click.option("--nodes", type=click.IntRange(1, 1000), default=None, help="Fake nodes (dra-throughput, invariant-cost, churn, detection, fake-nodes).")
@click.option("--pods", type=click.IntRange(1, 20_000), default=None, help="Pods (dra-throughput, invariant-cost, detection); claims per driver (driver-calls).")
@click.option("--devices", type=click.IntRange(1, 128), default=None, help="Devices per node.")
@click.option("--reset-ms", type=click.IntRange(0, 60_000), default=None,
              help="driver-calls: the fake driver's modelled device reset wait (default 0: the upstream test "
                   "driver resets nothing; scenarios run with 5).")
@click.option("--rate", type=click.FloatRange(0.1, 1000), default=None, help="Operations per second (churn).")
@click.option("--duration", type=click.FloatRange(1, 3600), default=None, help="Seconds (churn, fake-nodes).")
@click.option("--limit", type=click.IntRange(0, 1000), default=None, help="Scenarios to run (library-wall; 0: all).")
@click.option("--parallel", type=click.IntRange(1, 16), default=None,
              help="library-wall: also run the files this many at a time (draguard run --parallel), alternating with "
                   "the sequential rounds.")
@click.option("--injections", type=click.IntRange(1, 1000), default=None,
              help="detection: violations injected per run (default 30).")
@click.option("--scheduler-perf/--no-scheduler-perf", default=None,
              help="dra-throughput: require (or skip) upstream scheduler_perf; by default it runs when "
                   "`draguard cluster build --scheduler-perf` built it, and the result says why when not.")
@click.option("--doc", type=click.Path(dir_okay=False), default=None,
              help="Write the Markdown page of every result in --output-dir to this file (docs/benchmarks.md); "
                   "with no NAMES, run nothing.")
def command(names: tuple[str, ...], repeat: int, output_dir: str, nodes: int | None, pods: int | None,
            devices: int | None, reset_ms: int | None, rate: float | None, duration: float | None, limit: int | None,
            parallel: int | None, injections: int | None, scheduler_perf: bool | None, doc: str | None) -> None:  # fmt: skip
    """Measure the pieces that have targets (default: all); sizes by flags, defaults at the issue's scale."""
    if doc is not None and not names:
        click.echo(str(write_benchmarks_doc(Path(output_dir), Path(doc)).resolve()))
        return
    err = Console(stderr=True)
    sizes = {"nodes": nodes, "pods": pods, "devices": devices, "reset_ms": reset_ms, "rate": rate, "duration": duration, "limit": limit,
             "count": nodes, "scheduler_perf": scheduler_perf, "parallel": parallel, "injections": injections}  # fmt: skip
    results = run_benchmarks(list(names) or list(BENCHMARKS), repeat, Path(output_dir), lambda m: err.log(m, highlight=False),
                             sizes)  # fmt: skip
    print_bench(results, err)
    click.echo(str(Path(output_dir).resolve()))
    if doc is not None:
        click.echo(str(write_benchmarks_doc(Path(output_dir), Path(doc)).resolve()))
