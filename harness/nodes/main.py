"""The fake node agent's entry point as a child process: ``python -m draguard.harness.nodes.main ...``.

:class:`~.process.FakeNodesProcess` starts nodes this way (a harness entry point, not the command
line); ``draguard nodes`` (:mod:`draguard.cli.nodes`) parses its options with click and calls the
same :func:`serve_nodes`. Exit codes as for ``draguard``: 0 stopped by SIGTERM/SIGINT, 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from draguard.harness.core.errors import UsageError
from ..kube import Kube
from draguard.harness.core.process import child_main, wait_for_signal
from .agent import FakeNodes, validate_node_name
from .node import NodeSpec
from .process import default_root, node_names

__all__ = ["parse_labels", "serve_nodes", "main"]


def parse_labels(values: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict; UsageError naming a malformed one."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--label {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def serve_nodes(
    kubeconfig: str | Path,
    nodes: Sequence[str] = (),
    count: int | None = None,
    prefix: str | None = None,
    root: str | Path | None = None,
    run_label: str | None = None,
    labels: Sequence[str] = (),
    heartbeat_interval: float = 10.0,
    call_timeout: float = 45.0,
    backoff_max: float = 10.0,
    workers: int = 8,
    ready_file: str | Path | None = None,
    verbose: bool = False,
) -> None:
    """Play the kubelet for nodes without machines until SIGTERM/SIGINT; every input checked first."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    names = [validate_node_name(n) for n in node_names(nodes, count, prefix)]
    extra = parse_labels(labels)
    for value, what in ((heartbeat_interval, "--heartbeat-interval"), (call_timeout, "--call-timeout")):
        if value <= 0:
            raise UsageError(f"{what} {value}: must be positive")
    if workers < 1:
        raise UsageError(f"--workers {workers}: must be at least 1")
    specs = [NodeSpec(n, labels=extra, run_id=run_label) for n in names]
    # One connection per thread that calls the API: the sync workers, the pool of heartbeats (as many
    # again, see FakeNodes), the pod watch and the event recorder.
    kube = Kube.from_kubeconfig(kubeconfig, pool_size=2 * max(4, workers) + 4)
    fake = FakeNodes(kube, specs, Path(root) if root else default_root(), workers=workers,
                     heartbeat_interval=heartbeat_interval, call_timeout=call_timeout, backoff_max=backoff_max)
    fake.start()
    try:
        if ready_file:
            Path(ready_file).write_text("ready\n")
        print(f"draguard nodes: serving {len(names)} node(s) under {fake.root}", file=sys.stderr, flush=True)
        wait_for_signal()
    finally:
        fake.stop()
        if ready_file:
            Path(ready_file).unlink(missing_ok=True)


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m draguard.harness.nodes.main")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", dest="nodes", action="append", default=[])
    parser.add_argument("--count", type=int)
    parser.add_argument("--prefix")
    parser.add_argument("--root")
    parser.add_argument("--run-label")
    parser.add_argument("--label", dest="labels", action="append", default=[])
    parser.add_argument("--heartbeat-interval", type=float, default=10.0)
    parser.add_argument("--call-timeout", type=float, default=45.0)
    parser.add_argument("--backoff-max", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--ready-file")
    parser.add_argument("-v", "--verbose", action="store_true")
    a = parser.parse_args(argv)
    serve_nodes(a.kubeconfig, a.nodes, a.count, a.prefix, a.root, a.run_label, a.labels, a.heartbeat_interval,
                a.call_timeout, a.backoff_max, a.workers, a.ready_file, a.verbose)
    return 0


def main(argv: list[str] | None = None) -> int:
    return child_main(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
