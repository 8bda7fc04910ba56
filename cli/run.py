"""``draguard run SCENARIO...`` and ``draguard cleanup``: play scenarios, undo what a crashed run left."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

import draguard.chaos  # noqa: F401  (registers the fault kinds before scenarios are validated)
from draguard.harness.errors import EXIT_FAILED, EXIT_OK
from draguard.harness.result import RunResult, ScenarioResult
from draguard.harness.runner.journal import pending_journals, recover
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenarios
from draguard.harness.scenario.types import Scenario

__all__ = ["COMMANDS"]

_err = Console(stderr=True)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@click.command("run")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path())
@click.option("--cluster", "backend", type=click.Choice(["local", "kubeconfig"]), help="Override the scenarios' backend.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig of an existing cluster (--cluster kubeconfig).")
@click.option("--context", help="Context in the kubeconfig.")
@click.option("--report-dir", type=click.Path(file_okay=False), default="draguard-report", show_default=True,
              help="Where verdict.json and each scenario's timeline.json go.")
@click.option("--seed", type=int, help="Override every scenario's seed.")
@click.option("--dry-run", is_flag=True, help="Print what would be created and which fault hits which target; touch nothing.")
@click.option("--bin-dir", envvar="DRAGUARD_BIN_DIR", help="Directory with the control-plane binaries.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each scenario N times and report how often each verdict came out (flaky shows as flaky).")
def run(scenarios: tuple[str, ...], backend: str | None, kubeconfig: str | None, context: str | None,
        report_dir: str, seed: int | None, dry_run: bool, bin_dir: str | None, repeat: int) -> None:
    """Run scenario files (or folders of them) and write verdict.json; exit 0 if all met expectations."""
    loaded = load_scenarios(scenarios)
    if dry_run:
        for sc in loaded:
            print_plan(sc, seed)
        return
    if repeat > 1:
        ok = True
        for sc in loaded:
            ok = run_repeated(sc, repeat, Path(report_dir), backend=backend, kubeconfig=kubeconfig,
                              context=context, seed=seed, bin_dir=bin_dir) and ok
        sys.exit(EXIT_OK if ok else EXIT_FAILED)
    result = run_scenarios(loaded, Path(report_dir), backend=backend, kubeconfig=kubeconfig, context=context,
                           seed=seed, bin_dir=bin_dir)
    sys.exit(EXIT_OK if result.ok else EXIT_FAILED)


def run_scenarios(loaded: list[Scenario], out: Path, *, backend: str | None = None, kubeconfig: str | None = None,
                  context: str | None = None, seed: int | None = None, bin_dir: str | None = None) -> RunResult:
    """Run scenarios one after the other, print the summary and the report paths."""
    signal.signal(signal.SIGTERM, _interrupt)
    out.mkdir(parents=True, exist_ok=True)
    result = RunResult(run_id="")
    for sc in loaded:
        with _err.status(f"[bold]{sc.name}[/bold]: starting") as status:
            def progress(message: str, sc: Scenario = sc) -> None:
                status.update(f"[bold]{sc.name}[/bold]: {message}")
                _err.log(f"{sc.name}: {message}", highlight=False)

            runner = Runner(sc, RunOptions(backend=backend, kubeconfig=kubeconfig, context=context, bin_dir=bin_dir,
                                           report_dir=out, seed=seed, progress=progress))
            result.run_id = result.run_id or runner.run_id
            result.scenarios.append(runner.run())
    (out / "verdict.json").write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    print_summary(result)
    click.echo(f"verdict: {(out / 'verdict.json').resolve()}")
    for s in result.scenarios:
        if s.timeline_file:
            click.echo(f"timeline: {Path(s.timeline_file).resolve()}")
    return result


def run_repeated(sc: Scenario, times: int, out: Path, **options: Any) -> bool:
    """Run ``sc`` ``times`` times (reports under <out>/<name>/run-<i>), print and write the verdict
    rates (<out>/<name>/repeat.json); True if every run met every expectation."""
    from draguard.harness.repeat import rates

    results: list[ScenarioResult] = []
    for i in range(1, times + 1):
        _err.print(f"[bold]{sc.name}[/bold]: run {i} of {times}", highlight=False)
        run_result = run_scenarios([sc], out / sc.name / f"run-{i}", **options)
        results.extend(run_result.scenarios)
    r = rates(results)
    (out / sc.name / "repeat.json").write_text(json.dumps(r.as_dict(), indent=2) + "\n")
    table = Table(title=f"{sc.name}: verdicts over {times} runs ({r.met} met every expectation)")
    for col in ("invariant", "expected", "verdicts", ""):
        table.add_column(col)
    for name, counts in r.invariants.items():
        verdicts = ", ".join(f"{status} {n}/{times}" for status, n in counts.most_common())
        table.add_row(name, r.expected.get(name) or "-", verdicts, "[yellow]flaky[/yellow]" if r.flaky(name) else "")
    for name, counts in r.steps.items():
        table.add_row(f"step {name}", "ok", ", ".join(f"{s} {n}/{times}" for s, n in counts.most_common()),
                      "[yellow]flaky[/yellow]" if len(counts) > 1 else "")
    _err.print(table)
    click.echo(f"rates: {(out / sc.name / 'repeat.json').resolve()}")
    return r.met == times


def print_summary(result: RunResult) -> None:
    table = Table(title="draguard verdict")
    for col in ("scenario", "result", "invariants", "steps", "seconds"):
        table.add_column(col)
    for s in result.scenarios:
        table.add_row(s.name, "[green]met[/green]" if s.ok else "[red]NOT met[/red]", _invariants(s),
                      f"{sum(st.ok for st in s.steps)}/{len(s.steps)} ok", f"{s.duration:.0f}")
    _err.print(table)
    for s in result.scenarios:
        if not s.ok and s.source:
            _err.print(f"replay: draguard run {s.source} --seed {s.seed}", highlight=False)
        if s.error:
            _err.print(f"[red]{s.name}: {s.error}[/red]")
        for st in s.steps:
            if st.status != "ok":
                colour = "yellow" if st.optional else "red"
                _err.print(f"[{colour}]{s.name}: step {st.name} {st.status}"
                           f"{' (optional)' if st.optional else ''}: {st.detail}[/{colour}]", highlight=False)
        for e in s.expectations:
            if not e.met:
                _err.print(f"[red]{s.name}: expected {e.kind} not met: {e.rule} ({e.detail})[/red]", highlight=False)
        for name, inv in s.invariants.items():
            if inv.met and inv.expected == "violate":  # the incident reproduced: show its evidence
                _err.print(f"{s.name}: {name} violated, as this reproduction expects:", highlight=False)
                for v in inv.violations[:3]:
                    _err.print(f"    {v.message}", highlight=False)
            if not inv.met:
                want = "hold" if inv.expected == "hold" else "be violated"
                _err.print(f"[red]{s.name}: {name} should {want} but was {inv.status}[/red]")
                for v in inv.violations[:5]:
                    _err.print(f"    {v.message}")


def _invariants(s: ScenarioResult) -> str:
    parts = []
    for name, inv in s.invariants.items():
        if inv.expected is None:
            continue
        mark = "✓" if inv.met else "✗"
        parts.append(f"{mark}{name}{'(violated)' if inv.status == 'violated' else ''}")
    return " ".join(parts)


def print_plan(sc: Scenario, seed: int | None) -> None:
    from draguard.harness.runner import deploy

    console = Console()
    console.print(f"[bold]{sc.name}[/bold] ({sc.source}) seed={seed if seed is not None else sc.seed}")
    console.print(f"  cluster: {sc.cluster.backend} feature gates {dict(sc.cluster.feature_gates) or '{}'}")
    console.print(f"  driver: {sc.driver.kind} {sc.driver.name}" + (f" mutant={sc.driver.mutant}" if sc.driver.mutant else ""))
    for n in sc.nodes:
        t = n.topology
        what = (t.preset or f"{t.gpus} GPUs" if t and (t.preset or t.gpus) else f"{len(t.devices)} devices" if t else "-")
        console.print(f"  node {n.name}: {what}")
    for dc in sc.device_classes:
        console.print(f"  create DeviceClass {dc.name}")
    for w in sc.workloads:
        for obj in deploy.claim_objects(w, "<namespace>", "<run>"):
            console.print(f"  create {obj['kind']} {obj['metadata']['name']}")
        if w.gang == "podgroup":
            console.print(f"  create PodGroup {w.name} (minCount {w.min_count})")
    deferred = deploy.deferred_workloads(sc)
    order = [f"{w.name}-{i}" for w, i in deploy.creation_order(sc) if w.name not in deferred]
    console.print(f"  create pods in order: {', '.join(order)}")
    for name in sorted(deferred):
        by = next(s for s in sc.timeline if getattr(s.params, "workload", None) == name)
        console.print(f"  hold back workload {name} until step {by.name} ({by.fault})")
    for step in sc.timeline:
        when = (f"at {step.at.total_seconds():g}s" if step.at is not None
                else f"{step.after.delay.total_seconds():g}s after step {step.after.step} started"
                if step.after is not None else f"when {step.when}")
        target = step.target
        console.print(f"  step {step.name}: {step.fault} {when} target={target if target else 'default'} "
                      f"(random choices drawn with seed {seed if seed is not None else sc.seed}:{step.index})")
    console.print(f"  expect hold={list(sc.expect.hold)} violate={list(sc.expect.violate)}")


@click.command("cleanup")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig to clean (default: the one each run journaled).")
def cleanup(kubeconfig: str | None) -> None:
    """Undo what interrupted or crashed runs left behind: faults, processes, labelled objects."""
    journals = pending_journals()
    if not journals:
        _err.print("nothing to clean up")
        return
    for path in journals:
        done = recover(path, kubeconfig, log=lambda m: _err.print(m))
        _err.print(f"run {path.stem}: " + ("; ".join(done) if done else "nothing left"))


COMMANDS = [run, cleanup]
