"""The fake driver's entry point as a child process: ``python -m draguard.harness.driver.main fake|host ...``.

:class:`~.process.FakeDriverProcess` and :class:`~.host.DriverHostProcess` start drivers this way: a
harness entry point that imports only the driver (no ``draguard`` command line, about a second less
start-up on a busy machine; chaos runs restart drivers often). ``draguard driver fake`` and
``draguard driver host`` (:mod:`draguard.cli.driver`, the command line users script) parse their
options with click and call the same :func:`run_fake` and :func:`run_host`.

Exit codes as for ``draguard``: 0 stopped by SIGTERM/SIGINT, 2 bad input (one line on stderr), an
injected crash's own code.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from draguard.harness.core.errors import UsageError
from draguard.harness.core.paths import DEFAULT_DRIVER, state_dir
from draguard.harness.core.process import child_logging, child_main, stop_on_signals

from ..kube import Kube
from .host import DriverHost, read_nodes_file
from .service import DriverConfig, build, serve

__all__ = ["run_fake", "run_host", "main"]


def run_fake(config: DriverConfig, log_level: str = "info") -> None:
    """Run the fake DRA driver for one node until SIGTERM/SIGINT (sockets removed, checkpoint kept)."""
    child_logging(log_level)
    driver = build(config)
    with stop_on_signals(driver.stop.set):
        serve(driver)


def run_host(kubeconfig: Path, root: Path, nodes_file: Path, driver: str = DEFAULT_DRIVER, reset_ms: int = 5,
             log_level: str = "warning") -> None:
    """Serve the fake driver for many nodes in this one process until SIGTERM/SIGINT."""
    child_logging(log_level)
    host = DriverHost(Kube.from_kubeconfig(kubeconfig), root, read_nodes_file(nodes_file), driver=driver,
                      reset_seconds=reset_ms / 1000)  # fmt: skip
    with stop_on_signals(host.stop_event.set):
        try:
            host.start()
        except BaseException:
            host.shutdown()
            raise
        host.serve()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m draguard.harness.driver.main")
    sub = parser.add_subparsers(dest="mode", required=True)
    fake = sub.add_parser("fake")
    fake.add_argument("--kubeconfig", type=Path, default=None)
    fake.add_argument("--in-cluster", action="store_true",
                      help="no kubeconfig: the pod's ServiceAccount (a DaemonSet's driver pod)")
    fake.add_argument("--node", default=os.environ.get("NODE_NAME"),
                      help="the node it serves (default: $NODE_NAME, from the downward API in a pod)")
    fake.add_argument("--kubelet-dirs", action="store_true",
                      help="sockets, checkpoint and CDI specs where a real node's kubelet and containerd look")
    fake.add_argument("--root", type=Path, default=None)
    fake.add_argument("--node-root", type=Path, default=None)
    fake.add_argument("--driver", default=DEFAULT_DRIVER)
    fake.add_argument("--devices", type=int, default=None)
    fake.add_argument("--topology", type=Path, default=None)
    fake.add_argument("--mutant", default=None)
    fake.add_argument("--pod-uid", default=os.environ.get("POD_UID") or None,
                      help="this instance's pod UID: rolling-update socket names (default: $POD_UID)")
    fake.add_argument("--health-interval", type=float, default=1.0)
    fake.add_argument("--reset-ms", type=int, default=5)
    fake.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    host = sub.add_parser("host")
    host.add_argument("--kubeconfig", type=Path, required=True)
    host.add_argument("--root", type=Path, required=True)
    host.add_argument("--nodes-file", type=Path, required=True)
    host.add_argument("--driver", default=DEFAULT_DRIVER)
    host.add_argument("--reset-ms", type=int, default=5)
    host.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.mode == "host":
        run_host(args.kubeconfig, args.root, args.nodes_file, args.driver, args.reset_ms, args.log_level)
        return 0
    if not args.node:
        raise UsageError("--node: the node this driver serves (or $NODE_NAME) is missing")
    if args.kubeconfig is None and not args.in_cluster:
        raise UsageError("--kubeconfig: missing (or --in-cluster, in a pod)")
    run_fake(DriverConfig(
        kubeconfig=args.kubeconfig, in_cluster=args.in_cluster, kubelet_dirs=args.kubelet_dirs, node=args.node, root=args.root if args.root is not None else state_dir() / "nodes",
        node_root=args.node_root, driver=args.driver, devices=args.devices, topology=args.topology, mutant=args.mutant,
        health_interval=args.health_interval, reset_seconds=args.reset_ms / 1000, instance=args.pod_uid,
    ), args.log_level)
    return 0


def main(argv: list[str] | None = None) -> int:
    return child_main(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
