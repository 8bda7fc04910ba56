"""The set-up phase of a run: its cluster (a local control plane with the scenario's feature gates, one
reached through a kubeconfig, or draguard's kind cluster), what the run ran on (``ScenarioResult.environment``), and where its
nodes' files live.

Talks to: :mod:`draguard.harness.cluster.local`, the cluster's API (version, feature gates).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import UsageError

from ..cluster.kind.cluster import KindCluster
from ..cluster.local import DEFAULT_CLIENT_BURST, DEFAULT_CLIENT_QPS, ClusterConfig, LocalCluster
from draguard.harness.core.environment import draguard_version
from draguard.harness.core.paths import run_dir
from ..kube import Kube
from ..scenario.types import Scenario

__all__ = ["start_cluster", "kubeconfig_of", "environment", "node_root"]


def start_cluster(scenario: Scenario, backend: str, run_id: str, *, kubeconfig: str | None, context: str | None,
                  bin_dir: str | None, seed: int, log: Callable[[str], None],
                  progress: Callable[[str], None]) -> tuple[Kube, LocalCluster | None, dict[str, Any]]:
    """The run's API client, the local control plane started for it (None on ``kubeconfig`` and ``kind``)
    and what the scenario runs on (:func:`environment`)."""
    spec = scenario.cluster
    if backend in ("kubeconfig", "kind"):
        path = kubeconfig or (str(spec.kubeconfig) if spec.kubeconfig else None)
        kube = Kube.from_kubeconfig(path, context or spec.context)
        env = environment(scenario, backend, kube, seed)
        log(f"connected to the cluster of {path or '$KUBECONFIG'}")
        return kube, None, env
    config = ClusterConfig(
        feature_gates=dict(spec.feature_gates),
        runtime_config={k: "true" if v else "false" for k, v in spec.runtime_config.items()},
        client_qps=spec.client_qps or DEFAULT_CLIENT_QPS,
        client_burst=spec.client_burst or DEFAULT_CLIENT_BURST,
        max_requests_inflight=spec.max_requests_inflight,
    )
    cluster = LocalCluster(f"run-{run_id}", config, bin_dir=bin_dir, progress=progress)
    t0 = time.monotonic()
    cluster.up()
    log(f"local control plane v1.37.2 up in {time.monotonic() - t0:.1f}s")
    kube = cluster.kube()
    return kube, cluster, environment(scenario, backend, kube, seed)


def kubeconfig_of(scenario: Scenario, backend: str, kubeconfig: str | None) -> str | None:
    """The kubeconfig a run on ``backend`` uses: ``kubeconfig`` when given; on ``kind`` that of draguard's
    kind cluster the scenario names (UsageError when it is not up); else the scenario's (None: the
    client's default, $KUBECONFIG). On ``kind`` a given ``kubeconfig`` must be one of draguard's kind
    clusters: there, steps disturb the nodes and the installed driver without ``--allow-context``."""
    if kubeconfig and backend == "kind" and KindCluster.of_kubeconfig(kubeconfig) is None:
        raise UsageError(f"backend kind: kubeconfig {kubeconfig} is not one of draguard's kind clusters (`draguard "
                         "cluster kubeconfig --backend kind` prints it); another cluster is backend kubeconfig, where "
                         "steps that disturb it need --allow-context")
    if kubeconfig:
        return kubeconfig
    if backend == "kind":
        name = scenario.cluster.kind_cluster
        kind = KindCluster(name, progress=lambda s: None)
        if KindCluster.of_kubeconfig(kind.kubeconfig) is None:
            raise UsageError(f"backend kind: draguard's kind cluster {name!r} is not up; "
                             f"`draguard cluster up --backend kind --name {name}` first")
        return str(kind.kubeconfig)
    return str(scenario.cluster.kubeconfig) if scenario.cluster.kubeconfig else None


def environment(scenario: Scenario, backend: str, kube: Kube, seed: int) -> dict[str, Any]:
    """What this scenario ran on (``ScenarioResult.environment``)."""
    sc = scenario
    version = kube.server_version()
    return {
        "backend": backend,
        "kubernetesVersion": version.get("gitVersion"),
        # What the server reports wins over what the scenario asked for (an existing cluster keeps its own).
        "featureGates": {**dict(sc.cluster.feature_gates),
                         **{g: on for g, on in kube.feature_gates().items() if _dra_gate(g) or g in sc.cluster.feature_gates}},
        "driver": {"name": sc.driver.name, "kind": sc.driver.kind, "mutant": sc.driver.mutant,
                   "deviceClass": sc.driver.device_class,
                   "version": draguard_version() if sc.driver.kind == "fake" else None,
                   "interposed": bool(sc.driver.interpose)},
        "nodeAgent": ("the cluster's kubelets" if sc.driver.kind != "fake" and backend != "local" else
                      {frozenset({"fake"}): "draguard fake nodes", frozenset({"kubelet"}): "hollow DRA kubelets"}.get(
                          frozenset(n.agent for n in sc.nodes), "draguard fake nodes and hollow DRA kubelets")),
        "nodeAgents": {n.name: n.agent for n in sc.nodes},
        "nodes": len(sc.nodes),
        "seed": seed,
    }


def node_root(scenario: Scenario, run_id: str) -> Path:
    """``<state>/runs/<id>/nodes``, unless its socket paths would pass the 107-byte unix limit."""
    root = run_dir(run_id) / "nodes"
    longest = max((len(n.name) for n in scenario.nodes), default=0)
    sockets = len(str(root)) + longest + len(scenario.driver.name) * 2 + len("//plugins_registry/-reg.sock")
    return root if sockets < 90 else Path(tempfile.gettempdir()) / f"draguard-{run_id}"


def _dra_gate(name: str) -> bool:
    """Feature gates worth recording with a DRA run (the full list has hundreds)."""
    return name.startswith("DRA") or "DynamicResource" in name or name in ("GenericWorkload", "GangScheduling")
