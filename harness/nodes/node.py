"""Node objects and node leases of fake nodes, as the kubelet writes them.

Builds the Node (labels, capacity, a Ready status with ``nodeInfo.kubeletVersion``), registers it
(create, or patch an existing one), refreshes its status, and renews its Lease in ``kube-node-lease``.
Talks to the API server through :class:`~draguard.harness.kube.Kube`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from draguard.harness.kube import RUN_LABEL, ApiError, Kube, Obj

__all__ = [
    "NodeSpec",
    "KUBELET_VERSION",
    "LEASE_NAMESPACE",
    "LEASE_DURATION_SECONDS",
    "FAKE_NODE_LABEL",
    "RUN_LABEL",
    "node_object",
    "node_status",
    "register_node",
    "patch_status",
    "renew_lease",
    "now_rfc3339",
    "now_micro",
]

KUBELET_VERSION = "v1.37.2"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
FAKE_NODE_LABEL = "draguard.dev/fake-node"
DEFAULT_CAPACITY = {"cpu": "64", "memory": "256Gi", "pods": "256", "ephemeral-storage": "1Ti"}


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """A ``metav1.MicroTime`` for Lease renewals."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class NodeSpec:
    """What a fake node looks like to the cluster."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPACITY))
    run_id: str | None = None

    @property
    def address(self) -> str:
        """A stable fake InternalIP in 10.0.0.0/8 derived from the name."""
        h = hashlib.sha256(self.name.encode()).digest()
        return f"10.{h[0]}.{h[1]}.{max(h[2], 1)}"

    def all_labels(self) -> dict[str, str]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            FAKE_NODE_LABEL: "true",
        }
        if self.run_id:
            labels[RUN_LABEL] = self.run_id
        labels.update(self.labels)
        return labels


def node_status(spec: NodeSpec, ready: bool = True) -> Obj:
    now = now_rfc3339()

    def cond(type_: str, status: str, reason: str, message: str) -> Obj:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "capacity": dict(spec.capacity),
        "allocatable": dict(spec.capacity),
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond(
                "Ready",
                "True" if ready else "False",
                "KubeletReady" if ready else "KubeletNotReady",
                "draguard fake node is posting ready status" if ready else "draguard fake node is not ready",
            ),
        ],
        "addresses": [{"type": "InternalIP", "address": spec.address}, {"type": "Hostname", "address": spec.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": "draguard",
            "osImage": "draguard fake node",
            "containerRuntimeVersion": "draguard://0.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_object(spec: NodeSpec) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": spec.all_labels()},
        "spec": {},
        "status": node_status(spec),
    }


def register_node(kube: Kube, spec: NodeSpec) -> Obj:
    """Create the Node, or bring an existing one's labels up to date; then post a Ready status."""
    try:
        node = kube.create(node_object(spec))
    except ApiError as exc:
        if exc.status != 409:
            raise
        node = kube.patch("Node", spec.name, {"metadata": {"labels": spec.all_labels()}})
    patch_status(kube, spec)
    return node


def patch_status(kube: Kube, spec: NodeSpec, ready: bool = True) -> Obj:
    """Post the node's status (strategic merge: conditions merge by type)."""
    return kube.patch("Node", spec.name, {"status": node_status(spec, ready)}, patch_type="strategic", subresource="status")


def lease_object(spec: NodeSpec, node_uid: str | None) -> Obj:
    md: dict[str, Any] = {"name": spec.name, "namespace": LEASE_NAMESPACE}
    if node_uid:
        md["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": spec.name, "uid": node_uid}]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": md,
        "spec": {"holderIdentity": spec.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now_micro()},
    }


def renew_lease(kube: Kube, spec: NodeSpec, node_uid: str | None = None) -> None:
    """Move the node's lease renewTime to now, creating the lease if it is missing."""
    try:
        kube.patch("Lease", spec.name, {"spec": {"renewTime": now_micro()}}, namespace=LEASE_NAMESPACE)
    except ApiError as exc:
        if not exc.not_found:
            raise
        try:
            kube.create(lease_object(spec, node_uid))
        except ApiError as exc2:
            if exc2.status != 409:
                raise
