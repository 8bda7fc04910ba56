"""The allocation self-check: proves a cluster allocates DRA devices end to end.

It creates (all labelled with a run label, all removed afterwards) a Ready Node, a DeviceClass, a
ResourceSlice with four devices on that node, a ResourceClaimTemplate asking for two, and a pod
using it; then it waits until the real resourceclaim controller made the claim and the real
scheduler allocated and bound it, and reports what it saw. Talks to: the API server via ``Kube``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from draguard.harness.kube import RUN_LABEL, Kube

__all__ = ["AllocationCheck", "run_allocation_check", "RUN_LABEL"]

DRIVER = "selfcheck.draguard.dev"


@dataclass
class AllocationCheck:
    """What the check observed; ``ok`` only if every step held."""

    steps: list[tuple[str, bool, str]] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    node: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(ok for _, ok, _ in self.steps)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "node": self.node,
            "devices": self.devices,
            "seconds": round(self.seconds, 2),
            "steps": [{"step": s, "ok": ok, "detail": d} for s, ok, d in self.steps],
        }


def run_allocation_check(kube: Kube, timeout: float = 60.0) -> AllocationCheck:
    run = uuid.uuid4().hex[:8]
    labels = {RUN_LABEL: run}
    name = f"selfcheck-{run}"
    result = AllocationCheck(node=name)
    started = time.monotonic()

    def step(what: str, ok: bool, detail: str = "") -> bool:
        result.steps.append((what, ok, detail))
        return ok

    try:
        served = {r["name"] for r in kube.request("GET", "/apis/resource.k8s.io/v1").get("resources", [])}
        if not step("resource.k8s.io/v1 served", {"resourceclaims", "resourceslices", "deviceclasses"} <= served):
            return result
        kube.create_namespace(name, labels)
        kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}}})
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kube.patch(
            "Node",
            name,
            {"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "DraguardSelfCheck",
                                        "message": "fake node", "lastHeartbeatTime": now}]}},
            subresource="status",
        )
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name, "labels": labels},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name, "labels": labels},
                     "spec": {"driver": DRIVER, "nodeName": name,
                              "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(4)]}})
        step("DeviceClass and ResourceSlice with 4 devices created", True, name)
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": "two-gpus", "namespace": name, "labels": labels},
                     "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": name, "count": 2}}]}}}})
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": name, "labels": labels},
                     "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpus"}]}}],
                              "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]}})
        deadline = time.monotonic() + timeout
        pod: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            pod = kube.get("Pod", "worker", name)
            if pod and pod["spec"].get("nodeName"):
                break
            time.sleep(0.2)
        bound = bool(pod and pod["spec"].get("nodeName") == name)
        if not step("pod bound by kube-scheduler to the node with the slice", bound, (pod or {}).get("spec", {}).get("nodeName", "not bound")):
            return result
        assert pod is not None
        statuses = pod.get("status", {}).get("resourceClaimStatuses", [])
        claim_name = statuses[0]["resourceClaimName"] if statuses else ""
        claim = kube.get("ResourceClaim", claim_name, name) if claim_name else None
        owned = bool(claim and claim["metadata"].get("ownerReferences", [{}])[0].get("name") == "worker")
        if not step("ResourceClaim generated from the template by the resourceclaim controller", owned, claim_name):
            return result
        assert claim is not None
        results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
        result.devices = [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]
        step("claim allocated exactly 2 distinct devices", len({r["device"] for r in results}) == 2, ", ".join(result.devices))
        reserved = [c.get("uid") for c in claim.get("status", {}).get("reservedFor", [])]
        step("claim reserved for the pod", reserved == [pod["metadata"]["uid"]], str(reserved))
        return result
    finally:
        result.seconds = time.monotonic() - started
        kube.delete("Namespace", name)
        for kind in ("ResourceSlice", "DeviceClass", "Node"):
            kube.delete(kind, name)
