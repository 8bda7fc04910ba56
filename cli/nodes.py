"""``draguard nodes``: run fake nodes (the kubelet's DRA role) until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from draguard.harness.errors import UsageError
from draguard.harness.kube import Kube
from draguard.harness.nodes import FakeNodes, NodeSpec, default_root, node_names
from draguard.harness.nodes.agent import validate_node_name

from ._entry import invoke

__all__ = ["command"]


def _labels(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--label {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT."""
    done = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        done.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not done.wait(1.0):
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@click.command("nodes")
@click.option("--kubeconfig", required=True, type=click.Path(exists=True, dir_okay=False), help="Cluster to join.")
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
    kubeconfig: str,
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
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    names = [validate_node_name(n) for n in node_names(nodes, count, prefix)]
    extra = _labels(labels)
    for value, what in ((heartbeat_interval, "--heartbeat-interval"), (call_timeout, "--call-timeout")):
        if value <= 0:
            raise UsageError(f"{what} {value}: must be positive")
    if workers < 1:
        raise UsageError(f"--workers {workers}: must be at least 1")
    specs = [NodeSpec(n, labels=extra, run_id=run_label) for n in names]
    # One connection per thread that calls the API: the sync workers, the pool of heartbeats (as many
    # again, see FakeNodes), the pod watch and the event recorder.
    kube = Kube.from_kubeconfig(kubeconfig, pool_size=2 * max(4, workers) + 4)
    fake = FakeNodes(
        kube,
        specs,
        Path(root) if root else default_root(),
        workers=workers,
        heartbeat_interval=heartbeat_interval,
        call_timeout=call_timeout,
        backoff_max=backoff_max,
    )
    fake.start()
    try:
        if ready_file:
            Path(ready_file).write_text("ready\n")
        click.echo(f"draguard nodes: serving {len(names)} node(s) under {fake.root}", err=True)
        wait_for_signal()
    finally:
        fake.stop()
        if ready_file:
            Path(ready_file).unlink(missing_ok=True)


if __name__ == "__main__":  # `python -m draguard.cli.nodes`: starts faster than the full CLI
    sys.exit(invoke(command, None, "draguard nodes"))
