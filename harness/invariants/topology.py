"""``topology``: allocated devices satisfy the claim's CEL selectors (DeviceClass and request) and its
``matchAttribute``/``distinctAttribute`` constraints, re-evaluated against the ResourceSlices.

A device is judged as published now or, when its slice has gone since (a restarted kubelet deletes
its node's slices until the drivers register again), as it was last published in the run: the
allocation was made from that. An allocated device that no slice published at any time the run saw
is a violation."""

from __future__ import annotations

from draguard.harness.invariants.selection import base_request, match, request_spec, requests_of, selectors_for
from draguard.harness.invariants.snapshot import DeviceId, Obj, Snapshot, allocation_results, attribute, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check"]

NAME = "topology"


def _constraints(snapshot: Snapshot, claim: Obj, this: str) -> list[Violation]:
    out: list[Violation] = []
    results = allocation_results(claim)
    all_requests = [r.get("name", "") for r in requests_of(claim)]
    constraints = ((claim.get("spec") or {}).get("devices") or {}).get("constraints") or ()
    for constraint in constraints:
        covered = set(constraint.get("requests") or all_requests)
        values: list[tuple[DeviceId, object]] = []
        for result in results:
            name = result.get("request", "")
            if name not in covered and base_request(name) not in covered:
                continue
            device_id = DeviceId(result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            device = snapshot.device(device_id)
            if device is None:
                continue  # reported by the selector pass
            attr = constraint.get("matchAttribute") or constraint.get("distinctAttribute") or ""
            values.append((device_id, attribute(device, attr, device_id.driver)))
        devices = tuple(str(d) for d, _ in values)
        if constraint.get("matchAttribute"):
            attr = constraint["matchAttribute"]
            missing = [str(d) for d, v in values if v is None]
            distinct = {v for _, v in values if v is not None}
            if missing:
                out.append(Violation(NAME, f"{this}: matchAttribute {attr}: device(s) {', '.join(missing)} lack the "
                                     "attribute", (this,), devices, snapshot.time))  # fmt: skip
            elif len(distinct) > 1:
                shown = ", ".join(f"{d.device}={v!r}" for d, v in values)
                out.append(Violation(NAME, f"{this}: matchAttribute {attr} differs across devices ({shown})",
                                     (this,), devices, snapshot.time))  # fmt: skip
        elif constraint.get("distinctAttribute"):
            attr = constraint["distinctAttribute"]
            seen: dict[object, DeviceId] = {}
            for device_id, value in values:
                if value is None:
                    out.append(Violation(NAME, f"{this}: distinctAttribute {attr}: device {device_id} lacks the "
                                         "attribute", (this,), devices, snapshot.time))  # fmt: skip
                elif value in seen:
                    out.append(Violation(NAME, f"{this}: distinctAttribute {attr}: devices {seen[value].device} and "
                                         f"{device_id.device} share the value {value!r}", (this,), devices,
                                         snapshot.time))  # fmt: skip
                else:
                    seen[value] = device_id
    return out


@INVARIANTS.register(NAME, summary="Allocated devices satisfy the claim's CEL selectors and constraints, "
                     "re-evaluated against the ResourceSlices.", judged="continuously")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for claim in snapshot.claims:
        results = allocation_results(claim)
        if not results:
            continue
        this = ref("ResourceClaim", claim)
        for result in results:
            device_id = DeviceId(result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            device = snapshot.device(device_id)
            if device is None:
                out.append(Violation(NAME, f"{this}: allocated device {device_id} is not published in any "
                                     "ResourceSlice, and was not earlier in the run", (this,), (str(device_id),),
                                     snapshot.time))  # fmt: skip
                continue
            spec = request_spec(claim, result.get("request", ""))
            if spec is None:
                continue  # claim-atomic reports results for unknown requests
            for where, expression in selectors_for(snapshot, spec):
                ok, error = match(expression, device, device_id.driver)
                if error is not None:
                    message = f"{this}: selector of {where} fails on device {device_id}: {error}"
                elif not ok:
                    message = f"{this}: device {device_id} does not match the selector of {where}: {expression}"
                else:
                    continue
                out.append(Violation(NAME, message, (this,), (str(device_id),), snapshot.time))
        out += _constraints(snapshot, claim, this)
    return out
