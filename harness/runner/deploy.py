"""Kubernetes objects for a scenario: device classes, claims and templates, gangs of pods, PodGroups.

Pure functions from the validated scenario (``draguard.harness.scenario.types``) to v1 object dicts;
every object carries the run label; tests check their shape without a cluster. :class:`Deployment`
creates them in the run's cluster (the runner's deploy phase, and the workloads a later step brings).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from draguard.harness.core.errors import HarnessError

from ..cluster.kind.nodefiles import SANDBOX_IMAGE
from ..fleet.coverage import pinned_nodes
from ..kube import BULK_PARALLEL, MEMBER_LABEL, RUN_LABEL, WORKLOAD_LABEL, ApiError, Kube, Obj
from ..scenario.types import Claim, DeviceClass, Request, Scenario, SubRequest, Toleration, Workload

__all__ = [
    "RUN_LABEL",
    "WORKLOAD_LABEL",
    "MEMBER_LABEL",
    "PAUSE_IMAGE",
    "device_class",
    "claim_spec",
    "sharing_config",
    "claim_objects",
    "pod",
    "pod_group",
    "priority_class",
    "priority_class_name",
    "creation_order",
    "deferred_workloads",
    "Deployment",
]

SCENARIO_LABEL = "draguard.dev/scenario"
PAUSE_IMAGE = SANDBOX_IMAGE
"""A workload's image unless it names one: the release's sandbox image, which every kubeadm-built node
(kind's included) holds already, so pods start on a cluster that cannot pull images."""


def _labels(run: str, **extra: str) -> dict[str, str]:
    return {RUN_LABEL: run, **extra}


def device_class(dc: DeviceClass, run: str) -> Obj:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in dc.selectors]}
    if dc.extended_resource_name:
        spec["extendedResourceName"] = dc.extended_resource_name
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": dc.name, "labels": _labels(run)}, "spec": spec}


def _tolerations(ts: tuple[Toleration, ...]) -> list[Obj]:
    out = []
    for t in ts:
        item: dict[str, Any] = {"operator": t.operator}
        for key, value in (("key", t.key), ("value", t.value), ("effect", t.effect), ("tolerationSeconds", t.toleration_seconds)):
            if value is not None:
                item[key] = value
        out.append(item)
    return out


def _exact(r: Request | SubRequest) -> Obj:
    out: dict[str, Any] = {"deviceClassName": r.device_class_name, "allocationMode": r.allocation_mode}
    if r.allocation_mode == "ExactCount":
        out["count"] = r.count or 1
    if r.selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in r.selectors]
    if r.tolerations:
        out["tolerations"] = _tolerations(r.tolerations)
    return out


def sharing_config(driver: str, strategy: str) -> Obj:
    """The opaque device config that sets a sharing strategy (``TimeSlicing``, ``MPS``) up for a claim,
    in the form draguard's fake driver reads (``GpuConfig``, as the NVIDIA driver's config API has it)."""
    return {"opaque": {"driver": driver, "parameters": {
        "apiVersion": "gpu.draguard.dev/v1alpha1", "kind": "GpuConfig", "sharing": {"strategy": strategy}}}}


def claim_spec(claim: Claim) -> Obj:
    requests: list[dict[str, Any]] = []
    for r in claim.requests:
        if r.first_available:
            requests.append({"name": r.name, "firstAvailable": [{"name": s.name, **_exact(s)} for s in r.first_available]})
        else:
            exact = _exact(r)
            if r.admin_access:
                exact["adminAccess"] = True
            requests.append({"name": r.name, "exactly": exact})
    devices: dict[str, Any] = {"requests": requests}
    constraints = []
    for c in claim.constraints:
        item: dict[str, Any] = {}
        if c.requests:
            item["requests"] = list(c.requests)
        if c.match_attribute:
            item["matchAttribute"] = c.match_attribute
        if c.distinct_attribute:
            item["distinctAttribute"] = c.distinct_attribute
        constraints.append(item)
    if constraints:
        devices["constraints"] = constraints
    config = [
        {"requests": list(o.requests), "opaque": {"driver": o.driver, "parameters": dict(o.parameters)}}
        if o.requests else {"opaque": {"driver": o.driver, "parameters": dict(o.parameters)}}
        for o in claim.config
    ]
    if claim.sharing is not None:
        drivers = {o.driver for o in claim.config} or set()
        driver = next(iter(drivers)) if drivers else None
        config.append(sharing_config(driver or "gpu.draguard.dev", claim.sharing.strategy))
    if config:
        devices["config"] = config
    return {"devices": devices}


def _claim_object_name(workload: Workload, claim: Claim) -> str:
    return f"{workload.name}-{claim.name}"


def claim_objects(workload: Workload, namespace: str, run: str) -> list[Obj]:
    """The ResourceClaimTemplates (source ``template``) and shared ResourceClaims of a workload."""
    out = []
    for claim in workload.claims:
        labels = _labels(run, **{WORKLOAD_LABEL: workload.name})
        name = _claim_object_name(workload, claim)
        if claim.source == "template":
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                        "metadata": {"name": name, "namespace": namespace, "labels": labels},
                        "spec": {"metadata": {"labels": labels}, "spec": claim_spec(claim)}})
        else:
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": name, "namespace": namespace, "labels": labels},
                        "spec": claim_spec(claim)})
    return out


def priority_class_name(run: str, value: int) -> str:
    return f"draguard-{run}-p{value}".replace("--", "-m")


def priority_class(run: str, value: int) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": priority_class_name(run, value), "labels": _labels(run)},
            "value": value, "preemptionPolicy": "PreemptLowerPriority",
            "description": "created by draguard for one run"}


def pod_group(workload: Workload, namespace: str, run: str) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": workload.name, "namespace": namespace,
                         "labels": _labels(run, **{WORKLOAD_LABEL: workload.name})},
            "spec": {"schedulingPolicy": {"gang": {"minCount": workload.min_count}}}}


def pod(workload: Workload, member: int, namespace: str, run: str, scenario: str,
        nodes: list[str] | None = None) -> Obj:
    """A workload member's pod; ``nodes`` pins it to those nodes (a scenario retargeted at a cluster's nodes)."""
    labels = _labels(run, **{WORKLOAD_LABEL: workload.name, MEMBER_LABEL: str(member), SCENARIO_LABEL: scenario})
    container: dict[str, Any] = {"name": "main", "image": workload.image or PAUSE_IMAGE}
    resources: dict[str, Any] = {}
    if workload.claims:
        resources["claims"] = [{"name": c.name} for c in workload.claims]
    if workload.extended_resources:
        amounts = {k: str(v) for k, v in workload.extended_resources.items()}
        resources["limits"] = amounts
        resources["requests"] = amounts
    if resources:
        container["resources"] = resources
    spec: dict[str, Any] = {
        "containers": [container],
        "terminationGracePeriodSeconds": 5,
        "tolerations": [
            # Fake nodes going NotReady should evict quickly in node-loss scenarios, not after 5 minutes.
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
        ],
    }
    if workload.claims:
        spec["resourceClaims"] = [
            {"name": c.name, "resourceClaimTemplateName": _claim_object_name(workload, c)} if c.source == "template"
            else {"name": c.name, "resourceClaimName": _claim_object_name(workload, c)}
            for c in workload.claims
        ]
    if nodes:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}]}}}
    if workload.priority_class_name:
        spec["priorityClassName"] = workload.priority_class_name
    elif workload.priority is not None:
        spec["priorityClassName"] = priority_class_name(run, workload.priority)
    if workload.gang == "podgroup":
        spec["schedulingGroup"] = {"podGroupName": workload.name}
    annotations = {}
    if workload.run_for is not None:
        annotations["draguard.dev/run-for"] = str(workload.run_for.total_seconds())
    md: dict[str, Any] = {"name": f"{workload.name}-{member}", "namespace": namespace, "labels": labels}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def deferred_workloads(scenario: Scenario) -> set[str]:
    """Workloads held back until a step brings them in: a step whose params name a ``workload``
    (``arrive``, or ``preempt`` with its higher-priority gang)."""
    return {
        name for step in scenario.timeline
        if isinstance(name := getattr(step.params, "workload", None), str)
    }


def creation_order(scenario: Scenario) -> list[tuple[Workload, int]]:
    """Pods in the order they are created: workloads in file order, interleaved where asked."""
    order: list[tuple[Workload, int]] = []
    placed: set[str] = set()
    partners = {w.interleave_with: w for w in scenario.workloads if w.interleave_with}
    for w in scenario.workloads:
        if w.name in placed:
            continue
        group = [w]
        if w.interleave_with and w.interleave_with not in placed:
            group.append(scenario.workload(w.interleave_with))
        if w.name in partners and partners[w.name].name not in placed and partners[w.name] not in group:
            group.append(partners[w.name])
        for i in range(max(g.replicas for g in group)):
            for g in group:
                if i < g.replicas:
                    order.append((g, i))
        placed.update(g.name for g in group)
    return order


class Deployment:
    """Creates a run's objects in ``namespace``: the deploy phase (:meth:`deploy`), the pods of a workload
    a later step brings (:meth:`create_workload`); notes in ``created`` the workloads whose pods are all
    created (the judge's Gang.created)."""

    def __init__(self, kube: Kube, scenario: Scenario, namespace: str, run_id: str, created: set[str]) -> None:
        self.kube, self.scenario, self.namespace, self.run_id, self.created = kube, scenario, namespace, run_id, created

    def deploy(self, log: Callable[[str], None]) -> None:
        """DeviceClasses, PriorityClasses, claims and templates, PodGroups, then the pods (interleaved
        where the scenario says), once the namespace is ready."""
        sc = self.scenario
        self.kube.wait_namespace_ready(self.namespace)
        for dc in sc.device_classes:
            self.create(device_class(dc, self.run_id))
        for value in sorted({w.priority for w in sc.workloads if w.priority is not None and not w.priority_class_name}):
            self.create(priority_class(self.run_id, value))
        first: list[Obj] = []
        for w in sc.workloads:
            first += claim_objects(w, self.namespace, self.run_id)
            if w.gang == "podgroup":
                first.append(pod_group(w, self.namespace, self.run_id))
        self.create_all(first)
        # Workloads that arrive with a later step (preempt) are held back until it creates them.
        deferred = deferred_workloads(sc)
        pinned = pinned_nodes(sc)
        pods = [pod(w, member, self.namespace, self.run_id, sc.name, pinned)
                for w, member in creation_order(sc) if w.name not in deferred]  # fmt: skip
        started = time.monotonic()
        # Interleaved workloads (a0, b0, a1, ...) reproduce a race that needs that order: one at a time.
        ordered = any(w.interleave_with for w in sc.workloads)
        self.create_all(pods, parallel=1 if ordered else BULK_PARALLEL)
        self.created.update(w.name for w in sc.workloads if w.name not in deferred)
        elapsed = time.monotonic() - started
        log(f"deployed {len(pods)} pods in {len(sc.workloads)} workload(s) in {elapsed:.1f}s "
            f"({len(pods) / max(elapsed, 1e-3):.0f}/s, {'in order' if ordered else f'{BULK_PARALLEL} at a time'})")

    def create_workload(self, workload: str) -> None:
        """Create the pods of a deferred workload (``arrive``, ``preempt``)."""
        w = self.scenario.workload(workload)
        self.create_all([pod(w, member, self.namespace, self.run_id, self.scenario.name, pinned_nodes(self.scenario))
                         for member in range(w.replicas)])  # fmt: skip
        self.created.add(w.name)

    def create_all(self, objs: list[Obj], parallel: int = BULK_PARALLEL) -> None:
        """Create ``objs`` with at most ``parallel`` requests in flight; the first error is raised."""
        for obj, result in zip(objs, self.kube.bulk(self.create, objs, parallel)):
            if isinstance(result, HarnessError):
                raise result
            if isinstance(result, Exception):
                md = obj["metadata"]
                raise HarnessError(f"creating {obj['kind']} {md.get('namespace', '')}/{md['name']}: {result}") from result

    def create(self, obj: Obj) -> Obj:
        try:
            return self.kube.create(obj)
        except ApiError as exc:
            md = obj["metadata"]
            raise HarnessError(f"creating {obj['kind']} {md.get('namespace', '')}/{md['name']}: {exc}") from exc
