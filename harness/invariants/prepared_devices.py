"""``prepared-devices-allocated``: the devices a driver answers at prepare are the ones allocated.

The scheduler allocates a claim (``status.allocation.devices.results``: request, driver, pool,
device); the driver's ``NodePrepareResources`` answers, per claim, the devices it prepared with their
CDI IDs (``Device``: request names, pool, device; ``k8s.io/kubelet/pkg/apis/dra/v1/api.proto``), and
the kubelet hands those CDI IDs to the container runtime. A driver that answers another device than
the allocation names gives the container a device the API still counts as free, or one allocated
to another claim, while the allocated one sits idle.

Judged from the gRPC interposer's record of the answers (:attr:`DriverCall.answers`), for any
driver: every device the driver answered for a claim must be among the claim's allocation results of
that driver (same pool and device; the request names it lists, when it lists any, must be requests
that device was allocated for, a sub-request counting for its request), and every allocated device of
that driver must be answered. Not judged: a claim no longer in the API or no longer allocated (its
allocation cannot be compared), a call whose outcome is not the driver's answer.
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import PREPARE, claim_failed, drivers_answer
from draguard.harness.invariants.selection import base_request
from draguard.harness.invariants.snapshot import Snapshot, allocation_results
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "check"]

NAME = "prepared-devices-allocated"


@INVARIANTS.register(NAME, summary="The devices a driver answers at prepare are exactly the devices the allocation "
                     "names for that claim and request.", judged="continuously",
                     needs=("interposer-answers",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    claims = {(c.get("metadata") or {}).get("uid"): c for c in snapshot.claims}
    out: list[Violation] = []
    for call in snapshot.driver_calls:
        if call.method != PREPARE or call.answers is None or not drivers_answer(call):
            continue
        for namespace, name, uid in call.claims:
            claim = claims.get(uid)
            if claim is None or claim_failed(call, uid) is not None:
                continue
            allocated: dict[tuple[str, str], set[str]] = {}
            for r in allocation_results(claim):
                if r.get("driver") == call.driver:
                    allocated.setdefault((r.get("pool", ""), r.get("device", "")), set()).add(str(r.get("request", "")))
            if not allocated:
                continue
            answered = call.answers.get(uid, ())
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
            devices = {f"{call.driver}/{p}/{d}" for p, d in allocated} | {f"{call.driver}/{d.pool}/{d.device}"
                                                                          for d in answered}
            out.append(Violation(
                NAME,
                f"{call.driver} on {call.node} prepared ResourceClaim {namespace}/{name} at {call.time:.1f}s and "
                + "; ".join(problems) + " (allocated: " + ", ".join(f"{p}/{d}" for p, d in sorted(allocated)) + ")",
                (f"ResourceClaim/{namespace}/{name}",), tuple(sorted(devices)), call.time,
                key=f"{call.node}/{uid}"))
    return out
