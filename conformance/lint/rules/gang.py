"""Rule: replicated pods with accelerator claims are scheduled as a gang.

Without a gang policy the scheduler places the pods of a distributed job one by one; two jobs that
each get part of their pods hold devices forever and neither starts (shared/reference/prior-art/
gang.md). Replicas of a Deployment may be independent servers, hence a warning.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..inventory import ClaimSpec, GangRef, Inventory, PodTemplate
from ..knowledge import knowledge
from ..registry import Severity, Violation, rule


def _accelerator_claims(inv: Inventory, pod: PodTemplate) -> bool:
    for _, spec in inv.claims_of(pod):
        if spec is None or _is_accelerator(inv, spec):
            return True  # a claim defined elsewhere may well ask for accelerators
    return False


def _is_accelerator(inv: Inventory, spec: ClaimSpec) -> bool:
    know = knowledge()
    for request in spec.requests:
        for alt in request.alternatives:
            driver = inv.class_driver(alt.class_name)
            info = know.drivers.get(driver or "")
            if info is None or info.accelerator:
                return True
    return False


def _has_gang_policy(inv: Inventory, pod: PodTemplate) -> bool:
    know = knowledge()
    if "schedulingGroup" in pod.spec or "workloadRef" in pod.spec:
        return True
    if GangRef(pod.owner_kind, pod.owner_name) in inv.gang_refs:
        return True
    return bool(know.gang_labels & set(pod.labels)) or bool(know.gang_annotations & set(pod.annotations))


@rule(
    id="gang-policy",
    severity=Severity.WARNING,
    statement="Replicated pods with accelerator claims are scheduled as a gang.",
    fix="Add a Workload/PodGroup (scheduling.k8s.io) and spec.schedulingGroup, or the pod-group labels of "
    "your gang scheduler (Kueue, Volcano, coscheduling); ignore this for independent replicas.",
)
def check_gang_policy(inv: Inventory) -> Iterator[Violation]:
    seen: set[tuple[str, int]] = set()
    for pod in inv.pods:
        key = (pod.doc.file, pod.doc.index)
        if pod.gang_size <= 1 or key in seen or not _accelerator_claims(inv, pod):
            continue
        if _has_gang_policy(inv, pod):
            continue
        seen.add(key)
        yield Violation(
            pod.at,
            f"{pod.owner} runs {pod.gang_size} pods with accelerator claims and no gang policy: "
            "scheduled one by one, two such workloads can each hold part of the devices and both wait forever",
        )
