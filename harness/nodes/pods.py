"""The API side of a fake node's pod sync: a pod's claims, its Running status, and kubelet events.

:func:`resolve_claims` does what the kubelet checks before preparing (the claim exists, belongs to
the pod when template-generated, lists the pod in ``status.reservedFor``, is allocated) and yields
the drivers of each claim; :func:`running_status` is the status patch of a started pod;
:class:`EventRecorder` writes ``v1`` Events the way the kubelet does, counting repeats.
Talks to the API server through :class:`~draguard.harness.kube.Kube`.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from draguard.harness.grpcapi.plugin import ClaimRef
from draguard.harness.kube import ApiError, Kube, Obj

from .manager import PodClaim, PrepareError
from .node import NodeSpec, now_rfc3339

__all__ = [
    "resolve_claims",
    "running_status",
    "terminal",
    "EventRecorder",
    "FAILED_PREPARE",
    "FAILED_UNPREPARE",
]

FAILED_PREPARE = "FailedPrepareDynamicResources"
FAILED_UNPREPARE = "FailedUnprepareDynamicResources"


def terminal(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def resolve_claims(kube: Kube, pod: Obj) -> list[PodClaim]:
    """The pod's claims with their drivers; PrepareError says what is not ready yet or wrong."""
    md, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    ns, pod_name, pod_uid = md["namespace"], md["name"], md["uid"]
    generated = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    wanted: list[tuple[str, bool]] = []
    for pc in spec.get("resourceClaims") or []:
        if pc.get("resourceClaimName"):
            wanted.append((pc["resourceClaimName"], False))
        elif pc.get("resourceClaimTemplateName"):
            if pc["name"] not in generated:
                raise PrepareError(f"pod claim {pc['name']!r}: its ResourceClaim was not created yet")
            if generated[pc["name"]]:  # None: the template needed no claim
                wanted.append((generated[pc["name"]], True))
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        wanted.append((extended, False))
    out: list[PodClaim] = []
    for name, from_template in wanted:
        claim = kube.get("ResourceClaim", name, ns)
        if claim is None:
            raise PrepareError(f"ResourceClaim {ns}/{name} not found")
        cmd, cstatus = claim["metadata"], claim.get("status", {})
        if from_template and not any(
            o.get("uid") == pod_uid and o.get("controller") for o in cmd.get("ownerReferences") or []
        ):
            raise PrepareError(f"ResourceClaim {ns}/{name} was not created for pod {ns}/{pod_name}")
        reserved = cstatus.get("reservedFor") or []
        # A PodGroup entry reserves the claim for its pods (DRAWorkloadResourceClaims, KEP-5729).
        if not any(r.get("uid") == pod_uid or r.get("resource") == "podgroups" for r in reserved):
            raise PrepareError(f"pod {ns}/{pod_name} is not in the reservedFor of ResourceClaim {ns}/{name}")
        allocation = cstatus.get("allocation")
        if not allocation:
            raise PrepareError(f"ResourceClaim {ns}/{name} is not allocated")
        drivers = sorted({r["driver"] for r in allocation.get("devices", {}).get("results") or []})
        if drivers:
            out.append(PodClaim(ClaimRef(namespace=ns, name=name, uid=cmd["uid"]), tuple(drivers)))
    return out


def _container_id(pod_uid: str, name: str) -> str:
    return "draguard://" + hashlib.sha256(f"{pod_uid}/{name}".encode()).hexdigest()[:32]


def running_status(pod: Obj, node: NodeSpec) -> Obj:
    """A status patch that makes the pod Running and Ready, every container started."""
    now = now_rfc3339()
    spec, uid = pod.get("spec", {}), pod["metadata"]["uid"]
    h = hashlib.sha256(uid.encode()).digest()
    pod_ip = f"172.{16 + h[0] % 16}.{h[1]}.{max(h[2], 1)}"

    def container(c: Obj, init: bool) -> Obj:
        state: dict[str, Any]
        if init:
            state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
        else:
            state = {"running": {"startedAt": now}}
        return {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": _container_id(uid, c["name"]),
            "ready": not init,
            "started": not init,
            "restartCount": 0,
            "state": state,
        }

    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now, "lastProbeTime": None}
        for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
    ]
    status: Obj = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": node.address,
        "hostIPs": [{"ip": node.address}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": pod.get("status", {}).get("startTime") or now,
        "containerStatuses": [container(c, False) for c in spec.get("containers") or []],
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [container(c, True) for c in spec["initContainers"]]
    return {"status": status}


class EventRecorder:
    """Writes kubelet-style Events about pods; a repeat of the same event bumps its count."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], tuple[str, int]] = {}

    def warn(self, pod: Obj, node: str, reason: str, message: str) -> None:
        self.record(pod, node, "Warning", reason, message)

    def record(self, pod: Obj, node: str, type_: str, reason: str, message: str) -> None:
        md = pod["metadata"]
        key = (md["uid"], reason, message)
        now = now_rfc3339()
        with self._lock:
            seen = self._seen.get(key)
        if seen is not None:
            name, count = seen
            try:
                self.kube.patch("Event", name, {"count": count + 1, "lastTimestamp": now}, namespace=md["namespace"])
                with self._lock:
                    self._seen[key] = (name, count + 1)
                return
            except ApiError as exc:
                if not exc.not_found:
                    raise
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{md['name']}.", "namespace": md["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": md["name"],
                "namespace": md["namespace"],
                "uid": md["uid"],
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": "kubelet", "host": node},
            "reportingComponent": "kubelet",
            "reportingInstance": node,
        }
        created = self.kube.create(event)
        with self._lock:
            self._seen[key] = (created["metadata"]["name"], 1)

    def forget(self, pod_uid: str) -> None:
        with self._lock:
            for key in [k for k in self._seen if k[0] == pod_uid]:
                del self._seen[key]
