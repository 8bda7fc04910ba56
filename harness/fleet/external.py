"""The fleets of a driver written by others.

``external``: on a control plane of its own, draguard runs the one such driver it can, the upstream DRA
test driver (k8s.io/kubernetes/test/e2e/dra/test-driver), one process per node with as many devices as
the scenario's node, on fake node agents or hollow kubelets, and its DeviceClass.

A driver already installed in a cluster is the ``installed`` fleet (:mod:`.installed`).

Talks to: :mod:`draguard.harness.driver.external`, :mod:`draguard.harness.nodes`, the fleet's kubelets
(:mod:`draguard.harness.fleet.kubelet`), the cluster (DeviceClass, ResourceSlices).
"""

from __future__ import annotations

import time

from draguard.harness.core.errors import UsageError

from ..driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, external_device_class, find_test_driver
from ..kube import RUN_LABEL
from ..nodes.process import FakeNodesProcess
from .base import FLEETS, Fleet, FleetRun
from .coverage import scenario_devices
from .hollow import start_kubelets

__all__ = ["ExternalFleet"]


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
