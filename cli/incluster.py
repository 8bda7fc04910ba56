"""``draguard in-cluster`` (certify inside a pod, deploy/draguard-certify-job.yaml and
deploy/sonobuoy-plugin.yaml run it) and ``draguard results`` (copy its bundle out): parse options and
delegate to :mod:`draguard.harness.cluster.incluster`.

``draguard results`` exits as certify did in the pod: 0 every check passed or was skipped with its
reason, 1 a check failed or the copied bundle does not verify, 2 bad input (certify's in the pod, whose
log's tail it prints; or its own: an unreadable kubeconfig, no such namespace or Job), or the run not
done within ``--timeout``.
"""

from __future__ import annotations

from pathlib import Path

import sys

import click
from rich.console import Console

from draguard.conformance.certify import verify
from draguard.harness.cluster import incluster
from draguard.harness.core.errors import EXIT_FAILED, EXIT_USAGE, HarnessError, UsageError
from draguard.harness.kube import Kube

from . import options
from .options import KubeTarget

__all__ = ["COMMANDS"]

_err = Console(stderr=True)


def _progress(message: str) -> None:
    _err.print(f"[dim]{message}[/dim]", highlight=False)


@click.command("in-cluster", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
               hidden=True)  # what the Job's container runs (deploy/draguard-certify-job.yaml); not typed by users
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path(incluster.RESULTS),
              show_default=True, help="The results folder (bundle/, certify.log, exit-code, done).")
@click.option("--keep-for", type=click.FloatRange(0, 7 * 86400), default=3600.0, show_default=True,
              help="Seconds to wait for `draguard results` after the run before ending.")
@click.option("--sonobuoy-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Hand the bundle to Sonobuoy's worker here (its results folder, /tmp/sonobuoy/results) and end.")
@click.argument("certify_args", nargs=-1, type=click.UNPROCESSED)
def in_cluster_command(results: Path, keep_for: float, sonobuoy_dir: Path | None, certify_args: tuple[str, ...]) -> int:
    """Inside a pod: run `draguard certify CERTIFY_ARGS` as the pod's ServiceAccount into the results folder,
    then wait until `draguard results` has copied it out."""
    if not certify_args:
        raise UsageError("draguard in-cluster: give certify's arguments (--driver, --device-class, --product, ...)")
    certify = [sys.executable, "-m", "draguard.cli", "certify"]
    return incluster.run_in_pod(certify, list(certify_args), results, keep_for, sonobuoy_dir, _progress)


@click.command("results")
@options.kube_target("Kubeconfig of the cluster the Job runs in [default: $KUBECONFIG or ~/.kube/config].")
@click.option("--namespace", default=incluster.NAMESPACE, show_default=True, help="The Job's namespace.")
@click.option("--job", default=incluster.JOB, show_default=True, help="The Job's name.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=Path("draguard-results"),
              show_default=True, help="Where the results go (bundle/, bundle.tar.gz, certify.log, exit-code).")
@click.option("--timeout", type=click.FloatRange(1, 7 * 86400), default=3600.0, show_default=True,
              help="Seconds to wait for the run to finish.")
def results_command(kube: KubeTarget, namespace: str, job: str, output: Path, timeout: float) -> int:
    """Wait for the in-cluster certify Job (deploy/draguard-certify-job.yaml) to finish, copy its bundle out
    (as `sonobuoy retrieve` does), let its pod end, and exit as certify did."""
    try:
        client = Kube.from_kubeconfig(kube.kubeconfig, kube.context)
    except HarnessError as exc:
        raise UsageError(str(exc)) from exc
    got = incluster.retrieve(client, output, namespace, job, timeout, _progress)
    bundle = output / incluster.BUNDLE
    if got.code == EXIT_USAGE or not bundle.is_dir():
        log = (output / incluster.LOG).read_text(errors="replace").strip().splitlines() if (output / incluster.LOG).is_file() else []
        for line in log[-10:]:
            click.echo(f"  | {line}")
        click.echo(f"draguard results: certify in pod {got.pod} exited {got.code} and wrote no bundle; its log is {output / incluster.LOG}")
        return got.code if got.code else EXIT_FAILED
    v = verify(bundle)
    for problem in v.problems:
        click.echo(f"BUNDLE   {problem}")
    code = EXIT_FAILED if v.problems else got.code
    click.echo(f"draguard results: bundle {bundle}/ from pod {got.pod}: certify exited {got.code}; "
               f"{'NOT verified' if v.problems else 'verified'} ({v.passed} passed, {v.skipped} skipped, "
               f"{len(v.failed_checks)} failed)")
    return code


COMMANDS = [in_cluster_command, results_command]
