"""Rule: a container uses only claims that its pod declares.

``resources.claims[].name`` must name an entry of ``pod.spec.resourceClaims``; the API server
rejects the pod otherwise, but only when a controller creates it, long after the apply.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..inventory import Inventory
from ..registry import Severity, Violation, rule


@rule(
    id="undeclared-claim",
    severity=Severity.ERROR,
    statement="A container uses only claims declared in its pod's spec.resourceClaims.",
    fix="Declare the claim in spec.resourceClaims (with a resourceClaimTemplateName or resourceClaimName), "
    "or correct the name in resources.claims.",
)
def check_declared(inv: Inventory) -> Iterator[Violation]:
    for pod in inv.pods:
        declared = {ref.name for ref in pod.claim_refs()}
        for _, container in pod.containers():
            resources = container.get("resources")
            claims = resources.get("claims") if isinstance(resources, Mapping) else None
            if not isinstance(claims, list):
                continue
            for i, entry in enumerate(claims):
                name = entry.get("name") if isinstance(entry, Mapping) else None
                if isinstance(name, str) and name not in declared:
                    known = ", ".join(sorted(declared)) or "none"
                    yield Violation(
                        pod.doc.at(claims, i),
                        f"{pod.owner} container {container.get('name', '?')} uses claim {name}, which the pod "
                        f"does not declare in spec.resourceClaims (declared: {known})",
                    )
