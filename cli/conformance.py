"""``draguard conformance`` and ``draguard certify``: parse options and delegate to
:func:`draguard.conformance.cluster.run_conformance` and :func:`draguard.conformance.certify.certify`.

Exit codes: 0 every check passed or was skipped with its reason, 1 a check failed (or, for
``certify --verify``: a file changed, missing or empty, a PRODUCT.yaml field or URL, the e2e.log
version line, junit_01.xml and e2e.log disagreeing, a required check skipped, a check failed, or a
programme's requirement not met; each named on its own line), 2 bad input (a missing product field,
an unknown profile or programme, not a bundle), an unusable cluster, or, checked before any check
starts, a ``--device-class`` that selects no published device, a ``--namespace`` that does not exist,
a ``--calls`` record that does not exist, or (``certify``) a socket path with no socket, 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from draguard.conformance.certify import CertifyOptions, certify, node_access, parse_profiles, parse_programmes, verify
from draguard.conformance.cluster import ClusterConfig, KubeletRestart, cluster_checks, run_conformance
from draguard.harness.cluster.preflight import require_allocatable
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, UsageError
from draguard.harness.kube import Kube
from draguard.harness.result import CheckResult, RunResult
from draguard.reports.console import check_line, check_summary
from draguard.reports.verdict import write_verdict

from . import options
from .options import KubeTarget

__all__ = ["COMMANDS"]

def _line(check: CheckResult) -> None:
    click.echo(check_line(check))


def _summary(name: str, result: RunResult) -> int:
    click.echo(check_summary(name, result.checks))
    return EXIT_OK if result.ok else EXIT_FAILED


_kube = options.kube_target("Kubeconfig of the cluster with the driver installed.")
_driver = click.option("--driver", "driver_name", help="The driver's name (ResourceSlice spec.driver).")
_class = click.option("--device-class", help="A DeviceClass that selects the driver's devices.")
_nodes = click.option("--nodes", default=None, help="Label selector of the nodes to use [default: all the driver serves].")
_profile = click.option("--profile", "profiles", multiple=True,
                        help="Profiles to run, comma-separated: core,topology,sharing,gang,chaos,driver-calls "
                             "[default: all].")
_restart = click.option("--restart-command", default=None,
                        help="Shell command that restarts the driver on node {node} (restart checks).")
_fake = click.option("--fake-driver-root", type=click.Path(file_okay=False, path_type=Path),
                     help="Node root of draguard's fake driver: node-side checks and fault hooks.")
_namespace = click.option("--namespace", default=None,
                          help="An existing namespace to create the checks' objects in [default: a namespace of the "
                               "suite's own]; only what the suite creates is deleted.")
_wait = click.option("--wait-timeout", type=click.FloatRange(5, 3600), default=60.0, show_default=True,
                     help="seconds a pod may take to run or go")


def _argv(ctx: click.Context) -> list[str]:
    """The command line as given (options only), for the bundle's README."""
    argv = [ctx.info_name or "certify"]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value in (None, (), False) or param.name == "bundle" or not isinstance(param, click.Option):
            continue
        for v in value if isinstance(value, tuple) else (value,):
            argv += [param.opts[0], str(v)]
    return argv


def _need(**values: object) -> None:
    for name, value in values.items():
        if not value:
            raise UsageError(f"missing option --{name.replace('_', '-')}")


@click.command("conformance")
@_kube
@_driver
@_class
@_nodes
@_profile
@_restart
@_fake
@_wait
@_namespace
@click.option("--kubelet-restart-command", default=None,
              help="Shell command that restarts the node agent (kubelet) of node {node} while its pods run "
                   "(conformance.chaos.kubelet-restart).")
@click.option("--cdi-dir", default=None,
              help="The nodes' CDI spec folder as seen from here, {node} replaced by the node's name: answered CDI "
                   "IDs must resolve there, and no spec of an unprepared claim may stay [default: not judged].")
@click.option("--calls", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The record of the gRPC interposer in front of the driver (draguard proxy --record FILE): the "
                   "driver's calls are judged check by check (conformance.driver-calls.*) [default: not applicable].")
@click.option("--check", "select", multiple=True, help="Run only checks whose id matches this glob (repeatable).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write verdict.json here.")
@click.option("--list", "list_only", is_flag=True, help="List the checks (id, rule, source) and exit.")
def conformance_command(
    kube: KubeTarget, driver_name: str | None, device_class: str | None, nodes: str | None,
    profiles: tuple[str, ...], restart_command: str | None, fake_driver_root: Path | None, wait_timeout: float,
    namespace: str | None, kubelet_restart_command: str | None, cdi_dir: str | None, calls: Path | None,
    select: tuple[str, ...], out: Path | None, list_only: bool,
) -> int:
    """Check a DRA driver installed in a cluster: claims, sharing, topology, gangs, chaos."""
    kubeconfig, context = kube.kubeconfig, kube.context
    chosen = parse_profiles(profiles)
    entries = cluster_checks(chosen, select)
    if not entries:
        raise UsageError(f"--check: no check of profiles {', '.join(chosen)} matches {list(select)}")
    if list_only:
        for e in entries:
            click.echo(f"{e.name}\t{e.summary}\t{e.meta.get('source')}")
        return EXIT_OK
    _need(kubeconfig=kubeconfig, driver=driver_name, device_class=device_class)
    assert kubeconfig and driver_name and device_class
    config = ClusterConfig(kubeconfig=kubeconfig, driver=driver_name, device_class=device_class, context=context,
                           nodes=nodes, profiles=chosen, select=select, wait_timeout=wait_timeout,
                           namespace=namespace, cdi_dir=cdi_dir, calls=calls)
    if calls is not None and not calls.is_file():
        raise UsageError(f"--calls {calls}: no such file (the interposer writes it: draguard proxy --record {calls})")
    # Pre-flight: every check but one creates claims; with nothing allocatable each would wait for nothing.
    require_allocatable(Kube.from_kubeconfig(kubeconfig, context), device_class, where=str(kubeconfig))
    access = node_access(fake_driver_root, driver_name, restart_command)
    if kubelet_restart_command:
        access = KubeletRestart(access, kubelet_restart_command)
    result = run_conformance(config, access, _line)
    if out is not None:
        write_verdict(result, out)
    return _summary("conformance", result)


@click.command("certify")
@_kube
@_driver
@_class
@_nodes
@_profile
@click.option("--product", type=click.Path(dir_okay=False, path_type=Path),
              help="product.yaml: vendor, name, version, website_url, documentation_url, driver_image or driver_version.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="The bundle folder (and <out>.tar.gz).")
@click.option("--registration-socket", type=click.Path(dir_okay=False, path_type=Path),
              help="The driver's registration socket: also run the gRPC contract (sanity) checks.")
@click.option("--plugin-socket", type=click.Path(dir_okay=False, path_type=Path), help="The driver's DRA socket.")
@click.option("--node", default=None, help="The node whose sockets are given [default: from the slices].")
@click.option("--cdi-dir", type=click.Path(file_okay=False, path_type=Path), help="The driver's CDI spec folder.")
@_restart
@_fake
@_wait
@_namespace
@click.option("--capabilities", "capabilities_file", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML/JSON file of what the driver supports (see draguard sanity --help); the sanity checks "
                   "for what it does not declare are reported not applicable.")
@click.option("--idempotent-count", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="How many times each sanity prepare and unprepare check makes each call, comparing the answers.")
@click.option("--programme", "programmes", multiple=True,
              help="Also render the evidence this programme wants into the bundle: ai-conformance (repeatable).")
@click.option("--verify", "bundle", type=click.Path(path_type=Path), default=None,
              help="Check BUNDLE (folder or .tar.gz): manifest, verdict, the verify-conformance bot's checks and "
                   "its programmes' requirements; then exit.")
def certify_command(
    kube: KubeTarget, driver_name: str | None, device_class: str | None, nodes: str | None,
    profiles: tuple[str, ...], product: Path | None, out: Path | None, registration_socket: Path | None,
    plugin_socket: Path | None, node: str | None, cdi_dir: Path | None, restart_command: str | None,
    fake_driver_root: Path | None, wait_timeout: float, namespace: str | None, capabilities_file: Path | None,
    idempotent_count: int, programmes: tuple[str, ...], bundle: Path | None,
) -> int:
    """Run the suites against a driver and write a certification bundle (or --verify one)."""
    kubeconfig, context = kube.kubeconfig, kube.context
    if bundle is not None:
        v = verify(bundle)
        for problem in v.problems:
            click.echo(f"{'TAMPERED' if 'changed since the bundle was written' in problem else 'BUNDLE  '} {problem}")
        for failed in v.failed_checks:
            click.echo(f"FAILED   {failed}")
        for unmet in v.requirements:
            click.echo(f"UNMET    {unmet}")
        verdict = ("NOT verified" if v.problems else "verified") + (
            "; every check passed" if not v.failed_checks else "") + (
            f"; {len(v.requirements)} requirement(s) not met" if v.requirements else "")
        click.echo(f"draguard certify --verify {bundle}: {verdict}"
                   f" ({v.passed} passed, {v.skipped} skipped, {len(v.failed_checks)} failed)")
        return v.exit_code
    _need(kubeconfig=kubeconfig, driver=driver_name, device_class=device_class, product=product, out=out)
    assert kubeconfig and driver_name and device_class and product and out
    opts = CertifyOptions(
        kubeconfig=kubeconfig, driver=driver_name, device_class=device_class, product=product, out=out,
        profiles=parse_profiles(profiles), context=context, nodes=nodes, registration_socket=registration_socket,
        plugin_socket=plugin_socket, node=node, cdi_dir=cdi_dir, restart_command=restart_command,
        fake_driver_root=fake_driver_root, wait_timeout=wait_timeout, programmes=parse_programmes(programmes),
        capabilities=capabilities_file, idempotent_count=idempotent_count, namespace=namespace,
        argv=_argv(click.get_current_context()),
    )
    result, archive = certify(opts, _line)
    code = _summary("certify", result)
    click.echo(f"draguard certify: bundle {out}/ and {archive}")
    return code


COMMANDS = [conformance_command, certify_command]
