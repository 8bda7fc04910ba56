"""Rules: names that the linted set refers to but does not define.

Warnings: the cluster may well define them (a driver's Helm chart installs its DeviceClasses), but
a typo here leaves the pod Pending with no error on apply.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..inventory import Inventory, PodClaimRef
from ..registry import Severity, Violation, rule


@rule(
    id="unknown-device-class",
    severity=Severity.WARNING,
    statement="Every DeviceClass a request names is defined in the linted set.",
    fix="Add the DeviceClass to the linted files, correct the name, or make sure the cluster defines it.",
)
def check_device_classes(inv: Inventory) -> Iterator[Violation]:
    for claim in inv.claims:
        for request in claim.requests:
            for alt in request.alternatives:
                if alt.class_name and alt.class_name not in inv.classes:
                    yield Violation(
                        alt.class_at,
                        f"{claim.kind} {claim.name} request {alt.request} uses DeviceClass {alt.class_name}, "
                        "which the linted files do not define",
                    )


def _describe(ref: PodClaimRef) -> str:
    return f"ResourceClaimTemplate {ref.template}" if ref.template else f"ResourceClaim {ref.claim}"


@rule(
    id="unknown-claim-source",
    severity=Severity.WARNING,
    statement="Every ResourceClaim and ResourceClaimTemplate a pod or pod group uses is defined in the linted set.",
    fix="Add the ResourceClaim or ResourceClaimTemplate to the linted files, correct the name, or make "
    "sure the cluster has it.",
)
def check_claim_sources(inv: Inventory) -> Iterator[Violation]:
    for pod in inv.pods:
        for ref in pod.claim_refs():
            if (ref.template or ref.claim) and inv.claim_source(ref, pod.namespace) is None:
                yield Violation(
                    ref.source_at,
                    f"{pod.owner} claim {ref.name} uses {_describe(ref)}, which the linted files do not define",
                )
    for doc, ref in inv.group_claim_refs:
        if (ref.template or ref.claim) and inv.claim_source(ref, doc.namespace) is None:
            yield Violation(
                ref.source_at,
                f"{doc.kind} {doc.name} claim {ref.name} uses {_describe(ref)}, which the linted files do not define",
            )
