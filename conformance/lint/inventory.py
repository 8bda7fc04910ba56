"""The workload walker: what the linted documents declare, in the shape the rules ask about.

From the documents it finds every pod template (Pod, Deployment, ReplicaSet, StatefulSet,
DaemonSet, Job, CronJob, JobSet, LeaderWorkerSet) with how many pods it runs and how many of them
form one gang, every claim spec (ResourceClaim, ResourceClaimTemplate; resource.k8s.io v1, v1beta2,
v1beta1 and v1alpha3 shapes alike), every DeviceClass, and the gang objects (Workload, PodGroup).
Documents of other kinds, and documents that are not Kubernetes objects at all (scenario files,
Helm values), are kept for the API-version rule and otherwise ignored.

Users: the rules. Talks to: nothing (pure data).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from draguard.harness.cel import CelError, compile_selector

from .knowledge import knowledge
from .document import Document, Location
from .sources.model import CodeFile

__all__ = [
    "Inventory",
    "PodTemplate",
    "PodClaimRef",
    "ClaimSpec",
    "DeviceRequest",
    "DeviceAlternative",
    "SelectorRef",
    "Constraint",
    "ConfigEntry",
    "DeviceClassDef",
    "ALL_DEVICES",
    "build",
]

ALL_DEVICES = 1_000_000
"""The device count of ``allocationMode: All``: every matching device, certainly more than one."""

RESOURCE_GROUP = "resource.k8s.io"
SCHEDULING_GROUP = "scheduling.k8s.io"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seq(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return default  # unset, or a template expression in an unrendered file


# --- pods ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodClaimRef:
    """One entry of ``pod.spec.resourceClaims``."""

    name: str
    template: str | None
    claim: str | None
    at: Location
    source_at: Location
    """Where the template or claim name is."""


@dataclass(frozen=True)
class PodTemplate:
    """A pod spec, and the workload that runs it."""

    doc: Document
    owner_kind: str
    owner_name: str
    spec: Mapping[str, Any]
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    replicas: int
    """Pods of this template the workload runs at once (a DaemonSet's one per node counts 1)."""
    gang_size: int
    """Pods of the workload that only make progress together (1: none)."""
    at: Location
    """The replicas (parallelism, size) field, or the object itself."""
    spec_at: Location

    @property
    def owner(self) -> str:
        return f"{self.owner_kind} {self.owner_name or '(unnamed)'}"

    @property
    def namespace(self) -> str | None:
        return self.doc.namespace

    def claim_refs(self) -> list[PodClaimRef]:
        refs = []
        claims = self.spec.get("resourceClaims")
        for i, entry in enumerate(_seq(claims)):
            if not isinstance(entry, Mapping):
                continue
            template = entry.get("resourceClaimTemplateName")
            claim = entry.get("resourceClaimName")
            key = "resourceClaimTemplateName" if template else "resourceClaimName" if claim else "name"
            refs.append(
                PodClaimRef(
                    str(entry.get("name", "")),
                    template if isinstance(template, str) else None,
                    claim if isinstance(claim, str) else None,
                    self.doc.at(claims, i),
                    self.doc.value_at(entry, key) if key in entry else self.doc.at(claims, i),
                )
            )
        return refs

    def containers(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """``(field, container)`` for containers and init containers."""
        for kind in ("initContainers", "containers"):
            for container in _seq(self.spec.get(kind)):
                if isinstance(container, Mapping):
                    yield kind, container


def _template(
    doc: Document,
    kind: str,
    name: str,
    template: Any,
    replicas: int,
    gang: int,
    at: Location,
    owner_meta: Mapping[str, Any],
) -> PodTemplate | None:
    template = _map(template)
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return None
    meta = _map(template.get("metadata"))
    labels = {**_map(owner_meta.get("labels")), **_map(meta.get("labels"))}
    annotations = {**_map(owner_meta.get("annotations")), **_map(meta.get("annotations"))}
    return PodTemplate(doc, kind, name, spec, labels, annotations, replicas, gang, at, doc.at(spec))


def _where(doc: Document, node: Mapping[str, Any], key: str) -> Location:
    return doc.at(node, key) if key in node else doc.at(doc.obj, "kind") if "kind" in doc.obj else doc.at()


def _pod_templates(doc: Document) -> list[PodTemplate]:
    obj, kind, name = doc.obj, doc.kind, doc.name
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    found: list[PodTemplate | None] = []
    if kind == "Pod" and doc.api_version == "v1":
        found.append(_template(doc, kind, name, obj, 1, 1, _where(doc, obj, "kind"), {}))
    elif kind in ("Deployment", "ReplicaSet", "StatefulSet") and doc.group == "apps":
        n = _int(spec.get("replicas"), 1)
        found.append(_template(doc, kind, name, spec.get("template"), n, n, _where(doc, spec, "replicas"), meta))
    elif kind == "DaemonSet" and doc.group == "apps":
        found.append(_template(doc, kind, name, spec.get("template"), 1, 1, _where(doc, obj, "kind"), meta))
    elif kind == "Job" and doc.group == "batch":
        n = _int(spec.get("parallelism"), 1)
        found.append(_template(doc, kind, name, spec.get("template"), n, n, _where(doc, spec, "parallelism"), meta))
    elif kind == "CronJob" and doc.group == "batch":
        job = _map(_map(spec.get("jobTemplate")).get("spec"))
        n = _int(job.get("parallelism"), 1)
        found.append(_template(doc, kind, name, job.get("template"), n, n, _where(doc, job, "parallelism"), meta))
    elif kind == "JobSet" and doc.group == "jobset.x-k8s.io":
        jobs = [_map(j) for j in _seq(spec.get("replicatedJobs"))]
        counts = [
            _int(j.get("replicas"), 1) * _int(_map(_map(j.get("template")).get("spec")).get("parallelism"), 1)
            for j in jobs
        ]
        total = sum(counts)
        for j, n in zip(jobs, counts):
            job_spec = _map(_map(j.get("template")).get("spec"))
            at = _where(doc, j, "replicas") if "replicas" in j else _where(doc, job_spec, "parallelism")
            found.append(_template(doc, kind, name, job_spec.get("template"), n, total, at, meta))
    elif kind == "LeaderWorkerSet" and doc.group == "leaderworkerset.x-k8s.io":
        groups = _int(spec.get("replicas"), 1)
        lwt = _map(spec.get("leaderWorkerTemplate"))
        size = _int(lwt.get("size"), 1)
        at = _where(doc, lwt, "size") if "size" in lwt else _where(doc, spec, "replicas")
        leader = lwt.get("leaderTemplate")
        if isinstance(leader, Mapping):
            found.append(_template(doc, kind, name, leader, groups, size, at, meta))
            found.append(_template(doc, kind, name, lwt.get("workerTemplate"), groups * (size - 1), size, at, meta))
        else:
            found.append(_template(doc, kind, name, lwt.get("workerTemplate"), groups * size, size, at, meta))
    return [t for t in found if t is not None]


# --- claims and classes ------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectorRef:
    """A CEL selector expression and where it is written."""

    expression: str
    at: Location


@dataclass(frozen=True)
class DeviceAlternative:
    """What one request (``exactly``) or one of its ``firstAvailable`` subrequests asks for."""

    request: str
    """``<request>`` or ``<request>/<subrequest>``."""
    class_name: str | None
    class_at: Location
    selectors: tuple[SelectorRef, ...]
    count: int
    capacity: Mapping[str, Any] | None
    at: Location
    count_at: Location
    """The count or allocationMode field, else the alternative itself."""


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    alternatives: tuple[DeviceAlternative, ...]
    at: Location

    @property
    def count(self) -> int:
        """The most devices any alternative asks for."""
        return max((a.count for a in self.alternatives), default=0)


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    at: Location


@dataclass(frozen=True)
class ConfigEntry:
    requests: tuple[str, ...]
    driver: str | None
    parameters: Mapping[str, Any]
    at: Location

    def applies_to(self, request: str) -> bool:
        base = request.split("/", 1)[0]
        return not self.requests or request in self.requests or base in self.requests


@dataclass(frozen=True)
class ClaimSpec:
    """The device part of a ResourceClaim, a ResourceClaimTemplate or a PodGroup's claim."""

    doc: Document
    kind: str
    name: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...]
    configs: tuple[ConfigEntry, ...]
    at: Location

    @property
    def namespace(self) -> str | None:
        return self.doc.namespace

    @property
    def device_count(self) -> int:
        return sum(r.count for r in self.requests)


@dataclass(frozen=True)
class DeviceClassDef:
    doc: Document
    name: str
    selectors: tuple[SelectorRef, ...]
    configs: tuple[ConfigEntry, ...]
    at: Location

    @property
    def drivers(self) -> frozenset[str]:
        """The drivers the class's selectors pin ``device.driver`` to."""
        out: set[str] = set()
        for ref in self.selectors:
            try:
                out |= compile_selector(ref.expression).drivers
            except CelError:
                continue
        return frozenset(out)


def _selectors(doc: Document, node: Mapping[str, Any]) -> tuple[SelectorRef, ...]:
    out = []
    for i, sel in enumerate(_seq(node.get("selectors"))):
        cel = _map(_map(sel).get("cel"))
        expr = cel.get("expression")
        if isinstance(expr, str):
            out.append(SelectorRef(expr, doc.value_at(cel, "expression")))
        elif isinstance(sel, Mapping):
            out.append(SelectorRef("", doc.at(node.get("selectors"), i)))
    return tuple(out)


def _alternative(doc: Document, name: str, node: Mapping[str, Any], at: Location) -> DeviceAlternative:
    mode = node.get("allocationMode")
    count = ALL_DEVICES if mode == "All" else _int(node.get("count"), 1)
    capacity = _map(node.get("capacity")).get("requests")
    class_name = node.get("deviceClassName")
    class_at = doc.value_at(node, "deviceClassName") if "deviceClassName" in node else at
    count_key = "allocationMode" if mode == "All" else "count"
    count_at = doc.at(node, count_key) if count_key in node else at
    return DeviceAlternative(
        name,
        class_name if isinstance(class_name, str) else None,
        class_at,
        _selectors(doc, node),
        count,
        capacity if isinstance(capacity, Mapping) else None,
        at,
        count_at,
    )


def _requests(doc: Document, devices: Mapping[str, Any]) -> tuple[DeviceRequest, ...]:
    out = []
    requests = devices.get("requests")
    for i, req in enumerate(_seq(requests)):
        if not isinstance(req, Mapping):
            continue
        name = str(req.get("name", ""))
        at = doc.at(requests, i)
        alts: list[DeviceAlternative] = []
        if isinstance(req.get("exactly"), Mapping):  # v1, v1beta2
            alts.append(_alternative(doc, name, req["exactly"], doc.at(req, "exactly")))
        subs = req.get("firstAvailable")
        for j, sub in enumerate(_seq(subs)):
            if isinstance(sub, Mapping):
                alts.append(_alternative(doc, f"{name}/{sub.get('name', '')}", sub, doc.at(subs, j)))
        if not alts and "deviceClassName" in req:  # v1beta1, v1alpha3: the request is flat
            alts.append(_alternative(doc, name, req, at))
        out.append(DeviceRequest(name, tuple(alts), at))
    return tuple(out)


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in _seq(value))


def _configs(doc: Document, node: Any) -> tuple[ConfigEntry, ...]:
    out = []
    for i, entry in enumerate(_seq(node)):
        entry = _map(entry)
        opaque = _map(entry.get("opaque"))
        driver = opaque.get("driver")
        out.append(
            ConfigEntry(
                _names(entry.get("requests")),
                driver if isinstance(driver, str) else None,
                _map(opaque.get("parameters")),
                doc.at(node, i),
            )
        )
    return tuple(out)


def _claim_spec(doc: Document, kind: str, name: str, spec: Mapping[str, Any]) -> ClaimSpec:
    devices = _map(spec.get("devices"))
    constraints = []
    cnode = devices.get("constraints")
    for i, c in enumerate(_seq(cnode)):
        c = _map(c)
        attr = c.get("matchAttribute")
        constraints.append(Constraint(_names(c.get("requests")), attr if isinstance(attr, str) else None, doc.at(cnode, i)))
    at = doc.at(spec, "devices") if "devices" in spec else doc.at()
    return ClaimSpec(doc, kind, name, _requests(doc, devices), tuple(constraints), _configs(doc, devices.get("config")), at)


# --- the inventory -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GangRef:
    """A Workload's controllerRef: the workload it schedules as a gang."""

    kind: str
    name: str


@dataclass
class Inventory:
    """Everything the rules look at, built once per lint run."""

    documents: list[Document]
    target_release: tuple[int, int] = (1, 37)
    pods: list[PodTemplate] = field(default_factory=list)
    claims: list[ClaimSpec] = field(default_factory=list)
    classes: dict[str, DeviceClassDef] = field(default_factory=dict)
    gang_refs: set[GangRef] = field(default_factory=set)
    group_claim_refs: list[tuple[Document, PodClaimRef]] = field(default_factory=list)
    """Claims used by PodGroups and Workload pod-group templates."""
    server: Any = None
    """A :class:`~draguard.conformance.lint.server.ServerCheck` when ``--server`` is on."""
    code: list[CodeFile] = field(default_factory=list)
    """What was read from source files (their embedded manifests are among the documents)."""

    def claim_source(self, ref: PodClaimRef, namespace: str | None) -> ClaimSpec | None:
        """The ResourceClaim or ResourceClaimTemplate ``ref`` names, when the set defines it."""
        kind, name = ("ResourceClaimTemplate", ref.template) if ref.template else ("ResourceClaim", ref.claim)
        for spec in self.claims:
            if spec.kind == kind and spec.name == name and _same_namespace(spec.namespace, namespace):
                return spec
        return None

    def class_driver(self, class_name: str | None) -> str | None:
        """The one driver a class selects: from its definition in the set, else from knowledge."""
        if not class_name:
            return None
        defined = self.classes.get(class_name)
        if defined is not None:
            drivers = defined.drivers
            return next(iter(drivers)) if len(drivers) == 1 else None
        return knowledge().driver_of_class(class_name)

    def claims_of(self, pod: PodTemplate) -> list[tuple[PodClaimRef, ClaimSpec | None]]:
        return [(ref, self.claim_source(ref, pod.namespace)) for ref in pod.claim_refs()]


def _same_namespace(a: str | None, b: str | None) -> bool:
    return a is None or b is None or a == b


def build(documents: list[Document], target_release: tuple[int, int] = (1, 37)) -> Inventory:
    """Walk the documents once."""
    inv = Inventory(documents, target_release)
    for doc in documents:
        inv.pods.extend(_pod_templates(doc))
        spec = _map(doc.obj.get("spec"))
        if doc.group == RESOURCE_GROUP:
            if doc.kind == "ResourceClaim":
                inv.claims.append(_claim_spec(doc, doc.kind, doc.name, spec))
            elif doc.kind == "ResourceClaimTemplate":
                inner = _map(spec.get("spec"))
                inv.claims.append(_claim_spec(doc, doc.kind, doc.name, inner))
            elif doc.kind == "DeviceClass":
                inv.classes[doc.name] = DeviceClassDef(
                    doc, doc.name, _selectors(doc, spec), _configs(doc, spec.get("config")), doc.at()
                )
        elif doc.group == SCHEDULING_GROUP and doc.kind in ("Workload", "PodGroup"):
            ref = _map(spec.get("controllerRef"))
            if isinstance(ref.get("kind"), str) and isinstance(ref.get("name"), str):
                inv.gang_refs.add(GangRef(ref["kind"], ref["name"]))
            holders = [spec] + [_map(t) for t in _seq(spec.get("podGroupTemplates") or spec.get("podGroups"))]
            for holder in holders:
                fake = PodTemplate(doc, doc.kind, doc.name, holder, {}, {}, 1, 1, doc.at(), doc.at(holder))
                inv.group_claim_refs.extend((doc, r) for r in fake.claim_refs())
    return inv
