"""Shared reading of claims for the invariants: which request a result answers, and whether a
device matches a request's CEL selectors (through :mod:`draguard.harness.cel`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from draguard.harness.cel import CelError, Selector, compile_selector
from draguard.harness.invariants.snapshot import Obj, Snapshot

__all__ = ["requests_of", "request_spec", "base_request", "selectors_for", "match", "opaque_configs"]


def requests_of(claim: Obj) -> list[Obj]:
    """``spec.devices.requests`` of a claim."""
    return list(((claim.get("spec") or {}).get("devices") or {}).get("requests") or [])


def base_request(name: str) -> str:
    """``"gpu/h100"`` -> ``"gpu"``: the claim request a (sub)request result belongs to."""
    return name.split("/", 1)[0]


def request_spec(claim: Obj, result_request: str) -> Obj | None:
    """The exact request or sub-request (``<req>/<sub>``) a result names, or None if the claim has none."""
    base, _, sub = result_request.partition("/")
    for request in requests_of(claim):
        if request.get("name") != base:
            continue
        if not sub:
            exactly: Obj | None = request.get("exactly")
            return exactly
        for candidate in request.get("firstAvailable") or ():
            if candidate.get("name") == sub:
                found: Obj = candidate
                return found
    return None


def selectors_for(snapshot: Snapshot, spec: Obj) -> list[tuple[str, str]]:
    """(where, CEL expression) for the DeviceClass's selectors and then the request's own."""
    out: list[tuple[str, str]] = []
    cls = snapshot.classes.get(spec.get("deviceClassName", ""))
    if cls is not None:
        for sel in (cls.get("spec") or {}).get("selectors") or ():
            out.append((f"DeviceClass {cls['metadata']['name']}", ((sel.get("cel") or {}).get("expression") or "")))
    for sel in spec.get("selectors") or ():
        out.append(("the request", (sel.get("cel") or {}).get("expression") or ""))
    return out


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> Selector:
    return compile_selector(expression)


def match(expression: str, device: Obj, driver: str) -> tuple[bool, str | None]:
    """(matches, error message or None). A compile or evaluation error counts as no match."""
    try:
        return _compiled(expression).evaluate(device, driver), None
    except CelError as exc:
        return False, str(exc)


def opaque_configs(claim: Obj) -> Iterable[tuple[list[str], Obj]]:
    """(requests, opaque) of every configuration that applies to a claim: from its allocation (class
    and claim config, as the scheduler recorded them) and from its spec."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for config in (allocation.get("devices") or {}).get("config") or ():
        yield list(config.get("requests") or []), config.get("opaque") or {}
    for config in ((claim.get("spec") or {}).get("devices") or {}).get("config") or ():
        yield list(config.get("requests") or []), config.get("opaque") or {}


