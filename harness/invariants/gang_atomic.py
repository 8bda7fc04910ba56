"""``gang-atomic``: a gang is all bound with its claims allocated (at least ``minCount`` members), or
holds no device; a gang partial for longer than its grace period is a violation.

A partial gang (some members hold devices while too few can start) is the ingredient of a deadlock
between gangs. Judged continuously: while the run goes on a gang may be partial for its grace
period (pods bind one by one), counted once all its pods were created; once the scenario settled, any
partial gang is a violation. The
violation names the members and devices it holds, and the runner reports it from the time it started.
"""

from __future__ import annotations

from draguard.harness.invariants.snapshot import (
    DeviceId,
    Gang,
    Obj,
    Snapshot,
    allocation_results,
    is_allocated,
    pod_claims,
    ref,
)
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check"]

NAME = "gang-atomic"


@INVARIANTS.register(NAME, summary="A gang is all bound with all claims allocated (at least minCount members), "
                     "or holds no device; partial for longer than its grace period is a violation.",
                     judged="continuously")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for gang in snapshot.gangs:
        if not gang.created and not gang.settled:  # still being created by the harness: not a gang yet
            continue
        need = gang.min_count if gang.min_count is not None else len(gang.members)
        members = []
        complete, holds = 0, False
        for pod in _pods(gang, snapshot):
            entries = pod_claims(pod, snapshot)
            allocated = [c for _, c in entries if c is not None and is_allocated(c)]
            if len(allocated) == len(entries) >= gang.claims_per_member and _bound(pod):
                complete += 1
            if allocated and not holds:
                holds = any(allocation_results(c) for c in allocated)
            members.append((pod, allocated))
        if complete >= need or not holds:
            continue  # the common case, judged without naming anything (5000 members, twice a second)
        out.append(_partial(gang, snapshot, members, complete, need))
    return out


def _pods(gang: Gang, snapshot: Snapshot) -> list[Obj]:
    found = (snapshot.pods_by_name.get((gang.namespace, member)) for member in gang.members)
    return [pod for pod in found if pod is not None]


def _bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _partial(gang: Gang, snapshot: Snapshot, members: list[tuple[Obj, list[Obj]]], complete: int,
             need: int) -> Violation:
    """The violation of a partial gang, naming the members and claims that hold resources and their devices
    (``members``: each member pod with its allocated claims)."""
    holders: list[str] = []
    claims: dict[str, Obj] = {}
    for pod, allocated in members:
        if allocated or _bound(pod):
            holders.append(ref("Pod", pod))
        for claim in allocated:
            claims[ref("ResourceClaim", claim)] = claim
    devices = sorted({
        str(DeviceId(r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
        for claim in claims.values() for r in allocation_results(claim)
    })  # fmt: skip
    when = "after settling" if gang.settled else f"for more than {gang.grace:.0f}s"
    return Violation(
        NAME,
        f"gang {gang.namespace}/{gang.workload} is partial {when}: {complete} of {len(gang.members)} "
        f"members bound with all claims allocated (it needs {need}), yet it holds {len(devices)} device(s) "
        f"({len(holders)} member(s) hold resources): a deadlock ingredient",
        tuple(holders) + tuple(sorted(claims)),
        tuple(devices),
        snapshot.time,
        key=f"gang {gang.namespace}/{gang.workload} partial",
        grace=0.0 if gang.settled else gang.grace,
    )
