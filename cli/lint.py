"""``draguard lint PATH...``: the guardrail linter on manifests, before anything is deployed.

Parses options and delegates to :mod:`draguard.conformance.lint`. Exit codes: 0 no error-level
finding, 1 at least one, 2 unreadable or malformed input, bad options or an unreachable cluster.
"""

from __future__ import annotations

from pathlib import Path

import click

from draguard.conformance.lint import (
    DEFAULT_TARGET_RELEASE,
    FORMATS,
    RULES,
    ServerCheck,
    lint,
    parse_release,
    render,
)
from draguard.harness.core.errors import EXIT_FAILED, EXIT_OK, UsageError

from . import options
from .options import KubeTarget

__all__ = ["command"]

_DEFAULT_RELEASE = f"{DEFAULT_TARGET_RELEASE[0]}.{DEFAULT_TARGET_RELEASE[1]}"


def _rules_epilog() -> str:
    return "\b\nRules:\n" + "\n".join(f"  {r.id} ({r.severity.value}): {r.statement}" for r in RULES.values())


@click.command("lint", epilog=_rules_epilog())
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(FORMATS)),
    default="text",
    show_default=True,
    help="Report format: text (file:line:col rule-id message), json, sarif (2.1.0) or github (workflow annotations).",
)
@click.option(
    "--target-release",
    default=_DEFAULT_RELEASE,
    show_default=True,
    metavar="MAJOR.MINOR",
    help="Kubernetes release the manifests are deployed to; decides which resource.k8s.io versions are deprecated or gone.",
)
@click.option(
    "--server",
    is_flag=True,
    help="Also create every object with a server-side dry run (dryRun=All) to catch what the API server rejects.",
)
@options.kube_target("Kubeconfig of the cluster for --server [default: $KUBECONFIG or ~/.kube/config].", exists=False)
@click.option(
    "--namespace",
    default="default",
    show_default=True,
    help="Namespace for --server dry runs of namespaced objects that name none.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the report to this file instead of standard output.",
)
@click.pass_context
def command(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    target_release: str,
    server: bool,
    kube: KubeTarget,
    namespace: str,
    output: Path | None,
) -> None:
    """Check manifests (YAML/JSON files, folders, Helm charts, manifest templates) and the Go, TypeScript
    and Python code that builds them against draguard's DRA guardrails.

    Every rule has an id, a severity, a statement and a fix (listed below); exit 1 when a finding
    is an error.
    """
    try:
        release = parse_release(target_release)
    except ValueError as exc:
        raise UsageError(f"--target-release: {exc}") from exc
    kubeconfig, context = kube.kubeconfig, kube.context
    if (kubeconfig or context) and not server:
        raise UsageError("--kubeconfig and --context only apply with --server")
    check = ServerCheck.from_kubeconfig(kubeconfig, context, namespace) if server else None
    report = lint(paths, release, check)
    text = render(report, fmt)
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{output}: cannot write the report: {exc.strerror or exc}") from exc
    else:
        click.echo(text, nl=False)
    ctx.exit(EXIT_FAILED if report.errors else EXIT_OK)
