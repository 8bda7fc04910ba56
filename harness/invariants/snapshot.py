"""What the invariants judge: a frozen :class:`Snapshot` of the cluster and the drivers at one time.

The runner builds a snapshot from what it watched (v1 object dicts exactly as the API server
returns them: Pods, ResourceClaims, ResourceSlices, DeviceClasses), from each node's fake-driver
checkpoint (:class:`NodeDriverState`), from the CDI folder of each node, and from the scenario
(:class:`Gang`, the device inventory at the start). Invariants are pure functions of a snapshot:
no API calls, no clock, no randomness.

The object dicts are shared, not copied: treat them as read-only. Derived indexes (devices by id,
claims by name) are computed once per snapshot and cached, and handed on to a later snapshot that
holds the very same tuple they were computed from (:meth:`Snapshot.replace`, :meth:`Snapshot.with_views_of`):
a runner judging twice a second at 500 nodes builds the published devices again only when a slice changed.

Device truth: :attr:`Snapshot.device_truth` carries each fake node's devices as the hardware sees
them (reset state, containers, partitions, sharing, incidents), independent of what the driver's
books say. :attr:`Snapshot.gpu_usage` carries what a probe (:mod:`draguard.harness.devices.probe`)
saw on each device; ``no-leak`` reports processes or memory left on a freed device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Protocol

from draguard.harness.devices.truth import DeviceRecord, NodeTruth

__all__ = [
    "DeviceId",
    "DeviceState",
    "NodeDriverState",
    "Gang",
    "GpuUsage",
    "GpuProbe",
    "DriverCall",
    "PreparedDevice",
    "Snapshot",
    "Obj",
    "ref",
    "allocation_results",
    "is_allocated",
    "pod_is_live",
    "pod_claims",
    "attribute",
    "FREE",
]

Obj = Mapping[str, Any]
"""A Kubernetes object as a JSON dict (read-only by convention)."""

FREE = "free"
"""The :attr:`DeviceState.state` of a device no claim holds in the driver."""


class DeviceId(NamedTuple):
    """A device as allocation results name it; renders as ``driver/pool/device``."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One device as the fake driver's checkpoint records it."""

    state: str = FREE
    """``free``, or the driver's word for a device in use or in trouble (``prepared``, ``resetting``, ...)."""
    claims: tuple[str, ...] = ()
    """UIDs of the claims the driver prepared on this device."""
    sharing: str | None = None
    """The sharing strategy set up on the device (``TimeSlicing``, ``MPS``), or None."""


@dataclass(frozen=True, slots=True)
class NodeDriverState:
    """A DRA driver's state on one node: what it prepared and what files it left."""

    node: str
    driver: str
    prepared: Mapping[str, tuple[DeviceId, ...]] = field(default_factory=dict)
    """Claim UID -> devices the driver prepared for it (from its checkpoint)."""
    devices: Mapping[str, DeviceState] = field(default_factory=dict)
    """Device name -> state (from its checkpoint)."""
    cdi_specs: frozenset[str] = frozenset()
    """Claim UIDs that have a CDI spec file in the node's CDI folder."""
    cdi_devices: frozenset[str] | None = None
    """The fully qualified CDI device names (``vendor/class=name``) that the node's CDI folder resolves
    (each defined once there); None when the folder was not read (a node whose files draguard cannot see)."""
    booted: float | None = None
    """When the node last rebooted (seconds from the scenario's start; ``node-reboot``), emptying its CDI
    folder; None when it has not."""


@dataclass(frozen=True, slots=True)
class Gang:
    """A workload of the scenario, seen as a gang."""

    workload: str
    namespace: str
    members: tuple[str, ...]
    """Pod names of the gang's members."""
    claims_per_member: int
    """How many claims each member references (template and shared ones)."""
    settled: bool
    """Whether the settle deadline has passed: a partial gang is then a violation at once."""
    min_count: int | None = None
    """Members that must be complete for the gang to serve (PodGroup ``minCount``); None: all members."""
    grace: float = 30.0
    """How long the gang may stay partial before it is a violation while the run goes on."""
    created: bool = True
    """Whether every member pod has been created. While the harness still creates them (thousands of
    pods take a minute) the gang is not judged before settling: its grace starts once it exists."""


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """What an NVML probe saw on a real GPU."""

    processes: tuple[int, ...] = ()
    memory_used_bytes: int = 0


class GpuProbe(Protocol):
    """An NVML probe (separate issue): usage of the given devices, for :attr:`Snapshot.gpu_usage`."""

    def usage(self, devices: Iterable[DeviceId]) -> Mapping[DeviceId, GpuUsage]: ...


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One device a driver answered for a claim in NodePrepareResources (``Device`` of the DRA v1 API)."""

    pool: str
    device: str
    requests: tuple[str, ...] = ()
    """The claim's requests the device serves (``request_names``; empty: every request of the claim)."""
    cdi_ids: tuple[str, ...] = ()
    """Its fully qualified CDI device IDs (``cdi_device_ids``)."""


@dataclass(frozen=True, slots=True)
class DriverCall:
    """One DRA call as the gRPC interposer saw it pass between a node and the driver (a call that
    ended: its answer or its gRPC status is known)."""

    time: float
    """Seconds after the scenario started, when the call began."""
    node: str
    driver: str
    method: str
    """``NodePrepareResources``, ``NodeUnprepareResources``, ``GetInfo``, ..."""
    claims: tuple[tuple[str, str, str], ...]
    """(namespace, name, uid) of each claim in the request, in the request's order."""
    status: str
    """The gRPC status name the caller got (``OK``, ``UNKNOWN``, ``UNAVAILABLE``, ...)."""
    error: str = ""
    """The status details of a failed call."""
    claim_errors: Mapping[str, str] = field(default_factory=dict)
    """uid -> the error the driver answered for that claim alone."""
    injected: str | None = None
    """The interposer's own fault applied to the call, or the kind of call the interposer made itself
    (``duplicate``, ``stale-retry``); None for a call as the node made it, answered by the driver."""
    answers: Mapping[str, tuple[PreparedDevice, ...]] | None = None
    """uid -> the devices a NodePrepareResources answered for that claim (claims it failed have none);
    None when the record does not carry the answers."""
    duration: float | None = None
    """Seconds from the call's start to its answer, as the interposer timed it (None: not recorded)."""

    @property
    def end(self) -> float | None:
        """When the answer came, in the run's seconds (None without a duration)."""
        return None if self.duration is None else self.time + self.duration


@dataclass(frozen=True)
class Snapshot:
    """The cluster and the drivers at ``time`` seconds after the scenario started."""

    time: float
    pods: tuple[Obj, ...] = ()
    claims: tuple[Obj, ...] = ()
    """v1 ResourceClaims."""
    slices: tuple[Obj, ...] = ()
    """v1 ResourceSlices."""
    device_classes: tuple[Obj, ...] = ()
    """v1 DeviceClasses."""
    drivers: tuple[NodeDriverState, ...] = ()
    initial_inventory: frozenset[DeviceId] = frozenset()
    """Every device published when the scenario started."""
    gangs: tuple[Gang, ...] = ()
    gpu_usage: Mapping[DeviceId, GpuUsage] | None = None
    """NVML probe results for real GPUs; None when not probed."""
    device_truth: tuple[NodeTruth, ...] = ()
    """Each fake node's devices as the hardware sees them (:mod:`draguard.harness.devices.truth`)."""
    published_before: Mapping[DeviceId, Obj] = field(default_factory=dict)
    """Devices published earlier in the run, as last published (whether or not still published now).
    A node's slices go away for reasons that are no fault of the allocation: a kubelet deletes all of
    its node's ResourceSlices when it starts, until the drivers register again, and a driver's slices
    30 s after it went away (``defaultWipingDelay``, kubernetes ``pkg/kubelet/cm/dra/manager.go``);
    the claims allocated from them stay allocated."""

    driver_calls: tuple[DriverCall, ...] = ()
    """The DRA calls the gRPC interposer recorded so far (``driver.interpose``; empty without it).
    Invariants that judge them register ``needs=("interposer",)`` (``"interposer-answers"`` for those
    that read :attr:`DriverCall.answers`): they are not judged without one."""

    def replace(self, **changes: Any) -> Snapshot:
        """``dataclasses.replace`` that keeps the derived indexes whose source field is unchanged."""
        return dataclasses.replace(self, **changes).with_views_of(self)

    def with_views_of(self, earlier: Snapshot | None) -> Snapshot:
        """This snapshot, given ``earlier``'s derived indexes computed from a field this snapshot holds
        the very same tuple of (identity, not equality: the tuples are immutable, their dicts read-only)."""
        if earlier is not None:
            mine, theirs = self.__dict__, earlier.__dict__
            for view, source in _VIEW_SOURCES.items():
                if view in theirs and view not in mine and getattr(earlier, source) is getattr(self, source):
                    mine[view] = theirs[view]  # where functools.cached_property keeps it
        return self

    def device(self, device_id: DeviceId) -> Obj | None:
        """The device as published now, else as last published earlier in the run; None if never seen."""
        found = self.devices.get(device_id)
        return found if found is not None else self.published_before.get(device_id)

    def truth_devices(self) -> Iterator[tuple[str, DeviceRecord]]:
        """(node, device record) of every device in the device truth."""
        for t in self.device_truth:
            for rec in t.devices.values():
                yield t.node, rec

    @cached_property
    def held_on_nodes(self) -> dict[tuple[str, str], set[str]]:
        """(node, device name) -> UIDs of the claims that hold it: allocated in the API (non-admin) or
        prepared by a driver on that node."""
        out: dict[tuple[str, str], set[str]] = {}
        for claim, result, device in self.allocated():
            if result.get("adminAccess"):
                continue
            node = self.device_nodes.get(device, device.pool)
            out.setdefault((node, device.device), set()).add(claim["metadata"].get("uid", ""))
        for state in self.drivers:
            for uid, devices in state.prepared.items():
                for d in devices:
                    out.setdefault((state.node, d.device), set()).add(uid)
        return out

    @cached_property
    def devices(self) -> dict[DeviceId, Obj]:
        """Published devices by id, from the newest generation of each pool."""
        newest: dict[tuple[str, str], int] = {}
        for s in self.slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            key = (spec.get("driver", ""), pool.get("name", ""))
            newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
        out: dict[DeviceId, Obj] = {}
        for s in self.slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            key = (spec.get("driver", ""), pool.get("name", ""))
            if int(pool.get("generation") or 0) != newest[key]:
                continue
            for device in spec.get("devices") or ():
                out[DeviceId(key[0], key[1], device.get("name", ""))] = device
        return out

    @cached_property
    def device_nodes(self) -> dict[DeviceId, str]:
        """Node name of each published device whose slice is local to one node (``spec.nodeName``)."""
        out: dict[DeviceId, str] = {}
        for s in self.slices:
            spec = s.get("spec") or {}
            node = spec.get("nodeName")
            if not node:
                continue
            for device in spec.get("devices") or ():
                out[DeviceId(spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), device.get("name", ""))] = node
        return out

    @cached_property
    def _ids_on_nodes(self) -> dict[tuple[str, str], DeviceId]:
        return {(node, d.device): d for d, node in self.device_nodes.items()}

    def truth_device(self, node: str, name: str) -> str:
        """A device of the device truth named the way allocation results name it (``driver/pool/device``),
        so evidence rules match it like any other device; ``?/<node>/<name>`` when no slice publishes it."""
        found = self._ids_on_nodes.get((node, name))
        return str(found) if found is not None else f"?/{node}/{name}"

    @cached_property
    def classes(self) -> dict[str, Obj]:
        """DeviceClasses by name."""
        return {c["metadata"]["name"]: c for c in self.device_classes}

    @cached_property
    def claims_by_name(self) -> dict[tuple[str, str], Obj]:
        """ResourceClaims by (namespace, name)."""
        return {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in self.claims}

    @cached_property
    def claims_by_pod_claim(self) -> dict[tuple[str, str, str], Obj]:
        """ResourceClaims by (namespace, controlling owner's UID, ``resource.kubernetes.io/pod-claim-name``
        annotation): the claims the resourceclaim controller made from a pod's templates. The first
        claim in ``claims`` wins a key, as a scan in that order would find it."""
        out: dict[tuple[str, str, str], Obj] = {}
        for c in self.claims:
            meta = c["metadata"]
            entry = (meta.get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name")
            if entry is None:
                continue
            for o in meta.get("ownerReferences") or ():
                if o.get("controller"):
                    out.setdefault((meta.get("namespace", ""), str(o.get("uid")), entry), c)
        return out

    @cached_property
    def pods_by_name(self) -> dict[tuple[str, str], Obj]:
        """Pods by (namespace, name)."""
        return {(p["metadata"].get("namespace", ""), p["metadata"]["name"]): p for p in self.pods}

    @cached_property
    def pods_by_uid(self) -> dict[str, Obj]:
        return {p["metadata"]["uid"]: p for p in self.pods if p["metadata"].get("uid")}

    def allocated(self) -> Iterator[tuple[Obj, Obj, DeviceId]]:
        """Every (claim, allocation result, device id) of every allocated claim."""
        for claim in self.claims:
            for result in allocation_results(claim):
                yield claim, result, DeviceId(result.get("driver", ""), result.get("pool", ""), result.get("device", ""))


_VIEW_SOURCES = {
    "devices": "slices", "device_nodes": "slices", "_ids_on_nodes": "slices", "classes": "device_classes",
    "claims_by_name": "claims", "claims_by_pod_claim": "claims", "pods_by_name": "pods", "pods_by_uid": "pods",
}
"""Each cached index of :class:`Snapshot` computed from one field alone, and that field."""


def ref(kind: str, obj: Obj) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped); list items carry no ``kind``, so pass it."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{kind}/{ns}/{meta.get('name', '?')}" if ns else f"{kind}/{meta.get('name', '?')}"


def allocation_results(claim: Obj) -> list[Obj]:
    """``status.allocation.devices.results`` of a claim ([] when not allocated)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def is_allocated(claim: Obj) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))


def pod_is_live(pod: Obj) -> bool:
    """A pod that still consumes its claims: present and not in a terminal phase."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def pod_claims(pod: Obj, snapshot: Snapshot) -> list[tuple[str, Obj | None]]:
    """(pod claim name, ResourceClaim or None if not created yet) for each ``spec.resourceClaims`` entry.

    Template claims are found through ``status.resourceClaimStatuses``, falling back to claims whose
    controller owner is the pod and whose ``resource.kubernetes.io/pod-claim-name`` annotation names
    the entry.
    """
    meta = pod["metadata"]
    ns = meta.get("namespace", "")
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    out: list[tuple[str, Obj | None]] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = entry.get("name", "")
        claim_name = entry.get("resourceClaimName")
        if not claim_name:  # a scan, not a dict: a pod names a claim or two, and rounds ask for 5000 pods'
            for status in statuses:
                if status.get("name") == name:
                    claim_name = status.get("resourceClaimName")
                    break
        claim = snapshot.claims_by_name.get((ns, claim_name)) if claim_name else None
        if claim is None and entry.get("resourceClaimTemplateName"):
            # One lookup, not a scan of every claim: before the resourceclaim controller writes the pod's
            # status, each pending pod came here, and judging 5000 such pods scanned 5000 claims each.
            claim = snapshot.claims_by_pod_claim.get((ns, str(meta.get("uid")), name))
        out.append((name, claim))
    return out


def attribute(device: Obj, qualified: str, driver: str) -> Any:
    """The value of attribute ``domain/name`` of a slice device (a bare name is in the driver's domain).

    Returns the typed value (``int``/``bool``/``string``/``version`` or a list type), or None if absent.
    """
    domain, _, name = qualified.rpartition("/")
    attributes = device.get("attributes") or {}
    raw = attributes.get(qualified)
    if raw is None and domain == driver:
        raw = attributes.get(name)
    if not isinstance(raw, Mapping):
        return None
    for key in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions"):
        if key in raw:
            value = raw[key]
            return tuple(value) if isinstance(value, list) else value
    return None
