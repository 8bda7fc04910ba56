"""``draguard run SCENARIO...`` and ``draguard cleanup``: play scenarios, undo what a crashed run left.

Parses options, calls :mod:`draguard.harness.campaign` (:func:`~draguard.harness.campaign.scenarios.run_scenarios`,
``--repeat``: :func:`~draguard.harness.campaign.repeat.repeat_scenarios`, ``--dry-run``:
:func:`~draguard.harness.campaign.dry_run.plan_of`) and renders with :mod:`draguard.reports`.

``--driver NAME --device-class NAME`` plays them against an installed DRA driver instead of the fake
one (:mod:`draguard.harness.campaign.retarget`): what a scenario needs and the driver cannot give makes
it not applicable, reported with the reasons; a run where nothing was applicable exits 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console

import draguard.chaos  # noqa: F401  (registers the fault kinds before scenarios are validated)
from draguard import reports
from draguard.harness.campaign.dry_run import plan_of
from draguard.harness.campaign.parallel import check_parallel
from draguard.harness.campaign.repeat import repeat_scenarios
from draguard.harness.campaign.retarget import Retargeting, refuse_destructive, retargeting
from draguard.harness.campaign.retarget import retarget as retarget_scenario
from draguard.harness.campaign.scenarios import run_scenarios
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, UsageError
from draguard.harness.driver.external import TEST_DRIVER_NAME
from draguard.harness.judge.baseline import MAX_SLOWDOWN, MIN_SECONDS, judge_against
from draguard.harness.result import RunResult
from draguard.harness.runner.journal import pending_journals, recover
from draguard.harness.runner.setup import kubeconfig_of
from draguard.harness.scenario.loader import load_scenarios
from draguard.reports.console import print_plan, print_rates
from draguard.reports.files import write_json
from draguard.reports.terminal import RunProgress, print_paths

from . import options
from .options import KubeTarget

__all__ = ["COMMANDS"]

_err = Console(stderr=True, log_path=False)


def _note(message: str) -> None:
    _err.print(message, highlight=False, markup=False)


def _render(out: Path, result: RunResult, formats: list[str]) -> None:
    print_paths(reports.render(result, out, formats))


@click.command("run")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path())
@click.option("--cluster", "backend", type=click.Choice(["local", "kubeconfig", "kind"]),
              help="Override the scenarios' backend (kind: draguard's kind cluster 'default', or the one --kubeconfig names).")
@options.kube_target("Kubeconfig of an existing cluster (--cluster kubeconfig, or --driver) [default with --driver: "
                     "$KUBECONFIG or ~/.kube/config].", exists=False, allow=True)
@options.report_dir(help="Where the reports go (verdict.json, <scenario>/timeline.json, report.html, ...).")
@options.report_formats("--report")
@click.option("--seed", type=int, help="Override every scenario's seed.")
@click.option("--dry-run", is_flag=True, help="Print what would be created and which fault hits which target; touch nothing.")
@options.bin_dir()
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each scenario N times and report how often each verdict came out (flaky shows as flaky).")
@click.option("--driver", "driver_name", metavar="NAME",
              help="Run the scenarios against this installed DRA driver (ResourceSlice spec.driver) instead of "
                   "the fake driver; needs --device-class and a cluster (--kubeconfig or $KUBECONFIG), or "
                   f"--cluster local for the upstream DRA test driver ({TEST_DRIVER_NAME}), which draguard runs itself.")
@click.option("--device-class", metavar="NAME", help="The DeviceClass of the installed driver the workloads ask for "
                                                     "(with --cluster local, draguard creates it).")
@click.option("--restart-command", metavar="CMD",
              help="With --driver on a cluster: a shell command that restarts the driver on a node ({node} is "
                   "replaced by its name) and returns once it is back; driver-restart steps then apply where "
                   "no DaemonSet of the driver is found.")
@click.option("--baseline", type=click.Path(path_type=Path), metavar="DIR",
              help="A finished run of the same scenarios (its report directory or verdict.json): a scenario that "
                   "takes much longer than there is not met.")
@click.option("--max-slowdown", type=click.FloatRange(1.0, min_open=True), default=MAX_SLOWDOWN, show_default=True,
              help="With --baseline: how many times the baseline's wall time a scenario may take (a slowdown "
                   f"under {MIN_SECONDS:g}s never counts).")
@click.option("--parallel", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Scenarios run at a time, each on a local control plane of its own in its own process "
                   "(not with --driver, --repeat or an existing cluster).")
def run(scenarios: tuple[str, ...], backend: str | None, kube: KubeTarget, report_dir: Path, formats: list[str],
        seed: int | None, dry_run: bool, bin_dir: str | None, repeat: int, driver_name: str | None,
        device_class: str | None, restart_command: str | None, baseline: Path | None, max_slowdown: float,
        parallel: int) -> None:
    """Run scenario files (or folders of them) and write the reports; exit 0 if all met expectations."""
    _refuse_formats_as_scenarios(scenarios)
    if baseline is not None and repeat > 1:
        raise UsageError("--baseline compares one run with another: not with --repeat")
    try:
        before = reports.load_report(baseline, timelines=False) if baseline is not None else None
    except UsageError as exc:
        raise UsageError(f"--baseline: {exc}") from None
    loaded = load_scenarios(scenarios)
    for sc in loaded:  # a file written when an invariant left out of hold did not count
        if sc.hold_note:
            _err.print(sc.hold_note, highlight=False, markup=False, soft_wrap=True)
    kubeconfig = str(kube.kubeconfig) if kube.kubeconfig is not None else None
    retarget: Retargeting | None = None
    if restart_command is not None and not (driver_name or device_class):
        raise UsageError("--restart-command restarts an installed driver: give it with --driver and --device-class "
                         "(a scenario file says driver.restartCommand)")
    if driver_name or device_class:
        retarget = retargeting(driver_name, device_class, backend, kube, restart_command)
        if retarget.facts is not None:
            _err.print(f"driver {driver_name} (DeviceClass {device_class}): {retarget.facts.describe()}; attributes: "
                       f"{', '.join(sorted(retarget.facts.attributes)) or 'none'}; {retarget.facts.reach()}", highlight=False)
        if not retarget.target.local:
            backend, kubeconfig = ("kind" if backend == "kind" else "kubeconfig"), retarget.kubeconfig
    if retarget is None:  # as written, on a cluster draguard did not bring up: destructive steps need consent
        for sc in loaded:
            if (backend or sc.cluster.backend) == "kubeconfig":
                path = kube.kubeconfig or (Path(sc.cluster.kubeconfig) if sc.cluster.kubeconfig else None)
                refuse_destructive([sc], KubeTarget(path, kube.context or sc.cluster.context, kube.allow_context))
    if retarget is None and kube.kubeconfig is not None:  # backend kind trusts its cluster: draguard's own only
        for sc in loaded:
            if (backend or sc.cluster.backend) == "kind":
                kubeconfig_of(sc, "kind", str(kube.kubeconfig))
    if backend == "kind" and retarget is None:
        fake = [sc.name for sc in loaded if sc.driver.kind == "fake"]
        if fake:
            raise UsageError(f"--cluster kind runs a driver installed in the kind cluster; {', '.join(fake[:5])} "
                             "run(s) draguard's fake driver: give --driver NAME --device-class NAME to run them "
                             "against the installed one")
    if parallel > 1:
        if retarget is not None or repeat > 1:
            raise UsageError("--parallel runs the scenarios' own fake drivers side by side: not with --driver, "
                             "--device-class, --allow-context or --repeat")
        check_parallel(loaded, backend)
    if dry_run:
        for sc in loaded:
            if retarget is None:
                print_plan(plan_of(sc, seed))
            else:
                reasons, plan = retarget.decide(sc)
                click.echo(f"{sc.name}: " + ("not applicable: " + "; ".join(reasons) if plan is None else
                           "applicable; nodes " + ", ".join(f"{a} -> {b}" for a, b in plan.nodes.items())))
                if plan is not None and not retarget.target.local:  # what it would create and touch there
                    facts = retarget.facts
                    print_plan(plan_of(retarget_scenario(sc, retarget.target, plan), seed,
                                       facts.driver_pods if facts is not None else None, backend))
        return
    settings: dict[str, Any] = {"backend": backend, "kubeconfig": kubeconfig, "context": kube.context, "seed": seed,
                "bin_dir": bin_dir, "progress": RunProgress(_err)}
    if repeat > 1:
        ok = True
        for rates in repeat_scenarios(loaded, repeat, report_dir, retargeting=retarget, note=_note,
                                      done=lambda out, result: _render(out, result, formats), **settings):
            path = write_json(report_dir / rates.scenario / "repeat.json", rates.as_dict())
            print_rates(rates, _err)
            click.echo(f"rates: {path.resolve()}")
            ok = rates.met == repeat and ok
        raise click.exceptions.Exit(EXIT_OK if ok else EXIT_FAILED)
    result = run_scenarios(loaded, retargeting=retarget, parallel=parallel, note=_note, **settings)
    if before is not None:
        for line in judge_against(result, before, str(baseline), max_slowdown):
            _err.print(line, highlight=False, markup=False, soft_wrap=True)
    result.environment["replayOptions"] = _replay_options(backend if retarget is None else None, kube, retarget,
                                                          bin_dir)
    _render(report_dir, result, formats)
    click.get_current_context().exit(result.exit_code)


def _replay_options(backend: str | None, kube: KubeTarget, retarget: Retargeting | None,
                    bin_dir: str | None) -> list[str]:
    """The options, besides a scenario and its seed, that play it again where it ran: the cluster, the
    kubeconfig and its consent, the retargeted driver."""
    opts: list[str] = []
    if retarget is not None and retarget.target.local:
        opts += ["--cluster", "local"]
    elif backend is not None:
        opts += ["--cluster", backend]
    opts += options.as_given(kube, bin_dir)
    if retarget is not None:
        opts += ["--driver", retarget.target.driver, "--device-class", retarget.target.device_class]
        if retarget.target.restart_command is not None:
            opts += ["--restart-command", retarget.target.restart_command]
    return opts


def _refuse_formats_as_scenarios(paths: tuple[str, ...]) -> None:
    """``--report terminal json`` gives ``json`` as a scenario: say how to give several formats."""
    for p in paths:
        if p in reports.REPORTS and not Path(p).exists():
            raise UsageError(f"{p}: no such scenario file or folder (several report formats go comma-separated: "
                             f"--report terminal,{p})")


@click.command("cleanup")
@options.kube_target("Kubeconfig to clean [default: the one each run journaled].", exists=False, context=False)
def cleanup(kube: KubeTarget) -> None:
    """Undo what interrupted or crashed runs left behind: faults, processes, labelled objects."""
    journals = pending_journals()
    if not journals:
        _err.print("nothing to clean up")
        return
    for path in journals:
        done = recover(path, str(kube.kubeconfig) if kube.kubeconfig else None, log=lambda m: _err.print(m))
        _err.print(f"run {path.stem}: " + ("; ".join(done) if done else "nothing left"))


COMMANDS = [run, cleanup]
