"""Hand-made v1 objects for invariant tests, shaped as the API server returns them in lists
(no ``kind`` on items), following resource.k8s.io/v1 and core/v1."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.draguard.dev"
NS = "chaos"


def device(name: str, *, multi: bool = False, **attributes: Any) -> dict[str, Any]:
    """A v1 ResourceSlice device; keyword attributes become typed attribute values."""
    typed: dict[str, Any] = {}
    for key, value in attributes.items():
        qualified = key.replace("__", "/")
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        typed[qualified] = {kind: value}
    out: dict[str, Any] = {"name": name, "attributes": typed, "capacity": {"memory": {"value": "80Gi"}}}
    if multi:
        out["allowMultipleAllocations"] = True
    return out


def resource_slice(node: str, devices: list[dict[str, Any]], *, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-x7k2p", "uid": f"slice-{node}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def gpus(node: str, n: int = 4, *, domains: int = 2, multi: bool = False) -> dict[str, Any]:
    """A node's slice of ``n`` GPUs split into NVLink domains."""
    return resource_slice(
        node,
        [device(f"gpu-{i}", multi=multi, type="gpu", nvlinkDomain=i * domains // n, uuid=f"GPU-{node}-{i}")
         for i in range(n)],
    )  # fmt: skip


def device_class(name: str = DRIVER, selectors: tuple[str, ...] = (), extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"metadata": {"name": name, "uid": f"class-{name}"}, "spec": spec}


def request(name: str = "gpu", count: int = 1, *, mode: str = "ExactCount", selectors: tuple[str, ...] = (),
            admin: bool = False, cls: str = DRIVER) -> dict[str, Any]:  # fmt: skip
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def result(device_name: str, node: str = "node-a", req: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"request": req, "driver": DRIVER, "pool": node, "device": device_name, **extra}


def claim(
    name: str,
    requests: list[dict[str, Any]],
    results: list[dict[str, Any]] | None = None,
    *,
    reserved: list[dict[str, Any]] | None = None,
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    node: str = "node-a",
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests, "constraints": constraints or [], "config": config or []}},
        "status": {},
    }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
                                               "uid": owner["metadata"]["uid"], "controller": True}]  # fmt: skip
        obj["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpus"}
    if results is not None:
        obj["status"]["allocation"] = {
            "devices": {"results": results, "config": []},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            "allocationTimestamp": "2026-12-01T10:00:00Z",
        }  # fmt: skip
    if reserved:
        obj["status"]["reservedFor"] = [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                                        for p in reserved]  # fmt: skip
    return obj


def pod(
    name: str,
    *,
    node: str | None = "node-a",
    claims: dict[str, str] | None = None,
    template_claims: dict[str, str] | None = None,
    phase: str = "Running",
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod; ``claims`` maps pod claim name -> shared claim name, ``template_claims`` pod claim name ->
    generated claim name (recorded in status.resourceClaimStatuses)."""
    resource_claims = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    resource_claims += [{"name": k, "resourceClaimTemplateName": f"{name}-tmpl"} for k in (template_claims or {})]
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"claims": [{"name": c["name"]} for c in resource_claims]}}  # fmt: skip
    if limits:
        container["resources"]["limits"] = limits
    spec: dict[str, Any] = {"containers": [container], "resourceClaims": resource_claims}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if template_claims:
        status["resourceClaimStatuses"] = [{"name": k, "resourceClaimName": v} for k, v in template_claims.items()]
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": spec, "status": status}
