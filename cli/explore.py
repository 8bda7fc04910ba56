"""``draguard explore SCENARIO [--mutant M] [--budget 30m] [--seed N]``: search fault interleavings.

Hands the scenario file to :func:`draguard.harness.campaign.explore.explore`, which starts one local
control plane, lets Hypothesis draw plans of faults against the scenario's fleet and workloads, runs
each as a scenario, shrinks a plan that violated an invariant and writes it as a scenario file into
the report folder; each failing or errored example's and each replay's result is rendered there by
``draguard.reports`` (``json``: ``examples/<n>/verdict.json``, its timeline and what the run recorded;
``draguard report`` renders the rest). Prints one line per example and a summary.

Exit: 0 nothing violated within the budget; 1 a failing interleaving was found (its file is named);
2 bad input (an unknown mutant or fault kind, a budget that is not a positive duration, a scenario
that cannot be explored) or an unusable environment, in one line, with nothing left running.
"""

from __future__ import annotations

from pathlib import Path

import click

import draguard.chaos  # noqa: F401  (registers the fault kinds explore draws from)
from draguard import reports
from draguard.harness.campaign.explore import ExploreResult, describe_plan, explore, parse_budget
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK
from draguard.harness.result import RunResult

from . import options

__all__ = ["command"]


def _summary(result: ExploreResult) -> str:
    driver = f"mutant {result.mutant}" if result.mutant else "the scenario's driver"
    lines = [f"explored {result.scenario} against {driver} (seed {result.seed}): {result.examples} example(s) in "
             f"{result.elapsed:.0f}s of a {result.budget:.0f}s budget, {result.errors} in error; stopped: {result.stopped}",
             f"fault kinds drawn: {', '.join(result.faults)}"]
    if result.left_out:
        lines.append("left out: " + "; ".join(f"{k} ({v})" for k, v in sorted(result.left_out.items())))
    if not result.found:
        lines.append("no invariant was violated")
    for f in result.found:
        lines.append(f"FOUND {f.invariant} violated (first at example {f.first_example}, {f.first_seconds:.0f}s in); "
                     f"smallest plan: {describe_plan(f.plan)}")
        lines.append(f"  evidence: {f.evidence}")
        lines.append(f"  scenario: {f.file} (replay: {f.replay})")
    return "\n".join(lines)


def _report(result: RunResult, out: Path) -> None:
    reports.render(result, out, ["json"])


@click.command("explore")
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--mutant", help="Run the fake driver with this mutant (default: the scenario's own driver).")
@click.option("--budget", default="30m", show_default=True, metavar="DURATION",
              help="Wall-clock time for the search once the control plane is up (30s, 10m, 1h).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True,
              help="Seed of the search: the same seed draws the same plans.")
@click.option("--max-steps", type=click.IntRange(1, 16), default=3, show_default=True,
              help="The most fault steps a plan adds to the scenario's timeline.")
@click.option("--fault", "faults", multiple=True, metavar="KIND",
              help="Draw only this fault kind (repeatable; default: every kind that applies to the scenario).")
@options.report_dir("draguard-report/explore", help="Where failing examples' reports and the scenario files found go.")
@options.bin_dir()
def command(scenario: Path, mutant: str | None, budget: str, seed: int, max_steps: int, faults: tuple[str, ...],
            report_dir: Path, bin_dir: str | None) -> None:
    """Search fault interleavings of SCENARIO for an invariant violation; write the smallest as a scenario."""
    seconds = parse_budget(budget)
    result = explore(scenario, mutant=mutant, budget=seconds, seed=seed, max_steps=max_steps, faults=faults,
                     out=report_dir, bin_dir=bin_dir, progress=lambda m: click.echo(m, err=True), report=_report)
    click.echo(_summary(result))
    raise click.exceptions.Exit(EXIT_FAILED if result.found else EXIT_OK)
