"""The container runtime of a fake node: containers get their devices through CDI, or do not start.

After the DRA manager prepared a pod's claims, the kubelet hands each container the CDI device IDs
of the claims (and requests) it references in ``resources.claims``
(``pkg/kubelet/cm/dra/manager.go`` ``GetResources``), and the runtime (containerd, CRI-O) resolves
them against the CDI specs on disk before it creates the container. An ID that does not resolve
fails the creation: the kubelet records a ``Failed`` event ("Error: ...") and the container waits
with reason ``CreateContainerError`` (``pkg/kubelet/events/event.go`` ``FailedToCreateContainer``,
``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``ErrCreateContainer``), retried with backoff.

:class:`ContainerRuntime` does that with :class:`~draguard.harness.cdi.Registry` on the node's CDI
directory, then records each started container in the node's device truth
(:class:`~draguard.harness.devices.truth.DeviceTruth`): the devices it got are the device nodes its
edits hand in. When a pod ends, its containers stop before any unprepare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from draguard.harness.cdi import CdiError, Registry, Spec, UnresolvableDevices
from draguard.harness.core.errors import HarnessError
from draguard.harness.core.paths import NodeDirs
from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.kube import Obj

__all__ = ["ContainerRuntime", "ContainerError", "CREATE_CONTAINER_ERROR", "FAILED_CONTAINER"]

FAILED_CONTAINER = "Failed"
"""The kubelet's event reason when a container cannot be created."""
CREATE_CONTAINER_ERROR = "CreateContainerError"
"""The waiting reason of such a container."""


class ContainerError(HarnessError):
    """A container of the pod could not be created; the message is what the kubelet reports."""

    def __init__(self, container: str, message: str) -> None:
        self.container = container
        super().__init__(message)


def container_cdi_ids(pod: Obj, prepared: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Container name -> the CDI device IDs it gets.

    ``prepared`` maps a pod claim name (``spec.resourceClaims[].name``) to the devices prepared for
    the claim (as the node's checkpoint records them: ``requestNames``, ``cdiDeviceIDs``). A
    container reference without ``request`` gets every device of the claim.
    """
    spec = pod.get("spec") or {}
    out: dict[str, list[str]] = {}
    for c in list(spec.get("initContainers") or []) + list(spec.get("containers") or []):
        ids: list[str] = []
        for ref in (c.get("resources") or {}).get("claims") or []:
            for device in prepared.get(ref.get("name", ""), ()):
                request = ref.get("request")
                names = device.get("requestNames") or []
                if request and request not in names and not any(n.split("/")[0] == request for n in names):
                    continue
                ids += [i for i in device.get("cdiDeviceIDs") or [] if i not in ids]
        out[c["name"]] = ids
    return out


class ContainerRuntime:
    """One node's runtime: CDI resolution against ``<root>/<node>/cdi`` and the node's device truth."""

    def __init__(self, dirs: NodeDirs) -> None:
        self.dirs = dirs
        self.truth = DeviceTruth(dirs.root, dirs.node)
        self._cdi_parsed: dict[Path, tuple[str, Spec]] = {}
        """The node's CDI specs as parsed, shared by the registry read before each pod start."""

    def start_pod(self, pod: Obj, prepared: Mapping[str, Sequence[Mapping[str, Any]]],
                  claim_uids: Mapping[str, str]) -> None:  # fmt: skip
        """Create the pod's containers; raises ContainerError for the first one that cannot be created.

        ``claim_uids`` maps the pod claim names to ResourceClaim UIDs (recorded with the containers).
        """
        md = pod["metadata"]
        pod_name = f"{md.get('namespace', '')}/{md['name']}"
        per_container = container_cdi_ids(pod, prepared)
        if not any(per_container.values()):
            return
        registry = Registry([self.dirs.cdi], self._cdi_parsed)
        init = {c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []}
        for container, ids in per_container.items():
            if not ids:
                continue
            try:
                edits = registry.resolve(ids)
            except UnresolvableDevices as exc:
                message = f"Error: failed to create containerd container: CDI device injection failed: {exc}"
                self.truth.container_failed(pod_name, f"container {container} of pod {pod_name}: {exc}",
                                            sorted(set(claim_uids.values())))  # fmt: skip
                raise ContainerError(container, message) from exc
            except CdiError as exc:
                raise ContainerError(container, f"Error: CDI: {exc}") from exc
            by_path = self.truth.read().by_path()
            devices = [by_path[n.source] for n in edits.device_nodes if n.source in by_path]
            missing = [n.source for n in edits.device_nodes if n.source not in by_path and not _exists(n.source)]
            if missing:
                message = (f"Error: failed to create containerd container: device node(s) {', '.join(missing)} "
                           "do not exist on the host")  # fmt: skip
                self.truth.container_failed(pod_name, f"container {container} of pod {pod_name}: {message}",
                                            sorted(set(claim_uids.values())))  # fmt: skip
                raise ContainerError(container, message)
            if devices and container not in init:  # init containers ran to completion already
                claims = _claims_of(pod, container, claim_uids)
                self.truth.start_container(f"{md['uid']}/{container}", pod_name, claims, devices)

    def lost(self, pod: Obj, prepared: Mapping[str, Sequence[Mapping[str, Any]]]) -> bool:
        """Whether the pod's containers that get devices are gone from the node: none of them is recorded
        in the device truth, as after a reboot (a runtime keeps its containers under ``/run``). The kubelet
        then creates them again, resolving their CDI devices afresh."""
        if not self.truth.exists or not any(container_cdi_ids(pod, prepared).values()):
            return False
        prefix = f"{pod['metadata']['uid']}/"
        return not any(c.id.startswith(prefix) for rec in self.truth.read().devices.values() for c in rec.containers)

    def stop_pod(self, pod_uid: str) -> None:
        """The pod's containers exit (before its claims are unprepared)."""
        if self.truth.exists:
            self.truth.stop_containers(pod_uid)


def pod_claim_names(pod: Obj) -> dict[str, str]:
    """Pod claim name -> ResourceClaim name (direct, or generated from a template per the pod status)."""
    generated = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out: dict[str, str] = {}
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = pc.get("resourceClaimName") or generated.get(pc["name"])
        if name:
            out[pc["name"]] = name
    return out


def _exists(path: str) -> bool:
    return Path(path).exists()


def _claims_of(pod: Obj, container: str, claim_uids: Mapping[str, str]) -> list[str]:
    spec = pod.get("spec") or {}
    for c in list(spec.get("initContainers") or []) + list(spec.get("containers") or []):
        if c["name"] == container:
            return sorted({claim_uids[r["name"]] for r in (c.get("resources") or {}).get("claims") or []
                           if r.get("name") in claim_uids})  # fmt: skip
    return []
