"""Rules: a claim for several devices says how they must be connected, and says it in a way that binds.

Without any topology statement the allocator takes any free devices of the node: two GPUs in
different NVLink domains, or a GPU and a NIC under different PCIe roots, which trains slower than
one GPU would (an error).

The guardrail states topology with CEL selectors (rule 3: "NVLink bandwidth or PCIe topology ...
stated with CEL selectors in the DeviceClass or the claim"). A selector is judged for each device
alone (k8s.io/dynamic-resource-allocation/structured/allocator.go evaluates it per candidate device),
so ``nvlinkBandwidthGbps >= 900`` or ``pcieRoot != ""`` lets every device come from a different
domain; only a ``constraints[].matchAttribute`` makes the chosen devices agree on one attribute
value. Such a selector counts as the topology statement, with a warning that names the constraint
that would bind them.
"""

from __future__ import annotations

from collections.abc import Iterator

from draguard.harness.cel import CelError, compile_selector

from ..inventory import ALL_DEVICES, ClaimSpec, Inventory, SelectorRef
from ..knowledge import DriverInfo, knowledge
from ..registry import Severity, Violation, rule

STANDARD_PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# Which domain attribute stands for which family of topology words, most specific first.
_FAMILIES = (
    (("nvlink", "clique", "fabric"), ("nvlinkDomain", "clique", "cliqueID", "gpuMemoryFabricId")),
    (("numa",), ("numaNode", "numa", "numaNodeID")),
    (("pcie",), ("pcieRoot",)),
    (("rack",), ("rackId",)),
)
_ANY = ("nvlinkDomain", "clique", "cliqueID", "pcieRoot", "numaNode", "numa", "numaNodeID", "rackId")


def _topology_reads(selectors: list[SelectorRef]) -> list[tuple[SelectorRef, list[tuple[str, str]]]]:
    """The selectors that read topology attributes, with the ``(domain, name)`` they read."""
    know = knowledge()
    out = []
    for ref in selectors:
        try:
            selector = compile_selector(ref.expression)
        except CelError:
            continue  # reported by cel-compile
        reads = sorted((d, n) for d, n in selector.attribute_refs if know.is_topology_attribute(n))
        if reads:
            out.append((ref, reads))
    return out


def _selectors(inv: Inventory, claim: ClaimSpec) -> list[SelectorRef]:
    out: list[SelectorRef] = []
    for request in claim.requests:
        for alt in request.alternatives:
            out.extend(alt.selectors)
            defined = inv.classes.get(alt.class_name or "")
            if defined is not None:
                out.extend(defined.selectors)
    return out


def _needs_topology(claim: ClaimSpec) -> bool:
    return claim.device_count > 1 and not any(c.match_attribute for c in claim.constraints)


@rule(
    id="multi-device-topology",
    severity=Severity.ERROR,
    statement="A claim for more than one device states their topology: a matchAttribute constraint or a "
    "CEL selector on a topology attribute.",
    fix="Add spec.devices.constraints with matchAttribute (e.g. resource.kubernetes.io/pcieRoot or the "
    "driver's NVLink domain attribute).",
)
def check_topology(inv: Inventory) -> Iterator[Violation]:
    for claim in inv.claims:
        if not _needs_topology(claim) or _topology_reads(_selectors(inv, claim)):
            continue
        count = claim.device_count
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


def _driver_info(inv: Inventory, claim: ClaimSpec) -> DriverInfo | None:
    know = knowledge()
    for request in claim.requests:
        for alt in request.alternatives:
            info = know.drivers.get(inv.class_driver(alt.class_name) or "")
            if info is not None and info.accelerator:
                return info
    return None


def _published_domain_attribute(info: DriverInfo, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` the driver publishes, qualified with its domain (its own domain first)."""
    for name in names:
        for domain, published in info.attributes.items():
            if published is not None and name in published:
                return f"{domain}/{name}"
    return None


def suggested_attribute(info: DriverInfo | None, domain: str, name: str) -> tuple[str, str]:
    """The matchAttribute that makes the devices share the domain the selector talks about, and a
    note on where it comes from."""
    know = knowledge()
    if name in know.interconnect_attributes and (info is None or info.can_have(domain, name)):
        return f"{domain}/{name}", ""  # the selector reads a domain id itself: match on it
    lowered = name.lower()
    if info is None:
        standard = "resource.kubernetes.io/numaNode" if "numa" in lowered else STANDARD_PCIE_ROOT
        return standard, " (if the class's driver publishes it)"
    for words, candidates in _FAMILIES:
        if any(w in lowered for w in words):
            found = _published_domain_attribute(info, candidates)
            if found:
                return found, f" (published by {info.name})"
            fallback = _published_domain_attribute(info, _ANY)
            if fallback:
                family = "NVLink" if words[0] == "nvlink" else words[0].upper()
                return fallback, (
                    f" ({info.name} publishes no {family} domain attribute; {fallback} is a domain it does "
                    "publish, and may be narrower: fewer devices share one)"
                )
    found = _published_domain_attribute(info, _ANY)
    if found:
        return found, f" (published by {info.name})"
    return (
        f"{info.name}/<domain attribute>",
        f" ({info.name} publishes no domain attribute known to draguard: look for one in its ResourceSlices)",
    )


@rule(
    id="topology-by-selector",
    severity=Severity.WARNING,
    statement="A multi-device claim whose topology is stated only by a per-device CEL selector also has the "
    "matchAttribute constraint that makes its devices share a domain.",
    fix="Add spec.devices.constraints: [{requests: [...], matchAttribute: <domain attribute>}] (the message "
    "names the attribute); keep the selector if it also filters devices.",
)
def check_selector_only(inv: Inventory) -> Iterator[Violation]:
    for claim in inv.claims:
        if not _needs_topology(claim):
            continue
        reads = _topology_reads(_selectors(inv, claim))
        if not reads:
            continue  # multi-device-topology reports it
        info = _driver_info(inv, claim)
        names = ", ".join(r.name for r in claim.requests)
        for ref, attrs in reads:
            domain, name = attrs[0]
            read = ", ".join(f"{d}/{n}" for d, n in attrs)
            attribute, note = suggested_attribute(info, domain, name)
            yield Violation(
                ref.at,
                f"{claim.kind} {claim.name or '(unnamed)'}: the CEL selector reads {read} as the topology "
                "statement, but a selector judges each device alone: it does not make the devices share a domain "
                "(at most it pins each device to a fixed value); the constraint "
                f"`constraints: [{{requests: [{names}], matchAttribute: {attribute}}}]` would{note}",
            )
