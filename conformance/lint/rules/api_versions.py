"""Rules: resource.k8s.io API versions that the target Kubernetes release deprecates or no longer serves.

Facts from shared/reference/dra-facts.md §1.1 (k8s.io/api zz_generated.prerelease-lifecycle.go):
v1 is GA since 1.34; v1beta1 is deprecated in 1.35 and removed in 1.38; v1beta2 is deprecated in
1.36 and removed in 1.39; v1alpha3 serves only DeviceTaintRule from 1.34 on (deprecated in 1.36);
v1alpha2 went away in 1.31.

The same rules read group/versions written in source code (a ``"resource.k8s.io/v1beta1"`` string,
a Go import of ``k8s.io/api/resource/v1beta1``): judged for the kinds the code uses them for, or,
when it does not say, for the claim and class kinds (the only ones v1alpha3 ever stopped serving).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..inventory import RESOURCE_GROUP, Inventory
from ..registry import Severity, Violation, rule
from ..document import Location

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


@dataclass(frozen=True)
class Versioned:
    """One use of a resource.k8s.io version: an object's apiVersion, or a group/version in code."""

    at: Location
    what: str
    """``resource.k8s.io/v1beta1 ResourceClaim``, ``... in Go code (import "k8s.io/api/resource/v1beta1")``."""
    kind: str
    life: Lifecycle


_UNSAID = "ResourceClaim"
"""The kind judged for a version whose kind the code does not say: the claim kinds' lifecycle."""


def _versioned(inv: Inventory) -> Iterator[Versioned]:
    for doc in inv.documents:
        if doc.group == RESOURCE_GROUP and doc.kind:
            life = _lifecycle(doc.version, doc.kind)
            if life is not None:
                yield Versioned(doc.value_at(doc.obj, "apiVersion"), f"{doc.api_version} {doc.kind}", doc.kind, life)
    target = inv.target_release
    for code in inv.code:
        for use in code.versions:
            judged = [(k, _lifecycle(use.version, k)) for k in (use.kinds or (_UNSAID,))]
            known = [(k, life) for k, life in judged if life is not None]
            if not known:
                continue
            # the worst verdict among the kinds the code uses the version for
            kind, life = max(known, key=lambda kl: _severity(kl[1], target))
            kinds = ", ".join(use.kinds) if use.kinds else "(kind not stated: judged as for ResourceClaim)"
            what = f"resource.k8s.io/{use.version} {kinds} in {code.language} code ({use.spelling})"
            yield Versioned(use.at, what, kind, life)


def _severity(life: Lifecycle, target: Release) -> int:
    if life.removed is not None and target >= life.removed:
        return 2
    return 1 if life.deprecated is not None and target >= life.deprecated else 0


@rule(
    id="dra-api-removed",
    severity=Severity.ERROR,
    statement="No object, and no code, uses a resource.k8s.io version that the target release no longer serves.",
    fix="Rewrite the object for resource.k8s.io/v1 (or the version the message names).",
)
def check_removed(inv: Inventory) -> Iterator[Violation]:
    target = inv.target_release
    for v in _versioned(inv):
        if v.life.removed is not None and target >= v.life.removed:
            yield Violation(
                v.at,
                f"{v.what} was removed in Kubernetes {_release(v.life.removed)} "
                f"(target {_release(target)}); use {_replacement(v.kind, target)}",
            )


@rule(
    id="dra-api-deprecated",
    severity=Severity.WARNING,
    statement="No object, and no code, uses a resource.k8s.io version that the target release deprecates.",
    fix="Move the object to resource.k8s.io/v1 before the release that removes the version.",
)
def check_deprecated(inv: Inventory) -> Iterator[Violation]:
    target = inv.target_release
    for v in _versioned(inv):
        if v.life.removed is not None and target >= v.life.removed:
            continue  # dra-api-removed says it
        if v.life.deprecated is not None and target >= v.life.deprecated:
            gone = f" and goes away in {_release(v.life.removed)}" if v.life.removed else ""
            yield Violation(
                v.at,
                f"{v.what} is deprecated since Kubernetes {_release(v.life.deprecated)}"
                f"{gone}; use {_replacement(v.kind, target)}",
            )
