"""``draguard external-driver``: run the upstream DRA test driver for one fake node until SIGTERM or Ctrl-C.

A thin wrapper over :class:`draguard.harness.driver.external.ExternalPluginProcess`: the driver's
sockets and CDI specs go under ``<root>/<node>/`` where ``draguard nodes --root`` finds them.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from draguard.harness.cluster.preflight import require_node
from draguard.harness.driver.external import (
    TEST_DRIVER_NAME,
    ExternalPluginProcess,
    delete_published_slices,
    external_device_class,
    find_test_driver,
)
from draguard.harness.core.errors import HarnessError
from draguard.harness.kube import Kube
from draguard.harness.nodes.agent import validate_node_name
from draguard.harness.core.paths import state_dir

from . import options
from .options import KubeTarget

__all__ = ["command"]


@click.command("external-driver")
@options.kube_target("Kubeconfig of the cluster to publish to.", required=True, context=False)
@click.option("--node", required=True, help="The fake node the driver serves (start `draguard nodes` for it first).")
@click.option("--root", type=click.Path(file_okay=False), help="Node root shared with `draguard nodes` [default: state dir/nodes].")
@click.option("--driver", default=TEST_DRIVER_NAME, show_default=True, help="Driver name (--drivername).")
@click.option("--devices", default=4, show_default=True, type=click.IntRange(0, 128), help="Devices in its slice.")
@options.bin_dir()
@click.option("--device-class", metavar="NAME", help="Also create DeviceClass NAME for the driver (deleted on exit).")
def command(
    kube: KubeTarget, node: str, root: str | None, driver: str, devices: int, bin_dir: str | None, device_class: str | None
) -> None:
    """Run the upstream DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver) for one fake node."""
    assert kube.kubeconfig is not None  # required
    kubeconfig = str(kube.kubeconfig)
    validate_node_name(node)
    plugin = ExternalPluginProcess(
        kubeconfig, node, root=Path(root) if root else state_dir() / "nodes", driver=driver, devices=devices,
        binary=find_test_driver(bin_dir),
    )
    client = Kube.from_kubeconfig(kubeconfig)
    require_node(client, node, where=kubeconfig)  # before anything starts: one line, exit 2
    done = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        done.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        plugin.start()
        if device_class:
            client.apply(external_device_class(device_class, driver))
        click.echo(f"{driver} serving node {node}: {plugin.registration_socket} (log {plugin.log})")
        while not done.wait(0.5):
            if not plugin.alive:
                raise HarnessError(f"the DRA test driver for node {node} exited; last lines of {plugin.log}:\n"
                                   + plugin.log_tail(8))
    finally:
        plugin.stop()
        for s, h in old.items():
            signal.signal(s, h)
        try:  # best effort: an unreachable API server must not hide why we are stopping
            if device_class:
                client.delete("DeviceClass", device_class)
            delete_published_slices(client, node, driver)
        except HarnessError as exc:
            click.echo(f"draguard: warning: cleanup of node {node}'s slices failed: {exc}", err=True)
