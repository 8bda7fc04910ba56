"""Proof that the local backend is a real control plane: DRA v1 objects are served, and the real
resourceclaim controller and scheduler allocate devices from a ResourceSlice to a pod's claim."""

from __future__ import annotations

import time

import pytest

from draguard.harness.kube import Kube
from support import wait

pytestmark = pytest.mark.cluster

DRIVER = "gpu.test.draguard.dev"


def _ready_node(kube: Kube, name: str) -> None:
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    kube.patch(
        "Node",
        name,
        {
            "status": {
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Test", "message": "test node",
                                "lastHeartbeatTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}],
            }
        },
        subresource="status",
    )


def test_resource_k8s_io_v1_is_served(draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    kube = draguard_cluster.kube()
    served = {r["name"] for r in kube.request("GET", "/apis/resource.k8s.io/v1")["resources"]}
    assert {"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"} <= served
    assert kube.server_version()["gitVersion"] == "v1.37.2"


def test_pod_with_claim_template_is_allocated_devices_by_the_real_scheduler(draguard_cluster, draguard_namespace) -> None:  # type: ignore[no-untyped-def]
    kube = draguard_cluster.kube()
    ns = draguard_namespace
    node = f"node-{ns}"[:60]
    cls = f"class-{ns}"[:60]
    _ready_node(kube, node)
    try:
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
        kube.create({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(4)]},
        })
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": "two-gpus", "namespace": ns},
                     "spec": {"spec": {"devices": {"requests": [
                         {"name": "gpu", "exactly": {"deviceClassName": cls, "count": 2}}]}}}})
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": ns},
                     "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                              "resources": {"claims": [{"name": "gpus"}]}}],
                              "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]}})

        pod = wait(lambda: (p := kube.get("Pod", "worker", ns)) and p["spec"].get("nodeName") and p, what="pod bound")
        assert pod["spec"]["nodeName"] == node
        statuses = pod["status"]["resourceClaimStatuses"]
        assert statuses[0]["name"] == "gpus"
        claim = kube.get("ResourceClaim", statuses[0]["resourceClaimName"], ns)
        assert claim is not None
        assert claim["metadata"]["ownerReferences"][0]["name"] == "worker"  # made by the resourceclaim controller
        results = claim["status"]["allocation"]["devices"]["results"]
        assert len(results) == 2
        assert {r["driver"] for r in results} == {DRIVER}
        assert {r["pool"] for r in results} == {node}
        assert len({r["device"] for r in results}) == 2
        assert {r["device"] for r in results} <= {f"gpu-{i}" for i in range(4)}
        assert [c["uid"] for c in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    finally:
        kube.delete("Pod", "worker", ns, grace_seconds=0)
        kube.delete("ResourceSlice", f"{node}-slice")
        kube.delete("DeviceClass", cls)
        kube.delete("Node", node)
