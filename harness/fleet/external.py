"""The fleets of a driver written by others.

``external``: on a control plane of its own, draguard runs the one such driver it can, the upstream DRA
test driver (k8s.io/kubernetes/test/e2e/dra/test-driver), one process per node with as many devices as
the scenario's node, on fake node agents or hollow kubelets, and its DeviceClass. Its processes are
draguard's children, so steps restart and stop them (``driver-restart``, ``driver-down``), and the gRPC
interposer sits in front of their sockets unless the scenario says ``driver.interpose: false``: every call
and answer is recorded, and the invariants that judge any driver from its calls judge this one.

A driver already installed in a cluster is the ``installed`` fleet (:mod:`.installed`).

Talks to: :mod:`draguard.harness.driver.external`, :mod:`draguard.harness.nodes`, the fleet's kubelets
(:mod:`draguard.harness.fleet.kubelet`), the cluster (DeviceClass, ResourceSlices).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from draguard.harness.core.errors import UsageError

from ..driver.external import TEST_DRIVER_NAME, ExternalPluginProcess, external_device_class, find_test_driver
from ..kube import RUN_LABEL
from ..nodes.process import FakeNodesProcess
from .base import FLEETS, DriverControl, Fleet, FleetRun, Undoable
from .coverage import scenario_devices
from .hollow import start_kubelets

__all__ = ["ExternalFleet"]


@FLEETS.register("external", summary="the upstream DRA test driver as a process per node, on fake nodes or hollow kubelets")
class ExternalFleet(Fleet):
    name = "external"
    capabilities = frozenset({"kill-node", "restart-driver", "stop-driver", "interpose"})
    _journal_pid: Callable[[int, str], None] | None = None

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
        driver_root = self.start_interposer(run) if sc.driver.interpose else run.node_root
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
            proc = ExternalPluginProcess(run.cluster.kubeconfig, node.name, root=driver_root, driver=sc.driver.name,
                                         devices=devices[node.name], binary=binary,
                                         node_root=run.node_root if driver_root != run.node_root else None)
            self.external_drivers[node.name] = proc
            proc.start()
            self.journal(run, proc)
        for kubelet in self.kubelets.values():
            kubelet.wait_registered(sc.driver.name)
        self.wait_slices(run, {n.name for n in sc.nodes}, timeout=60)
        self._journal_pid = run.journal_process
        run.log(f"upstream DRA test driver {sc.driver.name} published {len(self.inventory)} devices on "
                f"{len(sc.nodes)} node(s)" + (", behind the gRPC interposer" if self.interposer else "")
                + f" ({time.monotonic() - started:.1f}s)")

    def driver_control(self, node: str, before: Undoable) -> DriverControl | None:
        proc = self.external_drivers.get(node)
        if proc is None:
            raise UsageError(f"node {node} runs no driver of this run")
        assert self._journal_pid is not None
        return _ProcessControl(proc, before, self._journal_pid)


class _ProcessControl:
    """The test driver's process on one node, as a step restarts it or takes it down: a crash is a
    SIGKILL, down is stopped until :meth:`up`. The run stops the process at teardown whatever the step
    did, so nothing is left to undo after a crash but the process itself (journaled by pid)."""

    def __init__(self, proc: ExternalPluginProcess, before: Undoable, journal: Callable[[int, str], None]) -> None:
        self._proc = proc
        self._before = before
        self._journal = journal
        self.node = proc.node

    def restart(self, kill: bool = True) -> None:
        self._before("none", {"why": f"the driver on {self.node} is started again by the step"})
        self._proc.restart(kill=kill)
        self._journaled("restarted")

    def down(self) -> None:
        self._before("none", {"why": f"the driver on {self.node} is started again by the run"})
        self._proc.kill()

    def up(self) -> None:
        if not self._proc.alive:
            self._proc.start()
            self._journaled("started again")

    def _journaled(self, what: str) -> None:
        if self._proc.pid:
            self._journal(self._proc.pid, f"{self._proc.title} ({what})")
