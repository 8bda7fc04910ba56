"""Rule: a claim for several devices says how they must be connected.

Without a constraint the allocator takes any free devices of the node: two GPUs in different NVLink
domains, or a GPU and a NIC under different PCIe roots, which trains slower than one GPU would.
"""

from __future__ import annotations

from collections.abc import Iterator

from draguard.harness.cel import CelError, compile_selector

from ..inventory import ALL_DEVICES, ClaimSpec, Inventory, SelectorRef
from ..knowledge import knowledge
from ..registry import Severity, Violation, rule


def _reads_interconnect(selectors: list[SelectorRef]) -> bool:
    interconnect = knowledge().interconnect_attributes
    for ref in selectors:
        try:
            selector = compile_selector(ref.expression)
        except CelError:
            continue  # reported by cel-compile
        if any(name in interconnect for _, name in selector.attribute_refs):
            return True
    return False


def _selectors(inv: Inventory, claim: ClaimSpec) -> list[SelectorRef]:
    out: list[SelectorRef] = []
    for request in claim.requests:
        for alt in request.alternatives:
            out.extend(alt.selectors)
            defined = inv.classes.get(alt.class_name or "")
            if defined is not None:
                out.extend(defined.selectors)
    return out


@rule(
    id="multi-device-topology",
    severity=Severity.ERROR,
    statement="A claim for more than one device constrains their topology.",
    fix="Add spec.devices.constraints with matchAttribute (e.g. resource.kubernetes.io/pcieRoot or the "
    "driver's NVLink domain attribute), or a CEL selector on an interconnect attribute.",
)
def check_topology(inv: Inventory) -> Iterator[Violation]:
    for claim in inv.claims:
        count = claim.device_count
        if count <= 1 or any(c.match_attribute for c in claim.constraints):
            continue
        if _reads_interconnect(_selectors(inv, claim)):
            continue
        many = [r for r in claim.requests if r.count > 1]
        at = claim.at
        if len(claim.requests) == 1 and many:
            at = next(a.count_at for a in many[0].alternatives if a.count > 1)
        amount = "every matching device" if count >= ALL_DEVICES else f"{count} devices"
        names = ", ".join(r.name for r in claim.requests)
        yield Violation(
            at,
            f"{claim.kind} {claim.name or '(unnamed)'} asks for {amount} (request {names}) with no "
            "topology constraint: the allocator may pick devices that share no NVLink domain, PCIe "
            "root or NUMA node",
        )
