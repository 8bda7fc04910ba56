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


def test_api_calls_reuse_kept_connections_and_drop_one_the_server_closed(draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    import socket

    kube = draguard_cluster.kube()
    connections = kube._connections
    assert connections is not None  # the local backend's kubeconfig needs nothing only urllib3 does
    kube.server_version()
    kept = list(connections._idle)
    assert len(kept) == 1
    kube.server_version()
    assert connections._idle == kept  # the same connection served the second call
    # A connection the other end closed while idle is readable at once: dropped, the call made on a new one.
    kept[0].shutdown(socket.SHUT_RDWR)
    assert kube.server_version()["gitVersion"] == "v1.37.2"
    assert len(connections._idle) == 1 and connections._idle[0] is not kept[0]
    # Errors still come back as the API server's: a missing object is a 404.
    assert kube.get("Node", "no-such-node-anywhere") is None


def test_a_kubeconfig_with_a_proxy_or_tls_overrides_keeps_the_urllib3_pool() -> None:
    from kubernetes.client import Configuration

    from draguard.harness.kube import _Connections

    plain = Configuration(host="https://127.0.0.1:6443")
    assert _Connections.usable(plain)
    for change in ({"proxy": "http://proxy:3128"}, {"tls_server_name": "api.internal"}, {"assert_hostname": False}):
        cfg = Configuration(host="https://127.0.0.1:6443")
        for k, v in change.items():
            setattr(cfg, k, v)
        assert not _Connections.usable(cfg), change
        assert Kube(cfg)._connections is None
    # Certificates it cannot read: no error building the client (urllib3 reports them on the first call, as before).
    broken = Configuration(host="https://127.0.0.1:6443")
    broken.cert_file, broken.key_file = "/nonexistent/client.crt", "/nonexistent/client.key"
    assert _Connections.usable(broken) and Kube(broken)._connections is None


def test_a_kept_connection_is_reused_when_its_descriptor_is_past_1024(draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    """The fake driver host at 500 nodes holds over 1024 descriptors (select() refuses those)."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} open files, too few to reach descriptor 1024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        kube = draguard_cluster.kube()
        kube.server_version()
        (conn,) = kube._connections._idle
        assert conn.fileno() >= 1024
        assert kube.server_version()["gitVersion"] == "v1.37.2"
        assert kube._connections._idle == [conn]
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
