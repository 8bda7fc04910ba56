"""``prepared-devices-allocated``: the devices a driver answers at prepare are the ones allocated.

The scheduler allocates a claim (``status.allocation.devices.results``: request, driver, pool,
device); the driver's ``NodePrepareResources`` answers, per claim, the devices it prepared with their
CDI IDs (``Device``: request names, pool, device; ``k8s.io/kubelet/pkg/apis/dra/v1/api.proto``), and
the kubelet hands those CDI IDs to the container runtime. A driver that answers another device than
the allocation names gives the container a device the API still counts as free, or one allocated
to another claim, while the allocated one sits idle.

Judged from the gRPC interposer's record of the answers (:attr:`DriverCall.answers`), for any
driver, on each claim a driver holds prepared on a node (:func:`.calls.history_of`: its last
successful prepare there, no successful unprepare since): every device that prepare answered must be
among the claim's allocation results of that driver (same pool and device; the request names it
lists, when it lists any, must be requests that device was allocated for, a sub-request counting for
its request), and every allocated device of that driver must be answered. Not judged: a claim no
longer in the API, no longer allocated, or now allocated for another node (``nodeSelector`` naming
other nodes: the allocation it was prepared for is gone, and releasing it on the old node is
no-leak's to judge); a prepare the record has no answer for. A claim prepared and unprepared
between two rounds of judging is not seen: the allocation it was prepared for may have changed since.
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import history_of
from draguard.harness.invariants.selection import base_request
from draguard.harness.invariants.snapshot import Obj, Snapshot, allocation_results
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "check"]

NAME = "prepared-devices-allocated"


def _allocated_elsewhere(claim: Obj, node: str) -> bool:
    """Whether the claim's allocation names its nodes by name, and ``node`` is not one of them."""
    terms = (((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}).get("nodeSelectorTerms")
    named: list[str] = []
    for term in terms or ():
        for f in term.get("matchFields") or ():
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                named += f.get("values") or []
    return bool(named) and node not in named


@INVARIANTS.register(NAME, summary="The devices a driver answers at prepare are exactly the devices the allocation "
                     "names for that claim and request.", judged="continuously",
                     needs=("interposer-answers",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    claims = {(c.get("metadata") or {}).get("uid"): c for c in snapshot.claims}
    out: list[Violation] = []
    for (node, driver, uid), st in history_of(snapshot).states.items():
        call, answered = st.prepared_by, st.answer
        claim = claims.get(uid)
        if not st.prepared or call is None or answered is None or claim is None or _allocated_elsewhere(claim, node):
            continue
        allocated: dict[tuple[str, str], set[str]] = {}
        for r in allocation_results(claim):
            if r.get("driver") == driver:
                allocated.setdefault((r.get("pool", ""), r.get("device", "")), set()).add(str(r.get("request", "")))
        if not allocated:
            continue
        problems = []
        for d in answered:
            requests = allocated.get((d.pool, d.device))
            if requests is None:
                problems.append(f"answered {d.pool}/{d.device}, which the allocation does not name")
                continue
            wrong = [r for r in d.requests
                     if r not in requests and base_request(r) not in {base_request(q) for q in requests}]
            if wrong:
                problems.append(f"answered {d.pool}/{d.device} for request(s) {', '.join(wrong)}, but it was "
                                f"allocated for {', '.join(sorted(requests))}")
        missing = sorted(set(allocated) - {(d.pool, d.device) for d in answered})
        if missing:
            problems.append("did not answer allocated " + ", ".join(f"{p}/{d}" for p, d in missing))
        if not problems:
            continue
        namespace, name = next(((ns, n) for ns, n, u in call.claims if u == uid), ("", uid))
        devices = {f"{driver}/{p}/{d}" for p, d in allocated} | {f"{driver}/{d.pool}/{d.device}" for d in answered}
        out.append(Violation(
            NAME,
            f"{driver} on {node} prepared ResourceClaim {namespace}/{name} at {call.time:.1f}s and "
            + "; ".join(problems) + " (allocated: " + ", ".join(f"{p}/{d}" for p, d in sorted(allocated)) + ")",
            (f"ResourceClaim/{namespace}/{name}",), tuple(sorted(devices)), call.time,
            key=f"{node}/{uid}"))
    return out
