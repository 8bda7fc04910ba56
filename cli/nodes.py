"""``draguard nodes``: run fake nodes (the kubelet's DRA role) until SIGTERM or Ctrl-C. Parses options and
delegates to :func:`draguard.harness.nodes.main.serve_nodes` (which draguard's own child processes run
through ``python -m draguard.harness.nodes.main``)."""

from __future__ import annotations

import sys

import click

from draguard.harness.nodes.main import serve_nodes

from . import options
from ._entry import invoke
from .options import KubeTarget

__all__ = ["command"]


@click.command("nodes")
@options.kube_target("Kubeconfig of the cluster to join.", required=True, context=False)
@click.option("--node", "nodes", multiple=True, metavar="NAME", help="A node to run (repeatable).")
@click.option("--count", type=int, help="Run N nodes named PREFIX-0 .. PREFIX-<N-1>.")
@click.option("--prefix", help="Name prefix for --count.")
@click.option("--root", type=click.Path(file_okay=False), help="Node directories [default: <state dir>/nodes].")
@click.option("--run-label", help="Label nodes with draguard.dev/run=<RUN_LABEL>.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="An extra node label (repeatable).")
@click.option("--heartbeat-interval", type=float, default=10.0, show_default=True, help="Lease renewal period (s).")
@click.option("--call-timeout", type=float, default=45.0, show_default=True, help="Timeout of each DRA call (s).")
@click.option("--backoff-max", type=float, default=10.0, show_default=True, help="Longest retry delay of a pod (s).")
@click.option("--workers", type=int, default=8, show_default=True, help="Pod sync workers.")
@click.option("--ready-file", type=click.Path(dir_okay=False), hidden=True)
@click.option("-v", "--verbose", is_flag=True, help="Log every registration and sync.")
def command(
    kube: KubeTarget,
    nodes: tuple[str, ...],
    count: int | None,
    prefix: str | None,
    root: str | None,
    run_label: str | None,
    labels: tuple[str, ...],
    heartbeat_interval: float,
    call_timeout: float,
    backoff_max: float,
    workers: int,
    ready_file: str | None,
    verbose: bool,
) -> None:
    """Play the kubelet for nodes without machines: Node objects, leases, DRA prepare/unprepare."""
    assert kube.kubeconfig is not None  # required
    serve_nodes(kube.kubeconfig, nodes, count, prefix, root, run_label, labels, heartbeat_interval, call_timeout,
                backoff_max, workers, ready_file, verbose)


if __name__ == "__main__":  # `python -m draguard.cli.nodes`: starts faster than the full CLI
    sys.exit(invoke(command, None, "draguard nodes"))
