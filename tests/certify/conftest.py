"""A fleet for the cluster suite's tests: fake nodes (the node agent runs the pods) and the fake driver
on each, on the real local control plane, with a DeviceClass for the driver."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.cluster import FakeDriverAccess
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.driver.slices import LABEL_NODE
from draguard.harness.kube import Kube
from draguard.harness.nodes import FakeNodesProcess
from draguard.harness.nodes.node import LEASE_NAMESPACE
from draguard.harness.core.paths import DEFAULT_DRIVER
from support import wait


@dataclass
class Fleet:
    kubeconfig: Path
    kube: Kube
    root: Path
    nodes: list[str]
    device_class: str
    driver: str = DEFAULT_DRIVER
    processes: dict[str, FakeDriverProcess] = field(default_factory=dict)

    def access(self) -> FakeDriverAccess:
        return FakeDriverAccess(self.root, self.driver, self.processes)


@contextmanager
def fleet(cluster: Any, mutant: str | None = None, nodes: int = 2, devices: int = 4) -> Iterator[Fleet]:
    kube: Kube = cluster.kube()
    tag = uuid.uuid4().hex[:6]
    names = [f"dgc-{tag}-{i}" for i in range(nodes)]
    root = Path(tempfile.mkdtemp(prefix="dgc", dir="/tmp"))  # short: unix socket paths are limited
    cls = f"dgc-{tag}"
    agent = FakeNodesProcess(cluster.kubeconfig, names, root=root, run_label=cluster.run_id, log=root / "nodes.log",
                             extra_args=["--heartbeat-interval", "1", "--backoff-max", "1", "--call-timeout", "3"])
    f = Fleet(Path(cluster.kubeconfig), kube, root, names, cls)
    try:
        agent.start()
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DEFAULT_DRIVER}'"}}]}})
        for n in names:
            f.processes[n] = FakeDriverProcess(cluster.kubeconfig, n, root=root, devices=devices, mutant=mutant,
                                               reset_ms=1).start()

        def published() -> bool:
            items, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={DEFAULT_DRIVER}")
            return set(names) <= {s["spec"].get("nodeName") for s in items if s["spec"].get("devices")}

        wait(published, "the fake drivers' slices", 60)
        yield f
    finally:
        for proc in f.processes.values():
            proc.stop()
        agent.stop()
        kube.delete("DeviceClass", cls)
        for n in names:
            kube.delete("Node", n)
            kube.delete("Lease", n, LEASE_NAMESPACE)
            kube.delete_collection("ResourceSlice", f"{LABEL_NODE}={n}")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def make_fleet(draguard_cluster: Any) -> Callable[..., Any]:
    return lambda mutant=None, **kw: fleet(draguard_cluster, mutant, **kw)
