"""``sanity.slices.counters`` (partitionable devices, KEP-4815) against the real local control plane: the
fake driver with MIG partitions passes it; a published device that consumes a counter set its pool
does not publish, or more than a set holds, fails it naming the device; a driver that declares
partitionable devices but publishes none fails it; one that does not declare them gets not-applicable."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from draguard.conformance.sanity import SanityConfig, run_sanity
from draguard.conformance.sanity.capabilities import Capabilities
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.driver.process import FakeDriverProcess
from draguard.harness.driver.slices import LABEL_NODE
from draguard.harness.kube import Kube

from .conftest import cluster_node

pytestmark = pytest.mark.cluster
CHECK = "sanity.slices.counters"


@pytest.fixture
def node(draguard_cluster: Any) -> Iterator[str]:
    with cluster_node(draguard_cluster, "dg-cnt") as name:
        yield name


def _check(kubeconfig: Path, driver: str, node: str, registration: Path, caps: Capabilities | None = None) -> Any:
    result = run_sanity(SanityConfig(registration_socket=registration, kubeconfig=kubeconfig, driver=driver,
                                     node=node, select=(CHECK,), capabilities=caps))
    (check,) = result.checks
    return check


def test_the_fake_driver_with_mig_partitions_passes(draguard_cluster: Any, node: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="dgk", dir="/tmp"))
    topology = root / "a100-mig.yaml"
    topology.write_text("apiVersion: draguard.dev/v1alpha1\nkind: NodeTopology\npreset: a100-mig\n")
    proc = FakeDriverProcess(draguard_cluster.kubeconfig, node, root=root, topology=topology)
    try:
        proc.start()
        reg = NodeDirs(root, node).registration_socket(DEFAULT_DRIVER)
        check = _check(draguard_cluster.kubeconfig, DEFAULT_DRIVER, node, reg,
                       Capabilities(frozenset({"partitionable-devices"}), "caps.yaml"))
        assert (check.status, check.reason) == ("passed", "")
        not_declared = _check(draguard_cluster.kubeconfig, DEFAULT_DRIVER, node, reg, Capabilities(frozenset(), "c.yaml"))
        assert not_declared.status == "not-applicable" and "partitionable devices" in not_declared.reason
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


def _slice(name: str, driver: str, node: str, spec: dict[str, Any], count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "labels": {LABEL_NODE: node}},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": count}, **spec}}


@pytest.mark.parametrize(("consumes", "problem"), [
    ({"counterSet": "gpu-9", "counters": {"memory": {"value": "10Gi"}}}, "counter set gpu-9 is not published"),
    ({"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}, "consumes 80Gi of gpu-0/memory, which holds 40Gi"),
])
def test_a_device_consuming_counters_its_pool_lacks_fails_naming_it(
    draguard_cluster: Any, node: str, tmp_path: Path, consumes: dict[str, Any], problem: str
) -> None:
    kube: Kube = draguard_cluster.kube()
    driver = f"cnt-{uuid.uuid4().hex[:6]}.example.com"
    kube.create(_slice(f"{driver}-counters", driver, node,
                       {"sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}, 2))
    kube.create(_slice(f"{driver}-devices", driver, node, {"devices": [{"name": "part-0", "consumesCounters": [consumes]}]}, 2))
    check = _check(draguard_cluster.kubeconfig, driver, node, tmp_path / "no-reg.sock")
    assert check.status == "failed" and problem in check.reason and "part-0" in check.reason


def test_declaring_partitionable_devices_and_publishing_none_fails(
    draguard_cluster: Any, node: str, tmp_path: Path
) -> None:
    kube: Kube = draguard_cluster.kube()
    driver = f"cnt-{uuid.uuid4().hex[:6]}.example.com"
    kube.create(_slice(f"{driver}-devices", driver, node, {"devices": [{"name": "gpu-0"}]}, 1))
    undeclared = _check(draguard_cluster.kubeconfig, driver, node, tmp_path / "no-reg.sock")
    assert undeclared.status == "skipped" and "consumes counters" in undeclared.reason
    declared = _check(draguard_cluster.kubeconfig, driver, node, tmp_path / "no-reg.sock",
                      Capabilities(frozenset({"partitionable-devices"}), "caps.yaml"))
    assert declared.status == "failed" and "declares partitionable devices" in declared.reason
