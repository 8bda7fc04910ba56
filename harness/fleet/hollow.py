"""Hollow DRA kubelets for the nodes of a run that ask for ``agent: kubelet``: :func:`start_kubelets`,
which every fleet on a local control plane uses (the ``kubelet`` fleet for all its nodes, the ``fake``
and ``external`` fleets for mixed ones).

Talks to: :mod:`draguard.harness.kubelet` (the processes), the local control plane's CA (their
credentials).
"""

from __future__ import annotations

import time

from draguard.harness.cluster.pki import Pki
from draguard.harness.core.errors import UsageError
from draguard.harness.core.paths import NodeDirs
from draguard.harness.kube import RUN_LABEL
from draguard.harness.kubelet.process import HollowKubelet

from .base import Fleet, FleetRun

__all__ = ["start_kubelets"]


def start_kubelets(run: FleetRun, fleet: Fleet) -> None:
    """Start a hollow DRA kubelet for each node with ``agent: kubelet`` (local backend only), into
    ``fleet.kubelets``. A kubelet wipes its node's ResourceSlices when it starts: call before the drivers."""
    nodes = [n for n in run.scenario.nodes if n.agent == "kubelet"]
    if not nodes:
        return
    if run.cluster is None:
        raise UsageError("nodes with 'agent: kubelet' need the local backend: their credentials come from its CA")
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
