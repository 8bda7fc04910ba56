"""``gang-atomic``: after settling, a gang is all bound with all claims allocated, or holds no device.

A partial gang (some members hold devices while others cannot start) is the ingredient of a
deadlock between gangs; the violation names the members and devices it holds.
"""

from __future__ import annotations

from draguard.harness.invariants.snapshot import (
    DeviceId,
    Obj,
    Snapshot,
    allocation_results,
    is_allocated,
    pod_claims,
    ref,
)
from draguard.harness.invariants.violation import Violation
from draguard.harness.registry import INVARIANTS

__all__ = ["NAME", "check"]

NAME = "gang-atomic"


@INVARIANTS.register(NAME, summary="After the settle time, a gang is all bound with all claims allocated, "
                     "or holds no device at all.")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for gang in snapshot.gangs:
        if not gang.settled:
            continue
        complete = 0
        holders: list[str] = []
        claims: dict[str, Obj] = {}
        for member in gang.members:
            pod = snapshot.pods_by_name.get((gang.namespace, member))
            if pod is None:
                continue
            entries = pod_claims(pod, snapshot)
            allocated = [c for _, c in entries if c is not None and is_allocated(c)]
            bound = bool((pod.get("spec") or {}).get("nodeName"))
            if bound and len(entries) >= gang.claims_per_member and len(allocated) == len(entries):
                complete += 1
            if allocated or bound:
                holders.append(ref("Pod", pod))
            for claim in allocated:
                claims[ref("ResourceClaim", claim)] = claim
        devices = sorted({
            str(DeviceId(r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
            for claim in claims.values() for r in allocation_results(claim)
        })  # fmt: skip
        if complete == len(gang.members) or not devices:
            continue
        out.append(Violation(
            NAME,
            f"gang {gang.namespace}/{gang.workload} is partial after settling: {complete} of {len(gang.members)} "
            f"members bound with all claims allocated, yet it holds {len(devices)} device(s) "
            f"({len(holders)} member(s) hold resources): a deadlock ingredient",
            tuple(holders) + tuple(sorted(claims)),
            tuple(devices),
            snapshot.time,
        ))  # fmt: skip
    return out
