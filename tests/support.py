"""Helpers shared by the end-to-end tests (on the test path through ``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def wait(fn: Callable[[], T], what: str = "condition", timeout: float = 30.0) -> T:
    """Poll ``fn`` until it returns something truthy and return that; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


@dataclass
class UpstreamNodes:
    """The upstream DRA test driver serving fake nodes of the local control plane (:func:`upstream_on_fake_nodes`)."""

    nodes: list[str]
    device_class: str
    procs: dict[str, Any]
    """Node -> its ExternalPluginProcess."""
    agent: Any
    """The FakeNodesProcess serving every node."""
    root: Path
    """Where the nodes look for sockets and write CDI specs (``<root>/<node>/cdi``)."""
    interposer: Any = None
    """The gRPC interposer in front of the drivers (``interpose``), recording to ``<root>/calls.jsonl``."""


@contextlib.contextmanager
def upstream_on_fake_nodes(cluster: Any, prefix: str, binary: Path, interpose: bool = False,
                           count: int = 2) -> Iterator[UpstreamNodes]:
    """``count`` fake nodes ``<prefix>-<tag>-<i>``, a DeviceClass ``<prefix>-<tag>`` for the test driver, and the
    test driver (``binary``) serving each node with 4 devices, its slices published; with ``interpose`` the
    drivers serve under ``<root>-plugins`` and the gRPC interposer where the nodes look. Everything goes after:
    processes, DeviceClass, slices, Nodes, their Leases, folders."""
    from draguard.harness.driver.external import (
        TEST_DRIVER_NAME,
        ExternalPluginProcess,
        delete_published_slices,
        external_device_class,
    )
    from draguard.harness.nodes import FakeNodesProcess
    from draguard.harness.nodes.node import LEASE_NAMESPACE
    from draguard.harness.proxy import Interposer

    kube = cluster.kube()
    tag = uuid.uuid4().hex[:6]
    nodes = [f"{prefix}-{tag}-{i}" for i in range(count)]
    cls = f"{prefix}-{tag}"
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: unix socket paths are limited
    plugins = Path(f"{root}-plugins") if interpose else root
    interposer = Interposer(plugins, root, record=root / "calls.jsonl").start() if interpose else None
    agent = FakeNodesProcess(cluster.kubeconfig, nodes, root=root, run_label=cluster.run_id, log=root / "nodes.log",
                             extra_args=["--heartbeat-interval", "1", "--backoff-max", "1"])
    procs: dict[str, Any] = {}
    try:
        agent.start()
        kube.create(external_device_class(cls))
        for n in nodes:
            procs[n] = ExternalPluginProcess(cluster.kubeconfig, n, root=plugins, devices=4, binary=binary,
                                             node_root=root if interpose else None).start()

        def published() -> bool:
            items, _ = kube.list("ResourceSlice", field_selector=f"spec.driver={TEST_DRIVER_NAME}")
            return set(nodes) <= {s["spec"].get("nodeName") for s in items if s["spec"].get("devices")}

        wait(published, "the upstream driver's slices", 60)
        yield UpstreamNodes(nodes, cls, procs, agent, root, interposer)
    finally:
        for proc in procs.values():
            proc.stop()
        agent.stop()
        if interposer is not None:
            interposer.stop()
        kube.delete("DeviceClass", cls)
        for n in nodes:
            delete_published_slices(kube, n)
            kube.delete("Node", n)
            kube.delete("Lease", n, LEASE_NAMESPACE)
        shutil.rmtree(root, ignore_errors=True)
        if interpose:
            shutil.rmtree(plugins, ignore_errors=True)
