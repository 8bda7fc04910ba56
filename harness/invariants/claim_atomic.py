"""``claim-atomic``: an allocated claim has every request satisfied in full, never a partial result."""

from __future__ import annotations

from collections import defaultdict

from draguard.harness.invariants.selection import base_request, match, requests_of, selectors_for
from draguard.harness.invariants.snapshot import DeviceId, Obj, Snapshot, allocation_results, is_allocated, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check"]

NAME = "claim-atomic"


def _all_matching(snapshot: Snapshot, spec: Obj, got: list[DeviceId]) -> int | None:
    """How many devices of the allocated pools match an ``All`` request (None if a selector fails)."""
    pools = {(d.driver, d.pool) for d in got}
    selectors = selectors_for(snapshot, spec)
    count = 0
    for device_id, device in snapshot.devices.items():
        if (device_id.driver, device_id.pool) not in pools:
            continue
        matched = True
        for _, expression in selectors:
            ok, error = match(expression, device, device_id.driver)
            if error is not None:
                return None
            matched = matched and ok
        count += matched
    return count


def _want(spec: Obj) -> tuple[str, int]:
    mode = spec.get("allocationMode") or "ExactCount"
    return mode, int(spec.get("count") or 1)


@INVARIANTS.register(NAME, summary="An allocated claim has every request satisfied in full (its count, or All); "
                     "never a partial result.", judged="continuously")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for claim in snapshot.claims:
        if not is_allocated(claim):
            continue
        this = ref("ResourceClaim", claim)
        results = allocation_results(claim)
        by_request: dict[str, list[Obj]] = defaultdict(list)
        for result in results:
            by_request[base_request(result.get("request", ""))].append(result)
        names = {r.get("name") for r in requests_of(claim)}
        for name in sorted(set(by_request) - names):
            devices = tuple(str(DeviceId(r.get("driver", ""), r.get("pool", ""), r.get("device", ""))) for r in by_request[name])
            out.append(Violation(NAME, f"{this}: allocation results name request {name!r}, which the claim does not have",
                                 (this,), devices, snapshot.time))  # fmt: skip
        for request in requests_of(claim):
            name = request.get("name", "")
            got = by_request.get(name, [])
            ids = [DeviceId(r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in got]
            devices = tuple(str(d) for d in ids)
            spec: Obj | None = request.get("exactly")
            if spec is None and request.get("firstAvailable"):
                subs = sorted({r.get("request", "").partition("/")[2] for r in got})
                if len(subs) > 1 or (subs and not subs[0]):
                    out.append(Violation(NAME, f"{this}: request {name!r} mixes sub-requests {subs} in one allocation",
                                         (this,), devices, snapshot.time))  # fmt: skip
                    continue
                spec = next((s for s in request["firstAvailable"] if subs and s.get("name") == subs[0]), None)
                if spec is None:
                    out.append(Violation(NAME, f"{this}: request {name!r} got no device from any firstAvailable entry",
                                         (this,), devices, snapshot.time))  # fmt: skip
                    continue
            if spec is None:
                continue
            mode, count = _want(spec)
            if mode == "All":
                if not got:
                    out.append(Violation(NAME, f"{this}: request {name!r} (allocationMode All) got no device",
                                         (this,), devices, snapshot.time))  # fmt: skip
                    continue
                total = _all_matching(snapshot, spec, ids)
                if total is not None and len(set(ids)) < total:
                    out.append(Violation(NAME, f"{this}: request {name!r} (allocationMode All) got {len(set(ids))} of "
                                         f"the {total} matching devices of its pool: a partial result",
                                         (this,), devices, snapshot.time))  # fmt: skip
            elif len(got) != count:
                out.append(Violation(NAME, f"{this}: request {name!r} wants {count} device(s), the allocation has "
                                     f"{len(got)}: a partial result", (this,), devices, snapshot.time))  # fmt: skip
    return out
