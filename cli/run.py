"""``draguard run SCENARIO...`` and ``draguard cleanup``: play scenarios, undo what a crashed run left.

``--driver NAME --device-class NAME`` plays them against an installed DRA driver instead of the fake
one (:mod:`draguard.harness.campaign.retarget`): what a scenario needs and the driver cannot give makes
it not applicable, reported with the reasons; a run where nothing was applicable exits 2."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console

import draguard.chaos  # noqa: F401  (registers the fault kinds before scenarios are validated)
from draguard import reports
from draguard.harness.core.environment import run_environment
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, UsageError
from draguard.harness.kube import Kube
from draguard.harness.core.process import interrupt_on_sigterm
from draguard.harness.result import RunResult, ScenarioResult
from draguard.harness.runner.journal import pending_journals, recover
from draguard.harness.driver.external import TEST_DRIVER_NAME
from draguard.harness.campaign.retarget import (
    ClusterFacts,
    Plan,
    RunTarget,
    decide,
    detect,
    local_facts,
    not_applicable_result,
    retarget,
)
from draguard.harness.campaign.parallel import check_parallel, run_in_parallel
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenarios
from draguard.harness.scenario.types import Scenario
from draguard.reports.console import print_plan, print_rates
from draguard.reports.terminal import RunProgress, print_paths

__all__ = ["COMMANDS", "run_scenarios", "REPORT_OPTION"]

_err = Console(stderr=True, log_path=False)

REPORT_OPTION = click.option(
    "--report", "formats", multiple=True, metavar="FORMAT",
    help=f"Report format, repeatable or comma-separated: {', '.join(reports.REPORTS.names())} "
         f"(default: {' '.join(reports.DEFAULT_FORMATS)}).")



@click.command("run")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path())
@click.option("--cluster", "backend", type=click.Choice(["local", "kubeconfig"]), help="Override the scenarios' backend.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig of an existing cluster (--cluster kubeconfig).")
@click.option("--context", help="Context in the kubeconfig.")
@click.option("--report-dir", type=click.Path(file_okay=False), default="draguard-report", show_default=True,
              help="Where the reports go (verdict.json, <scenario>/timeline.json, report.html, ...).")
@REPORT_OPTION
@click.option("--seed", type=int, help="Override every scenario's seed.")
@click.option("--dry-run", is_flag=True, help="Print what would be created and which fault hits which target; touch nothing.")
@click.option("--bin-dir", envvar="DRAGUARD_BIN_DIR", help="Directory with the control-plane binaries.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each scenario N times and report how often each verdict came out (flaky shows as flaky).")
@click.option("--driver", "driver_name", metavar="NAME",
              help="Run the scenarios against this installed DRA driver (ResourceSlice spec.driver) instead of "
                   "the fake driver; needs --device-class and a cluster (--kubeconfig or $KUBECONFIG), or "
                   f"--cluster local for the upstream DRA test driver ({TEST_DRIVER_NAME}), which draguard runs itself.")
@click.option("--device-class", metavar="NAME", help="The DeviceClass of the installed driver the workloads ask for "
                                                     "(with --cluster local, draguard creates it).")
@click.option("--parallel", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Scenarios run at a time, each on a local control plane of its own in its own process "
                   "(not with --driver, --repeat or an existing cluster).")
@click.option("--allow-context", "allow", metavar="CONTEXT",
              help="With --driver: allow steps that touch more than the run's own objects (drain-node, "
                   "device-taint, load) on this kubeconfig context (a local draguard cluster is always allowed).")
def run(scenarios: tuple[str, ...], backend: str | None, kubeconfig: str | None, context: str | None,
        report_dir: str, formats: tuple[str, ...], seed: int | None, dry_run: bool, bin_dir: str | None,
        repeat: int, driver_name: str | None, device_class: str | None, parallel: int, allow: str | None) -> None:
    """Run scenario files (or folders of them) and write the reports; exit 0 if all met expectations."""
    from .report import split_formats

    chosen = reports.check_formats(split_formats(formats) or reports.DEFAULT_FORMATS)
    loaded = load_scenarios(scenarios)
    retargeting: Retargeting | None = None
    if driver_name or device_class or allow:
        retargeting = _retargeting(driver_name, device_class, allow, backend, kubeconfig, context)
        if not retargeting.target.local:
            backend, kubeconfig = "kubeconfig", retargeting.kubeconfig
    if parallel > 1:
        if retargeting is not None or repeat > 1:
            raise UsageError("--parallel runs the scenarios' own fake drivers side by side: not with --driver, "
                             "--device-class, --allow-context or --repeat")
        check_parallel(loaded, backend)
    if dry_run:
        for sc in loaded:
            if retargeting is None:
                print_plan(sc, seed)
            else:
                reasons, plan = retargeting.decide(sc)
                click.echo(f"{sc.name}: " + ("not applicable: " + "; ".join(reasons) if plan is None else
                           "applicable; nodes " + ", ".join(f"{a} -> {b}" for a, b in plan.nodes.items())))
        return
    if repeat > 1:
        ok = True
        if retargeting is not None:  # what is not applicable is said once, not repeated
            applicable = []
            for sc in loaded:
                reasons, plan = retargeting.decide(sc)
                if plan is None:
                    _err.print(f"{sc.name}: not applicable on driver {retargeting.target.driver}: "
                               + "; ".join(reasons), highlight=False, markup=False)
                else:
                    applicable.append(sc)
            if not applicable:
                raise UsageError(f"no scenario is applicable on driver {retargeting.target.driver}: nothing to repeat")
            loaded = applicable
        for sc in loaded:
            ok = run_repeated(sc, repeat, Path(report_dir), backend=backend, kubeconfig=kubeconfig,
                              context=context, seed=seed, bin_dir=bin_dir, formats=chosen,
                              retargeting=retargeting) and ok
        sys.exit(EXIT_OK if ok else EXIT_FAILED)
    result = run_scenarios(loaded, Path(report_dir), backend=backend, kubeconfig=kubeconfig, context=context,
                           seed=seed, bin_dir=bin_dir, formats=chosen, retargeting=retargeting, parallel=parallel)
    click.get_current_context().exit(result.exit_code)


@dataclass(frozen=True)
class Retargeting:
    """``--driver``/``--device-class``: the installed driver, the cluster's kubeconfig and what it offers."""

    target: RunTarget
    facts: ClusterFacts | None
    """What the cluster offers; None with ``--cluster local`` (each scenario gets its own, see local_facts)."""
    kubeconfig: str | None

    def decide(self, sc: Scenario) -> tuple[list[str], Plan | None]:
        """Why ``sc`` is not applicable on this driver (empty: it is), and how its nodes map."""
        return decide(sc, self.target, self.facts or local_facts(sc))


def _retargeting(driver: str | None, device_class: str | None, allow: str | None, backend: str | None,
                 kubeconfig: str | None, context: str | None) -> Retargeting:
    """Check the options and detect what the cluster and the driver offer (UsageError: exit 2)."""
    from .load import _context_of, _is_local

    if not driver or not device_class:
        raise UsageError("--driver and --device-class go together: the installed driver's name and the "
                         "DeviceClass its devices are asked for by")
    if backend == "local":
        # A control plane of its own per scenario: draguard runs the driver itself, which it can only do
        # for the upstream DRA test driver (harness/driver/external.py).
        if driver != TEST_DRIVER_NAME:
            raise UsageError(f"--cluster local --driver {driver}: on a control plane of its own draguard runs only "
                             f"the upstream DRA test driver ({TEST_DRIVER_NAME}); for a driver installed in a "
                             "cluster give --kubeconfig")
        if kubeconfig or allow:
            raise UsageError("--cluster local starts its own control plane: --kubeconfig and --allow-context are "
                             "for an existing cluster")
        return Retargeting(RunTarget(driver, device_class, allow_destructive=True, local=True), None, None)
    path = Path(kubeconfig or os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    if not path.is_file():
        raise UsageError(f"--driver needs a cluster: kubeconfig {path} is not a file (give --kubeconfig)")
    active = _context_of(path, context)
    local = _is_local(path)
    target = RunTarget(driver, device_class, allow_destructive=local or allow == active, context=active)
    if allow is not None and allow != active:
        raise UsageError(f"--allow-context {allow}: the kubeconfig's context is {active!r}")
    facts = detect(Kube.from_kubeconfig(str(path), context), target)
    _err.print(f"driver {driver} (DeviceClass {device_class}): {facts.describe()}; attributes: "
               f"{', '.join(sorted(facts.attributes)) or 'none'}", highlight=False)
    return Retargeting(target, facts, str(path))


def run_scenarios(loaded: list[Scenario], out: Path, *, backend: str | None = None, kubeconfig: str | None = None,
                  context: str | None = None, seed: int | None = None, bin_dir: str | None = None,
                  formats: list[str] | tuple[str, ...] = reports.DEFAULT_FORMATS,
                  retargeting: Retargeting | None = None, parallel: int = 1) -> RunResult:
    """Run scenarios one after the other (``parallel`` at a time, each in its own process), render the
    reports and print where they are.

    With ``retargeting`` each scenario runs against the installed driver, or is reported not
    applicable with the reasons (it is not run then)."""
    chosen = reports.check_formats(formats)
    interrupt_on_sigterm()
    result = RunResult(run_id="", environment={**run_environment(seed), "started": time.time()})
    progress = RunProgress(_err)
    if parallel > 1:
        _err.print(f"{len(loaded)} scenario(s), {parallel} at a time", highlight=False)
        done = lambda r: _err.print(f"{r.name}: {r.outcome} in {r.duration:.1f}s", highlight=False, markup=False)  # noqa: E731
        for run_id, scenario_result in run_in_parallel(loaded, out, parallel, seed=seed, bin_dir=bin_dir, done=done):
            result.run_id = result.run_id or run_id
            result.scenarios.append(scenario_result)
        loaded = []
    for sc in loaded:
        if retargeting is not None:
            reasons, plan = retargeting.decide(sc)
            if plan is None:
                skipped = not_applicable_result(sc, reasons, retargeting.target)
                _err.print(f"{sc.name}: {skipped.not_applicable}", highlight=False, markup=False)
                result.scenarios.append(skipped)
                continue
            sc = retarget(sc, retargeting.target, plan)
        with progress.scenario(sc.name):
            runner = Runner(sc, RunOptions(backend=backend, kubeconfig=kubeconfig, context=context, bin_dir=bin_dir,
                                           report_dir=out, seed=seed, progress=progress))
            result.run_id = result.run_id or runner.run_id
            result.scenarios.append(runner.run())
    result.environment["ended"] = time.time()
    written = reports.render(result, out, chosen)
    print_paths(written)
    return result


def run_repeated(sc: Scenario, times: int, out: Path, **options: Any) -> bool:
    """Run ``sc`` ``times`` times (reports under <out>/<name>/run-<i>), print and write the verdict
    rates (<out>/<name>/repeat.json); True if every run met every expectation."""
    from draguard.harness.campaign.repeat import rates

    results: list[ScenarioResult] = []
    for i in range(1, times + 1):
        _err.print(f"[bold]{sc.name}[/bold]: run {i} of {times}", highlight=False)
        run_result = run_scenarios([sc], out / sc.name / f"run-{i}", **options)
        results.extend(run_result.scenarios)
    r = rates(results)
    (out / sc.name / "repeat.json").write_text(json.dumps(r.as_dict(), indent=2) + "\n")
    print_rates(r, _err)
    click.echo(f"rates: {(out / sc.name / 'repeat.json').resolve()}")
    return r.met == times


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
