"""``draguard sanity``: the gRPC contract suite of a DRA kubelet plugin. Parses options and delegates to
:func:`draguard.conformance.sanity.run_sanity`; prints one line per check and renders the result with ``draguard.reports`` (``verdict.json`` after every
check; ``--report junit,html,allure`` for more).

A check that cannot start (a hook it needs cannot be done) is skipped before it starts; one for a
capability the ``--capabilities`` file does not declare is not applicable. A driver left down by a
check fails that check; the suite restarts it or stops with one line naming the cause.

Exit codes: 0 every check passed or was skipped with its reason, 1 a check failed, 2 bad input (among
it, checked before anything starts: no socket at ``--registration-socket`` or ``--plugin-socket``), or
a check could not be run (an error of the environment) while none failed, 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from draguard import reports
from draguard.conformance.sanity import (
    CommandHooks,
    FakeDriverHooks,
    SanityConfig,
    require_node,
    require_sockets,
    run_sanity,
    sanity_checks,
)
from draguard.conformance.sanity.capabilities import load_capabilities
from draguard.harness.core.errors import EXIT_OK
from draguard.harness.result import CheckResult, RunResult
from draguard.reports.console import check_line, check_summary

from . import options
from .options import KubeTarget

__all__ = ["command", "exit_code"]


def exit_code(result: RunResult) -> int:
    """1 a check failed; 2 a check could not run (and none failed) or none ran; 0 otherwise."""
    return result.exit_code


@click.command("sanity")
@click.option("--registration-socket", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The driver's registration socket (<kubelet>/plugins_registry/<driver>-reg.sock).")
@click.option("--plugin-socket", type=click.Path(dir_okay=False, path_type=Path),
              help="The driver's DRA socket [default: the endpoint its registration names].")
@options.kube_target("Kubeconfig of the cluster (claims are created in a namespace of their own).", required=True)
@click.option("--driver", "driver_name", required=True, help="The driver's name (ResourceSlice spec.driver).")
@click.option("--node", default=None, help="The node the driver serves [default: the one its slices name].")
@click.option("--cdi-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the driver writes CDI specs; without it the CDI checks skip.")
@click.option("--restart-command", default=None, help="Shell command that restarts the driver (restart checks).")
@click.option("--fake-driver-root", type=click.Path(file_okay=False, path_type=Path),
              help="The node root of draguard's fake driver: use its fault file for the checks that need hooks.")
@click.option("--check", "select", multiple=True, help="Run only checks whose id matches this glob (repeatable).")
@click.option("--call-timeout", type=click.FloatRange(0.1, 300), default=10.0, show_default=True, help="seconds per gRPC call")
@click.option("--check-timeout", type=click.FloatRange(1, 3600), default=90.0, show_default=True, help="seconds per check")
@click.option("--blocking-bound", type=click.FloatRange(0.1, 60), default=2.0, show_default=True,
              help="seconds a call may wait while another call of the driver is slow")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("sanity-report"),
              show_default=True, help="Directory for verdict.json (written after every check).")
@click.option("--trace/--no-trace", default=True, show_default=True,
              help="Send the calls through the interposer and record each in <out>/grpc-calls.jsonl.")
@options.report_formats("--report", default=(), help="Report formats besides json")
@click.option("--idempotent-count", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="How many times each prepare and unprepare check makes each call, comparing the answers "
                   "(csi-sanity's IdempotentCount).")
@click.option("--capabilities", "capabilities_file", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML/JSON file of what the driver supports (healthStream, sharingStrategies, adminAccess, "
                   "partitionableDevices); checks for what it does not declare are reported not applicable.")
@click.option("--namespace", default=None,
              help="An existing namespace to create the claims in [default: a namespace of the suite's own]; "
                   "only what the suite creates is deleted.")
@click.option("--list", "list_only", is_flag=True, help="List the checks (id, rule, source) and exit.")
def command(
    registration_socket: Path, plugin_socket: Path | None, kube: KubeTarget, driver_name: str,
    node: str | None, cdi_dir: Path | None, restart_command: str | None, fake_driver_root: Path | None,
    select: tuple[str, ...], call_timeout: float, check_timeout: float, blocking_bound: float, out: Path,
    trace: bool, formats: list[str], idempotent_count: int, capabilities_file: Path | None,
    namespace: str | None, list_only: bool,
) -> int:
    """Check a DRA kubelet plugin's gRPC contract the way the kubelet calls it."""
    chosen = reports.check_formats(["json", *formats])
    kubeconfig, context = kube.kubeconfig, kube.context
    assert kubeconfig is not None  # required
    entries = sanity_checks(select)
    if not entries:
        raise click.BadParameter(f"no check matches {list(select)}", param_hint="--check")
    if list_only:
        for e in entries:
            click.echo(f"{e.name}\t{e.summary}\t{e.meta.get('source')}")
        return EXIT_OK
    require_sockets(registration_socket, plugin_socket)  # pre-flight: nothing there to call
    node = require_node(kubeconfig, context, driver_name, node)  # pre-flight: whose devices to claim
    config = SanityConfig(
        registration_socket=registration_socket.absolute(), kubeconfig=kubeconfig, driver=driver_name,
        plugin_socket=plugin_socket.absolute() if plugin_socket else None, node=node,
        cdi_dir=cdi_dir.absolute() if cdi_dir else None, context=context, call_timeout=call_timeout,
        check_timeout=check_timeout, blocking_bound=blocking_bound, select=select,
        trace=(out / "grpc-calls.jsonl").absolute() if trace else None, idempotent_count=idempotent_count,
        capabilities=load_capabilities(capabilities_file) if capabilities_file else None, namespace=namespace,
    )
    hooks: object = None
    restart = CommandHooks(restart_command, node=node) if restart_command else None
    if fake_driver_root is not None:
        hooks = FakeDriverHooks(fake_driver_root, node, driver_name, process=restart)
    elif restart is not None:
        hooks = restart
    out.mkdir(parents=True, exist_ok=True)
    verdict = out / "verdict.json"
    partial = RunResult(run_id="sanity")

    def progress(check: CheckResult) -> None:
        click.echo(check_line(check))
        partial.checks.append(check)
        reports.render(partial, out, ["json"])

    result = run_sanity(config, hooks, on_result=progress)
    reports.render(result, out, chosen)
    click.echo(f"{check_summary('sanity', result.checks)}; {verdict}")
    for key in ("setupError", "traceError"):
        if result.environment.get(key):
            click.echo(f"draguard sanity: {result.environment[key]}", err=True)
    if result.environment.get("stopped"):
        click.echo(f"draguard sanity: stopped: {result.environment['stopped']}; "
                   f"{len(result.environment.get('notRun') or ())} check(s) not run", err=True)
    return exit_code(result)
