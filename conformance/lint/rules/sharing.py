"""Rule: a claim on a shared accelerator states its sharing strategy.

A MIG slice, a ResourceClaim that several pods use (time-slicing by default), or a share of a
device's consumable capacity all put several workloads on one physical accelerator. What they get
(MPS, time slices of which length, memory limits) should be written down in the claim's config, not
left to the driver's default.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from ..inventory import ClaimSpec, ConfigEntry, DeviceAlternative, Inventory
from ..knowledge import knowledge
from ..registry import Severity, Violation, rule


def _has_strategy(configs: tuple[ConfigEntry, ...], request: str) -> bool:
    for entry in configs:
        sharing = entry.parameters.get("sharing")
        if entry.applies_to(request) and isinstance(sharing, Mapping) and sharing.get("strategy"):
            return True
    return False


def _selects_shared_type(inv: Inventory, alt: DeviceAlternative) -> str | None:
    know = knowledge()
    info = know.drivers.get(inv.class_driver(alt.class_name) or "")
    if info is not None:
        types = info.shared_types
    else:
        types = frozenset().union(*(d.shared_types for d in know.drivers.values()))
    selectors = list(alt.selectors)
    defined = inv.classes.get(alt.class_name or "")
    if defined is not None:
        selectors.extend(defined.selectors)
    for kind in sorted(types):
        quoted = rf"""['"]{re.escape(kind)}['"]"""
        pattern = re.compile(rf"\.\s*type\s*==\s*{quoted}|{quoted}\s*==\s*[\w.\[\]'\"]*\.\s*type\b")
        if any(pattern.search(ref.expression) for ref in selectors):
            return kind
    return None


def _pods_sharing(inv: Inventory, claim: ClaimSpec) -> int:
    """How many pods use a ResourceClaim at once."""
    total = 0
    for pod in inv.pods:
        for _, spec in inv.claims_of(pod):
            if spec is claim:
                total += max(pod.replicas, 1)
    return total


def _shared_reason(inv: Inventory, claim: ClaimSpec, alt: DeviceAlternative) -> str | None:
    know = knowledge()
    if alt.class_name in know.shared_classes:
        return f"device class {alt.class_name} hands out slices of a GPU"
    kind = _selects_shared_type(inv, alt)
    if kind:
        return f"its selector picks {kind} devices, slices of a GPU"
    if alt.capacity:
        return "it asks for part of a device's capacity (" + ", ".join(str(k) for k in alt.capacity) + ")"
    if claim.kind == "ResourceClaim":
        info = know.drivers.get(inv.class_driver(alt.class_name) or "")
        pods = _pods_sharing(inv, claim)
        if info is not None and info.accelerator and pods > 1:
            return f"{pods} pods use this one claim, so they share its devices"
    return None


@rule(
    id="shared-device-strategy",
    severity=Severity.ERROR,
    statement="A claim on a shared accelerator (MIG slice, shared claim, capacity share) states its sharing strategy.",
    fix="Add spec.devices.config with opaque parameters for the request that set sharing.strategy "
    "(TimeSlicing, MPS, ...) as the driver documents it.",
)
def check_sharing_strategy(inv: Inventory) -> Iterator[Violation]:
    for claim in inv.claims:
        for request in claim.requests:
            hit = None
            for alt in request.alternatives:
                reason = _shared_reason(inv, claim, alt)
                if reason is None:
                    continue
                class_configs = inv.classes[alt.class_name].configs if alt.class_name in inv.classes else ()
                if not _has_strategy(claim.configs, alt.request) and not _has_strategy(class_configs, alt.request):
                    hit = (alt, reason)
                    break
            if hit:
                alt, reason = hit
                yield Violation(
                    alt.at,
                    f"{claim.kind} {claim.name or '(unnamed)'} request {alt.request} is on a shared "
                    f"accelerator ({reason}) but no config states a sharing strategy",
                )
                break
