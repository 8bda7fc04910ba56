"""The fleets of a driver written by others.

``external``: on a control plane of its own, draguard runs the one such driver it can, the upstream DRA
test driver (k8s.io/kubernetes/test/e2e/dra/test-driver), one process per node with as many devices as
the scenario's node, on fake node agents or hollow kubelets, and its DeviceClass.

``installed``: the nodes and the driver are already in the cluster (``--kubeconfig``); draguard starts
nothing and waits for the driver's slices. A kind cluster or a driver installed as a DaemonSet is this
fleet, or another registered beside it.

Talks to: :mod:`draguard.harness.driver.external`, :mod:`draguard.harness.nodes`, the fleet's kubelets
(:mod:`draguard.harness.fleet.kubelet`), the cluster (DeviceClass, ResourceSlices).
"""

from __future__ import annotations

import time

from draguard.harness.core.errors import UsageError

from ..driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, external_device_class, find_test_driver
from ..invariants import DeviceId
from ..kube import RUN_LABEL
from ..nodes.process import FakeNodesProcess
from .base import FLEETS, Fleet, FleetRun
from .coverage import free_devices, pinned_nodes, scenario_devices
from .hollow import start_kubelets

__all__ = ["ExternalFleet", "InstalledFleet"]


@FLEETS.register("external", summary="the upstream DRA test driver as a process per node, on fake nodes or hollow kubelets")
class ExternalFleet(Fleet):
    name = "external"
    capabilities = frozenset({"kill-node"})

    def start(self, run: FleetRun) -> None:
        sc = run.scenario
        assert run.cluster is not None
        if sc.driver.name != TEST_DRIVER_NAME:
            raise UsageError(f"driver {sc.driver.name}: on a control plane of its own draguard runs only the upstream "
                             f"DRA test driver ({TEST_DRIVER_NAME}); for an installed driver give --kubeconfig")
        started = time.monotonic()
        binary = find_test_driver(run.bin_dir)
        self.node_root = run.node_root
        run.node_root.mkdir(parents=True, exist_ok=True)
        start_kubelets(run, self)  # a kubelet wipes its node's slices when it starts: before the drivers
        names = [n.name for n in sc.nodes if n.agent != "kubelet"]
        if names:
            self.nodes = FakeNodesProcess(run.cluster.kubeconfig, names, root=run.node_root, run_label=run.run_id)
            self.nodes.start()
            self.journal(run, self.nodes)
        if sc.driver.device_class:
            cls = external_device_class(sc.driver.device_class, sc.driver.name)
            cls["metadata"]["labels"] = {RUN_LABEL: run.run_id}
            run.create(cls)
        devices = scenario_devices(sc)
        for node in sc.nodes:  # the test driver's slice is owned by its Node: the node registers first
            proc = ExternalPluginProcess(run.cluster.kubeconfig, node.name, root=run.node_root, driver=sc.driver.name,
                                         devices=devices[node.name], binary=binary)
            self.external_drivers[node.name] = proc
            proc.start()
            self.journal(run, proc)
        for kubelet in self.kubelets.values():
            kubelet.wait_registered(sc.driver.name)
        self.wait_slices(run, {n.name for n in sc.nodes}, timeout=60)
        run.log(f"upstream DRA test driver {sc.driver.name} published {len(self.inventory)} devices on "
                f"{len(sc.nodes)} node(s) ({time.monotonic() - started:.1f}s)")


@FLEETS.register("installed", summary="nodes and a driver already in the cluster; draguard starts none")
class InstalledFleet(Fleet):
    name = "installed"

    def start(self, run: FleetRun) -> None:
        sc = run.scenario
        run.log(f"external driver {sc.driver.name}: using the cluster's nodes and slices")
        self.wait_slices(run, set(), timeout=30)
        pinned = pinned_nodes(sc)
        if pinned:  # the inventory no-leak compares with: this run's nodes, what no one held at the start
            self.inventory = frozenset(DeviceId(*d) for d in free_devices(run.kube, sc.driver.name, pinned))
            run.log(f"pods pinned to {', '.join(pinned)}: {len(self.inventory)} free device(s) there")
