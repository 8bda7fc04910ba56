"""``no-legacy-mix``: no pod combines extended (device-plugin) accelerator resources with DRA claims.

An extended resource that a DeviceClass serves through ``extendedResourceName`` (DRAExtendedResource)
is DRA, not legacy, and does not count.
"""

from __future__ import annotations

from draguard.harness.invariants.snapshot import Snapshot, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check", "is_extended_resource"]

NAME = "no-legacy-mix"


def is_extended_resource(name: str) -> bool:
    """``nvidia.com/gpu`` yes; ``cpu``, ``hugepages-2Mi``, ``kubernetes.io/...`` or ``requests.*`` no."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


@INVARIANTS.register(NAME, summary="No pod combines extended accelerator resources with DRA claims.",
                     judged="continuously")
def check(snapshot: Snapshot) -> list[Violation]:
    served = {
        name for c in snapshot.device_classes if (name := (c.get("spec") or {}).get("extendedResourceName"))
    }
    out: list[Violation] = []
    for pod in snapshot.pods:
        spec = pod.get("spec") or {}
        entries = spec.get("resourceClaims")
        if not entries:
            continue
        legacy: set[str] = set()
        for containers in (spec.get("containers"), spec.get("initContainers")):
            for container in containers or ():
                resources = container.get("resources")
                if not resources:
                    continue
                # Most pods of a load run name claims only: judged twice a second, 5000 of them.
                for section in (resources.get("limits"), resources.get("requests")):
                    if section:
                        legacy.update(n for n in section if is_extended_resource(n) and n not in served)
        if legacy:
            claims = [c.get("name", "") for c in entries]
            out.append(Violation(NAME, f"{ref('Pod', pod)} requests extended resource(s) {', '.join(sorted(legacy))} "
                                 f"and DRA claim(s) {', '.join(claims)}", (ref("Pod", pod),), (), snapshot.time))  # fmt: skip
    return out
