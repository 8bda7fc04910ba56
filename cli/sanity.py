"""``draguard sanity``: the gRPC contract suite of a DRA kubelet plugin. Parses options and delegates to
:func:`draguard.conformance.sanity.run_sanity`; prints one line per check and renders the result with ``draguard.reports`` (``verdict.json`` after every
check; ``--report junit,html,allure`` for more).

Exit codes: 0 every check passed or was skipped with its reason, 1 a check failed, 2 bad input, or
a check could not be run (an error of the environment) while none failed, 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from draguard import reports
from draguard.conformance.sanity import CommandHooks, FakeDriverHooks, SanityConfig, run_sanity, sanity_checks
from draguard.harness.core.errors import EXIT_OK
from draguard.harness.result import CheckResult, RunResult
from draguard.reports.console import check_line, check_summary

__all__ = ["command", "exit_code"]


def exit_code(result: RunResult) -> int:
    """1 a check failed; 2 a check could not run (and none failed) or none ran; 0 otherwise."""
    return result.exit_code


@click.command("sanity")
@click.option("--registration-socket", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The driver's registration socket (<kubelet>/plugins_registry/<driver>-reg.sock).")
@click.option("--plugin-socket", type=click.Path(dir_okay=False, path_type=Path),
              help="The driver's DRA socket [default: the endpoint its registration names].")
@click.option("--kubeconfig", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Kubeconfig of the cluster (claims are created in a namespace of their own).")
@click.option("--context", default=None, help="kubeconfig context")
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
@click.option("--report", "formats", multiple=True, metavar="FORMAT",
              help=f"Report formats besides json, repeatable or comma-separated: {', '.join(reports.REPORTS.names())}.")
@click.option("--list", "list_only", is_flag=True, help="List the checks (id, rule, source) and exit.")
def command(
    registration_socket: Path, plugin_socket: Path | None, kubeconfig: Path, context: str | None, driver_name: str,
    node: str | None, cdi_dir: Path | None, restart_command: str | None, fake_driver_root: Path | None,
    select: tuple[str, ...], call_timeout: float, check_timeout: float, blocking_bound: float, out: Path,
    trace: bool, formats: tuple[str, ...], list_only: bool,
) -> int:
    """Check a DRA kubelet plugin's gRPC contract the way the kubelet calls it."""
    chosen = reports.check_formats(["json", *(f.strip() for item in formats for f in item.split(",") if f.strip())])
    entries = sanity_checks(select)
    if not entries:
        raise click.BadParameter(f"no check matches {list(select)}", param_hint="--check")
    if list_only:
        for e in entries:
            click.echo(f"{e.name}\t{e.summary}\t{e.meta.get('source')}")
        return EXIT_OK
    config = SanityConfig(
        registration_socket=registration_socket.absolute(), kubeconfig=kubeconfig, driver=driver_name,
        plugin_socket=plugin_socket.absolute() if plugin_socket else None, node=node,
        cdi_dir=cdi_dir.absolute() if cdi_dir else None, context=context, call_timeout=call_timeout,
        check_timeout=check_timeout, blocking_bound=blocking_bound, select=select,
        trace=(out / "grpc-calls.jsonl").absolute() if trace else None,
    )
    hooks: object = None
    restart = CommandHooks(restart_command) if restart_command else None
    if fake_driver_root is not None:
        if node is None:
            raise click.BadParameter("give --node with --fake-driver-root", param_hint="--node")
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
    return exit_code(result)
