"""The ``fake`` fleet: draguard's fake node agents (one process for every node with ``agent: fake``) and
a hollow kubelet for each node with ``agent: kubelet``, in front of draguard's fake DRA driver: one
process per node, or one driver host serving every node (``driver.hosting``), behind the gRPC
interposer when ``driver.interpose`` is set. Each node's hardware is its device truth file, written
from the scenario's topology (:func:`topology_file`).

Talks to: :mod:`draguard.harness.nodes`, :mod:`draguard.harness.driver` (process, host),
:mod:`draguard.harness.proxy` (interposer), :mod:`draguard.harness.fleet.kubelet`.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from draguard.harness.core.errors import HarnessError

from ..driver.host import DriverHostProcess, HostedNode
from ..driver.process import FakeDriverProcess
from ..driver.topology import generic
from ..nodes.process import FakeNodesProcess
from ..scenario.types import PER_NODE_UP_TO, Topology
from .base import FLEETS, Fleet, FleetRun
from .hollow import start_kubelets

__all__ = ["FakeFleet", "topology_file"]


@FLEETS.register("fake", summary="draguard's fake node agents (and hollow kubelets where asked) with its fake driver")
class FakeFleet(Fleet):
    name = "fake"
    capabilities = frozenset({"restart-driver", "stop-driver", "kill-node", "device-truth", "driver-books", "interpose"})

    def start(self, run: FleetRun) -> None:
        sc = run.scenario
        kubeconfig = run.kubeconfig
        self.node_root = node_root = run.node_root
        node_root.mkdir(parents=True, exist_ok=True)
        driver_root = self.start_interposer(run) if sc.driver.interpose else node_root
        names = [n.name for n in sc.nodes if n.agent == "fake"]
        # A kubelet wipes its node's ResourceSlices when it starts: kubelets come up before the drivers.
        start_kubelets(run, self)
        labels: dict[str, str] = {}
        # Pod sync workers: each prepare waits on the API and the driver, so at scale the default 8 made
        # the fake nodes the ceiling (400 pods on 50 nodes: scheduled-to-Running lag grew to 15 s), and
        # 32 at 500 nodes (a kubelet syncs each pod on its own): Running/s 22.5 behind 26.2 scheduled/s,
        # bound-to-Running lag p50 28.7 s; with 125, 28.0 Running/s and 27.8 scheduled/s, lag p50 2.1 s.
        workers = 8 if len(names) <= PER_NODE_UP_TO else max(32, min(128, len(names) // 4))
        if names:
            self.nodes = FakeNodesProcess(kubeconfig, names, root=node_root, run_label=run.run_id, labels=labels,
                                          extra_args=["--workers", str(workers)])  # fmt: skip
            self.nodes.start()
            self.journal(run, self.nodes)
            run.log(f"{len(names)} fake node(s) registered")
        started = time.monotonic()
        node_topology: dict[str, Path] = {}
        for node in sc.nodes:
            node_topology[node.name] = node_root / f"{node.name}.topology.json"
            node_topology[node.name].write_text(json.dumps(topology_file(node.topology, node.name)))
        hosting = sc.driver.hosting
        if hosting == "auto":
            hosting = "per-node" if len(sc.nodes) <= PER_NODE_UP_TO or self.kubelets else "shared"
        if hosting == "shared":
            host = DriverHostProcess(kubeconfig, driver_root, [
                HostedNode(n.name, str(node_topology[n.name]), None, sc.driver.mutant) for n in sc.nodes
            ], driver=sc.driver.name)  # fmt: skip
            self.driver_host = host
            host.start()
            self.journal(run, host)
            self.drivers.update(host.handles())
        else:
            procs = [FakeDriverProcess(kubeconfig, node.name, root=driver_root, driver=sc.driver.name,
                                       topology=node_topology[node.name], mutant=sc.driver.mutant,
                                       node_root=node_root if driver_root != node_root else None)
                     for node in sc.nodes]  # fmt: skip
            # Started together (each takes a second or more to import its libraries), then awaited.
            with ThreadPoolExecutor(8) as pool:
                for proc, error in zip(procs, pool.map(_start, procs)):
                    self.journal(run, proc)
                    self.drivers[proc.node] = proc
                    if error is not None:
                        raise error
        for kubelet in self.kubelets.values():
            kubelet.wait_registered(sc.driver.name)
        self.wait_slices(run, {n.name for n in sc.nodes}, timeout=max(60, len(sc.nodes) / 5))
        run.log(f"fake driver {sc.driver.name}{' (mutant ' + sc.driver.mutant + ')' if sc.driver.mutant else ''} "
                f"published {len(self.inventory)} devices"
                + (", behind the gRPC interposer" if self.interposer else "")
                + f" ({hosting}, {time.monotonic() - started:.1f}s)")


def _start(proc: Any) -> HarnessError | None:
    try:
        proc.start()
        return None
    except HarnessError as exc:
        return exc


def topology_file(topology: Topology | None, node: str) -> dict[str, Any]:
    """The fake driver's NodeTopology document for a scenario node."""
    if topology is None:
        raise HarnessError(f"node {node}: the fake driver needs a topology")
    if topology.preset:
        return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "preset": topology.preset}
    if topology.gpus:
        product: dict[str, Any] = {}
        devices = []
        for spec in generic(topology.gpus):
            d = spec.model_dump(exclude_none=True)
            i = d["index"]
            per_domain = max(1, -(-topology.gpus // topology.nvlink_domains))
            per_numa = max(1, -(-topology.gpus // topology.numa_nodes))
            d["nvlinkDomain"] = f"{node}-nvl{i // per_domain}"
            d["numaNode"] = i // per_numa
            if topology.product_name:
                d["productName"] = topology.product_name
            if topology.memory:
                d["memory"] = topology.memory
            if topology.allow_multiple_allocations:
                d["allowMultipleAllocations"] = True
            devices.append({**d, **product})
        return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "devices": devices}
    devices = []
    for i, dev in enumerate(topology.devices):
        attrs = dict(dev.attributes)
        d = {
            "name": dev.name,
            "index": int(attrs.pop("index", i)),
            "productName": str(attrs.pop("productName", "Generic Accelerator")),
            "architecture": str(attrs.pop("architecture", "Generic")),
            "memory": dev.capacity.get("memory", "16Gi"),
            "numaNode": int(attrs.pop("numaNode", 0)),
            "pcieRoot": str(attrs.pop("pcieRoot", f"pci0000:{i:02x}")),
        }
        if "nvlinkDomain" in attrs:
            d["nvlinkDomain"] = str(attrs.pop("nvlinkDomain"))
        if attrs:
            d["attributes"] = attrs
        extra = {k: v for k, v in dev.capacity.items() if k != "memory"}
        if extra:
            d["capacity"] = extra
        if dev.allow_multiple_allocations:
            d["allowMultipleAllocations"] = True
        if dev.taints:
            d["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in dev.taints]
        devices.append(d)
    return {"apiVersion": "draguard.dev/v1alpha1", "kind": "NodeTopology", "devices": devices}
