"""``draguard driver``: run DRA drivers for fake nodes. Parses options and delegates to
:mod:`draguard.harness.driver.service`.

    draguard driver fake --kubeconfig FILE --node NAME [--root DIR] [--driver NAME]
                         [--devices N | --topology FILE] [--mutant NAME]
                         [--health-interval S] [--reset-ms MS] [--log-level LEVEL]

The command line is scripted by users: keep it stable. ``python -m draguard.cli.driver fake ...``
runs the same command without loading every other command first. draguard's own child processes
do not go through here: :mod:`draguard.harness.driver.process` starts
``python -m draguard.harness.driver.main``, which runs the same :func:`run_fake` / :func:`run_host`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from draguard.harness.core.paths import DEFAULT_DRIVER, state_dir
from draguard.harness.driver.main import run_fake, run_host
from draguard.harness.driver.mutants import MUTANTS
from draguard.harness.driver.service import DriverConfig

from . import options
from ._entry import invoke
from .options import KubeTarget

__all__ = ["command", "run"]


@click.group("driver")
def command() -> None:
    """Run DRA kubelet plugins for fake nodes."""


def _mutant_help() -> str:
    return "reproduce a known driver bug: " + ", ".join(sorted(MUTANTS))


@command.command("fake")
@options.kube_target("Kubeconfig of the cluster to use.", required=True, context=False)
@click.option("--node", required=True, help="Node this driver serves (pool name, spec.nodeName)")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="node directories root [default: <state dir>/nodes]",
)
@click.option(
    "--node-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where the node's hardware (device truth) and CDI specs live [default: the --root folder]",
)
@click.option("--driver", "driver_name", default=DEFAULT_DRIVER, show_default=True, help="driver name")
@click.option("--devices", type=click.IntRange(1, 512), default=None, help="N generic GPUs [default: 8]")
@click.option(
    "--topology", type=click.Path(dir_okay=False, path_type=Path), default=None, help="node topology file (YAML/JSON)"
)
@click.option("--mutant", default=None, help=_mutant_help())
@click.option("--pod-uid", default=None, envvar="POD_UID",
              help="this instance's pod UID: serve under rolling-update socket names, beside another instance")
@click.option("--health-interval", type=click.FloatRange(0.05, 60), default=1.0, show_default=True, help="seconds")
@click.option("--reset-ms", type=click.IntRange(0, 60000), default=5, show_default=True, help="simulated reset time")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
)
def fake(
    kube: KubeTarget,
    node: str,
    root: Path | None,
    node_root: Path | None,
    driver_name: str,
    devices: int | None,
    topology: Path | None,
    mutant: str | None,
    pod_uid: str | None,
    health_interval: float,
    reset_ms: int,
    log_level: str,
) -> None:
    """Run the fake DRA driver for one node until SIGTERM/SIGINT (sockets removed, checkpoint kept)."""
    assert kube.kubeconfig is not None  # required
    run_fake(DriverConfig(
        kubeconfig=kube.kubeconfig, node=node, root=root if root is not None else state_dir() / "nodes",
        node_root=node_root, driver=driver_name, devices=devices, topology=topology, mutant=mutant,
        health_interval=health_interval, reset_seconds=reset_ms / 1000, instance=pod_uid,
    ), log_level)


@command.command("host")
@options.kube_target("Kubeconfig of the cluster to use.", required=True, context=False)
@click.option("--root", required=True, type=click.Path(file_okay=False, path_type=Path), help="node directories root")
@click.option("--nodes-file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help='JSON {"nodes": [{"node": N, "topology": FILE | "devices": 8, "mutant": M}, ...]}')
@click.option("--driver", "driver_name", default=DEFAULT_DRIVER, show_default=True, help="driver name")
@click.option("--reset-ms", type=click.IntRange(0, 60000), default=5, show_default=True, help="simulated reset time")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="warning",
    show_default=True,
)
def host(kube: KubeTarget, root: Path, nodes_file: Path, driver_name: str, reset_ms: int, log_level: str) -> None:
    """Serve the fake driver for many nodes in this one process until SIGTERM/SIGINT.

    Each node keeps its own sockets, checkpoint, CDI specs, faults file and mutant; a control
    socket <root>/.driver-host.sock stops, kills and starts one node's driver (chaos steps).
    """
    assert kube.kubeconfig is not None  # required
    run_host(kube.kubeconfig, root, nodes_file, driver_name, reset_ms, log_level)


def run(argv: list[str] | None = None) -> int:
    """``draguard driver`` on its own process, without importing every other command."""
    return invoke(command, argv, "draguard driver")


if __name__ == "__main__":
    sys.exit(run())
