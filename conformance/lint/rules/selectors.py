"""Rules on CEL device selectors: they compile, and read only attributes their devices can have.

A selector that does not compile is rejected by the API server; one that reads an attribute the
class's driver never publishes fails at allocation time with "no such key" (an unknown domain reads
as an empty map), so the pod stays Pending with a message far from the manifest. Which attributes
each driver publishes is data: devices.yaml.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from draguard.harness.cel import CelError, compile_selector

from ..inventory import Inventory, SelectorRef
from ..knowledge import knowledge
from ..registry import Severity, Violation, rule


def _all_selectors(inv: Inventory) -> Iterator[tuple[SelectorRef, str | None, str, tuple[str, ...]]]:
    """Every selector, the one driver its devices come from (when known), what holds it, and the
    expressions that may pick a device type: its own and its class's."""
    for defined in inv.classes.values():
        drivers = defined.drivers
        driver = next(iter(drivers)) if len(drivers) == 1 else None
        own = tuple(r.expression for r in defined.selectors) + (f"class:{defined.name}",)
        for ref in defined.selectors:
            yield ref, driver, f"DeviceClass {defined.name}", own
    for claim in inv.claims:
        for request in claim.requests:
            for alt in request.alternatives:
                cls = inv.classes.get(alt.class_name or "")
                around = tuple(r.expression for r in alt.selectors) + (
                    tuple(r.expression for r in cls.selectors) if cls is not None else ())
                for ref in alt.selectors:
                    yield (ref, inv.class_driver(alt.class_name), f"{claim.kind} {claim.name} request {alt.request}",
                           around + (f"class:{alt.class_name}",))  # fmt: skip


def _device_type(driver: str, context: tuple[str, ...]) -> str | None:
    """The ``type`` of device the selectors pick (``device.attributes["gpu.nvidia.com"].type == "mig"``),
    or the type a well-known class name stands for; None when nothing says."""
    pattern = re.compile(r"""attributes\[\s*["']""" + re.escape(driver) + r"""["']\s*\]\s*\.\s*type\s*==\s*["'](\w+)["']""")
    for expression in context:
        if expression.startswith("class:"):
            found = knowledge().class_types.get(expression[len("class:"):])
        else:
            match = pattern.search(expression)
            found = match.group(1) if match else None
        if found:
            return found
    return None


@rule(
    id="cel-compile",
    severity=Severity.ERROR,
    statement="Every CEL device selector compiles and evaluates to bool.",
    fix="Correct the expression; device fields are driver, attributes[domain].name, capacity[domain].name "
    "(compare with .compareTo(quantity(...))) and allowMultipleAllocations.",
)
def check_compiles(inv: Inventory) -> Iterator[Violation]:
    for ref, _, holder, _ in _all_selectors(inv):
        try:
            compile_selector(ref.expression)
        except CelError as exc:
            yield Violation(ref.at, f"{holder}: CEL selector does not compile: {exc.message}")


@rule(
    id="cel-attribute",
    severity=Severity.ERROR,
    statement="A CEL selector reads only attributes and capacities that its device class's devices can have.",
    fix="Use an attribute the driver publishes (see the driver's ResourceSlices), or guard the read with "
    "has() or .?name.orValue(...).",
)
def check_attributes(inv: Inventory) -> Iterator[Violation]:
    know = knowledge()
    for ref, driver, holder, context in _all_selectors(inv):
        info = know.drivers.get(driver or "")
        if info is None:
            continue
        try:
            selector = compile_selector(ref.expression)
        except CelError:
            continue  # cel-compile reports it
        guarded = set(_guarded_names(ref.expression))
        bad = sorted(
            f'device.attributes["{domain}"].{name}'
            for domain, name in selector.attribute_refs
            if not info.can_have(domain, name) and name not in guarded
        )
        bad += sorted(
            f'device.capacity["{domain}"].{name}'
            for domain, name in selector.capacity_refs
            if not (domain == info.name and name in info.capacity) and name not in guarded
        )
        if bad:
            device_type = _device_type(info.name, context) if info.types else None
            kind = f"{device_type} " if device_type in info.types else ""
            yield Violation(
                ref.at,
                f"{holder}: CEL selector reads {', '.join(bad)}, which devices of driver {info.name} do not have; "
                f"{info.name} {kind}devices publish the attributes {info.published(device_type)}"
                + (
                    f" and the capacities {info.name}/{{{', '.join(sorted(info.capacity))}}}"
                    if any(b.startswith("device.capacity") for b in bad)
                    else ""
                ),
            )


def _guarded_names(expression: str) -> Iterator[str]:
    """Names read with has(...) or the optional .?name: reading them is safe even when absent."""
    yield from re.findall(r"has\([^()]*\.\s*(\w+)\s*\)", expression)
    yield from re.findall(r"\.\?\s*(\w+)", expression)
