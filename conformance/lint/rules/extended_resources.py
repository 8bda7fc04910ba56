"""Rules on accelerators requested as extended resources (device plugins) instead of DRA claims.

An extended resource is a bare count: it cannot ask for devices that share an interconnect, and
each replica grabs whatever is free. ResourceClaimTemplates can say which devices and how they
must relate.

In source code (a controller or an infrastructure program that builds pods) every accelerator
extended resource written as a request or limit is reported, whatever its count: the code builds as
many pods as it runs, which the linter cannot see, so "one device, one replica" cannot be shown.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from draguard.harness.cel import parse_quantity

from ..inventory import Inventory, PodTemplate
from ..knowledge import knowledge
from ..registry import Severity, Violation, rule
from ..document import Location

__all__ = ["accelerator_totals"]


def accelerator_totals(pod: PodTemplate) -> dict[str, tuple[Fraction, Location]]:
    """Accelerator extended resources one pod of ``pod`` needs, and where each is first written.

    Like the scheduler's effective request: the sum over containers, or the largest init
    container when that is larger.
    """
    know = knowledge()
    sums: dict[str, Fraction] = {}
    init_max: dict[str, Fraction] = {}
    where: dict[str, Location] = {}
    for kind, container in pod.containers():
        resources = container.get("resources")
        if not isinstance(resources, Mapping):
            continue
        amounts: dict[str, Fraction] = {}
        for section in ("limits", "requests"):
            values: Any = resources.get(section)
            if not isinstance(values, Mapping):
                continue
            for name, raw in values.items():
                if not isinstance(name, str) or not know.is_accelerator_resource(name):
                    continue
                try:
                    amount = parse_quantity(str(raw))
                except ValueError:
                    continue  # not a quantity: the API server rejects it, not a guardrail matter
                amounts[name] = max(amounts.get(name, Fraction(0)), amount)
                where.setdefault(name, pod.doc.at(values, name))
        for name, amount in amounts.items():
            if kind == "initContainers":
                init_max[name] = max(init_max.get(name, Fraction(0)), amount)
            else:
                sums[name] = sums.get(name, Fraction(0)) + amount
    totals = {}
    for name in sorted(set(sums) | set(init_max)):
        amount = max(sums.get(name, Fraction(0)), init_max.get(name, Fraction(0)))
        if amount > 0:
            totals[name] = (amount, where[name])
    return totals


def _count(amount: Fraction) -> str:
    return str(amount.numerator) if amount.denominator == 1 else str(float(amount))


def _amount(amount: Fraction | None) -> str:
    return "a count computed at run time" if amount is None else f"{_count(amount)} per pod"


@rule(
    id="accelerator-extended-resource",
    severity=Severity.ERROR,
    statement="Accelerators requested as extended resources are one per pod, in single-replica workloads, "
    "and never in pods built by code.",
    fix="Request the devices through a ResourceClaimTemplate (pod.spec.resourceClaims and "
    "resources.claims), which can ask for a count and constrain their topology.",
)
def check_extended_resource_count(inv: Inventory) -> Iterator[Violation]:
    for pod in inv.pods:
        for name, (amount, at) in accelerator_totals(pod).items():
            if amount > 1:
                yield Violation(
                    at,
                    f"{pod.owner} asks for {_count(amount)} {name} per pod as an extended resource: the "
                    "scheduler picks any free devices, with no regard to how they are connected",
                )
                break
            if pod.replicas > 1:
                yield Violation(
                    at,
                    f"{pod.owner} runs {pod.replicas} replicas that each ask for {name} as an extended "
                    "resource: each replica takes whatever device is free, with no shared topology",
                )
                break
    for code in inv.code:
        for use in code.resource_uses:
            yield Violation(
                use.at,
                f"{code.language} code requests {use.name} as an extended resource ({use.spelling}, "
                f"{_amount(use.amount)}): pods built in code are as many as the code makes, and each takes "
                "whatever devices are free, with no regard to how they are connected",
            )


@rule(
    id="accelerator-mixed-requests",
    severity=Severity.ERROR,
    statement="A pod does not request accelerators both as extended resources and through DRA claims.",
    fix="Move the extended-resource accelerators into the pod's ResourceClaims (or drop the claims), "
    "so one allocator sees every device the pod uses.",
)
def check_mixed_requests(inv: Inventory) -> Iterator[Violation]:
    for pod in inv.pods:
        refs = pod.claim_refs()
        totals = accelerator_totals(pod)
        if refs and totals:
            names = ", ".join(totals)
            yield Violation(
                refs[0].at,
                f"{pod.owner} uses DRA claims and also the extended resource(s) {names}: the device "
                "plugin and the DRA driver allocate independently and may hand out related devices twice",
            )
    for code in inv.code:
        for spec in code.pod_specs:
            names = ", ".join(dict.fromkeys(u.name for u in spec.uses))
            lines = ", ".join(dict.fromkeys(str(u.at.line) for u in spec.uses))
            yield Violation(
                spec.at,
                f"{code.language} code builds a pod spec with resourceClaims and also the extended resource(s) "
                f"{names} (line {lines}): the device plugin and the DRA driver allocate independently and may "
                "hand out related devices twice",
            )
