"""The ``kubelet`` fleet: hollow DRA kubelets (upstream's kubelet code, one process per node) in front of
draguard's fake driver, and :func:`start_kubelets`, which every fleet on a local control plane uses for
the nodes that ask for ``agent: kubelet``.

Talks to: :mod:`draguard.harness.kubelet` (the processes), the local control plane's CA (their
credentials).
"""

from __future__ import annotations

import time

from draguard.harness.core.errors import UsageError
from ..kube import RUN_LABEL
from .base import FLEETS, Fleet, FleetRun
from .fake import FakeFleet

__all__ = ["KubeletFleet", "start_kubelets"]


def start_kubelets(run: FleetRun, fleet: Fleet) -> None:
    """Start a hollow DRA kubelet for each node with ``agent: kubelet`` (local backend only), into
    ``fleet.kubelets``. A kubelet wipes its node's ResourceSlices when it starts: call before the drivers."""
    nodes = [n for n in run.scenario.nodes if n.agent == "kubelet"]
    if not nodes:
        return
    if run.cluster is None:
        raise UsageError("nodes with 'agent: kubelet' need the local backend: their credentials come from its CA")
    from ..cluster.pki import Pki
    from ..kubelet.process import HollowKubelet
    from draguard.harness.core.paths import NodeDirs

    t0 = time.monotonic()
    for node in nodes:
        kubelet = HollowKubelet(
            Pki(run.cluster.dir / "pki"), run.cluster.server, node.name, run.node_root, admin=run.kube,
            feature_gates=run.scenario.cluster.feature_gates, labels={RUN_LABEL: run.run_id, **node.labels},
            # The driver writes its CDI specs under the node's root even behind the interposer
            # (FakeDriverProcess node_root), not under the plugins root the interposer fronts.
            cdi_dir=NodeDirs(run.node_root, node.name).cdi,
        )
        fleet.kubelets[node.name] = kubelet
        kubelet.start()
        fleet.journal(run, kubelet)
    run.log(f"{len(nodes)} hollow DRA kubelet(s) ready in {time.monotonic() - t0:.1f}s")


@FLEETS.register("kubelet", summary="hollow DRA kubelets in front of draguard's fake driver")
class KubeletFleet(FakeFleet):
    """Every node a hollow kubelet; the driver as in the ``fake`` fleet (which serves mixed nodes too)."""

    name = "kubelet"
