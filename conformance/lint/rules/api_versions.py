"""Rules: resource.k8s.io API versions that the target Kubernetes release deprecates or no longer serves.

Facts from shared/reference/dra-facts.md §1.1 (k8s.io/api zz_generated.prerelease-lifecycle.go):
v1 is GA since 1.34; v1beta1 is deprecated in 1.35 and removed in 1.38; v1beta2 is deprecated in
1.36 and removed in 1.39; v1alpha3 serves only DeviceTaintRule from 1.34 on (deprecated in 1.36);
v1alpha2 went away in 1.31.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..inventory import RESOURCE_GROUP, Inventory
from ..registry import Severity, Violation, rule
from ..source import Document

Release = tuple[int, int]

_CORE_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"})


@dataclass(frozen=True)
class Lifecycle:
    deprecated: Release | None
    removed: Release | None


def _lifecycle(version: str, kind: str) -> Lifecycle | None:
    if version == "v1alpha2":
        return Lifecycle(None, (1, 31))
    if version == "v1alpha3" and kind in _CORE_KINDS:
        return Lifecycle(None, (1, 34))
    if version == "v1alpha3" and kind == "DeviceTaintRule":
        return Lifecycle((1, 36), None)
    if version == "v1beta1" and kind in _CORE_KINDS:
        return Lifecycle((1, 35), (1, 38))
    if version == "v1beta2" and kind in _CORE_KINDS:
        return Lifecycle((1, 36), (1, 39))
    return None


def _release(r: Release) -> str:
    return f"{r[0]}.{r[1]}"


def _replacement(kind: str, target: Release) -> str:
    if kind == "DeviceTaintRule" and target < (1, 37):
        return "resource.k8s.io/v1beta2 (resource.k8s.io/v1 from 1.37)"
    if kind == "DeviceTaintRule":
        return "resource.k8s.io/v1"
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        return "resource.k8s.io/v1 (GA since 1.34; each request's fields move under `exactly:`)"
    return "resource.k8s.io/v1 (GA since 1.34)"


def _versioned(inv: Inventory) -> Iterator[tuple[Document, Lifecycle]]:
    for doc in inv.documents:
        if doc.group == RESOURCE_GROUP and doc.kind:
            life = _lifecycle(doc.version, doc.kind)
            if life is not None:
                yield doc, life


@rule(
    id="dra-api-removed",
    severity=Severity.ERROR,
    statement="No object uses a resource.k8s.io version that the target release no longer serves.",
    fix="Rewrite the object for resource.k8s.io/v1 (or the version the message names).",
)
def check_removed(inv: Inventory) -> Iterator[Violation]:
    target = inv.target_release
    for doc, life in _versioned(inv):
        if life.removed is not None and target >= life.removed:
            yield Violation(
                doc.value_at(doc.obj, "apiVersion"),
                f"{doc.api_version} {doc.kind} was removed in Kubernetes {_release(life.removed)} "
                f"(target {_release(target)}); use {_replacement(doc.kind, target)}",
            )


@rule(
    id="dra-api-deprecated",
    severity=Severity.WARNING,
    statement="No object uses a resource.k8s.io version that the target release deprecates.",
    fix="Move the object to resource.k8s.io/v1 before the release that removes the version.",
)
def check_deprecated(inv: Inventory) -> Iterator[Violation]:
    target = inv.target_release
    for doc, life in _versioned(inv):
        if life.removed is not None and target >= life.removed:
            continue  # dra-api-removed says it
        if life.deprecated is not None and target >= life.deprecated:
            gone = f" and goes away in {_release(life.removed)}" if life.removed else ""
            yield Violation(
                doc.value_at(doc.obj, "apiVersion"),
                f"{doc.api_version} {doc.kind} is deprecated since Kubernetes {_release(life.deprecated)}"
                f"{gone}; use {_replacement(doc.kind, target)}",
            )
