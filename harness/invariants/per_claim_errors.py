"""``per-claim-errors``: a driver never fails a prepare or unprepare call of several claims as a whole.

NodePrepareResources and NodeUnprepareResources carry every claim of a pod for one driver (the
kubelet batches them per pod, ``pkg/kubelet/cm/dra/manager.go``), and answer one result per claim
(``claims`` map of NodePrepareResourcesResponse / NodeUnprepareResourcesResponse, each with its own
``error``; kubernetes/kubernetes#119012 made the API batched with per-claim results). A driver that
returns a gRPC error for the call instead (the guardrail's bad unprepare: ``return nil, err`` inside
the loop) throws away the results of the claims it did handle and never reaches the ones after the
failing claim: the kubelet must treat every claim of the call as failed, and a claim whose failure
persists strands the others with it (a device held for a pod that is gone).

Judged from the gRPC interposer's record (:attr:`Snapshot.driver_calls`), so it holds for any driver
and any caller (the fake nodes or a kubelet), whatever order the claims come in. Not a breach: a
call of one claim (it fails alone either way); a status that is not the driver's answer
(``UNAVAILABLE``, or a call cut by its connection: the driver was not there or died; ``DEADLINE_EXCEEDED``
and ``CANCELLED``: the caller gave up; a hung call is the business of the progress a scenario
expects); a failure the interposer injected itself.
"""

from __future__ import annotations

from draguard.harness.invariants.snapshot import DeviceId, DriverCall, Snapshot, allocation_results
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check", "NOT_THE_DRIVERS_ANSWER", "BATCHED_METHODS"]

NAME = "per-claim-errors"

BATCHED_METHODS = frozenset({"NodePrepareResources", "NodeUnprepareResources"})
"""The DRA methods that carry several claims and answer per claim."""

NOT_THE_DRIVERS_ANSWER = frozenset({"OK", "UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})
"""Call statuses that are no whole-call failure by the driver (success, no driver, caller gave up)."""


TRANSPORT_HINTS = ("RST_STREAM", "Socket closed", "Connection reset", "connection error", "Stream removed",
                   "failed to connect", "transport is closing")
"""Status details of a call cut by its connection (a driver process killed mid-call can end a call with
INTERNAL or UNKNOWN and these words, not UNAVAILABLE): no answer of the driver's either."""


def whole_call_failure(call: DriverCall) -> bool:
    """Whether the driver itself failed ``call``, a call of several claims, as a whole."""
    return (call.method in BATCHED_METHODS and len(call.claims) >= 2 and call.injected is None
            and call.status not in NOT_THE_DRIVERS_ANSWER
            and not any(hint.lower() in call.error.lower() for hint in TRANSPORT_HINTS))


@INVARIANTS.register(NAME, summary="A prepare or unprepare call of several claims is never failed as a whole by the "
                     "driver: each claim gets its own result, so one failing claim cannot strand the others.",
                     judged="continuously", needs=("interposer",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    claims_by_uid = {(c.get("metadata") or {}).get("uid"): c for c in snapshot.claims}
    out: list[Violation] = []
    for call in snapshot.driver_calls:
        if not whole_call_failure(call):
            continue
        objects: list[str] = []
        devices: list[str] = []
        for namespace, name, uid in call.claims:
            objects.append(f"ResourceClaim/{namespace}/{name}")
            claim = claims_by_uid.get(uid)
            if claim is None:
                continue
            for owner in (claim.get("metadata") or {}).get("ownerReferences") or ():
                if owner.get("kind") == "Pod":
                    objects.append(f"Pod/{namespace}/{owner.get('name', '?')}")
            devices.extend(str(DeviceId(r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
                           for r in allocation_results(claim))
        names = ", ".join(f"{ns}/{name}" for ns, name, _ in call.claims)
        out.append(Violation(
            NAME,
            f"{call.driver} on {call.node} failed {call.method} of {len(call.claims)} claims ({names}) as a whole "
            f"with {call.status}: {call.error or 'no details'}; each claim needs its own result, the claims it did "
            f"not fail are stranded with the one it did",
            tuple(dict.fromkeys(objects)), tuple(dict.fromkeys(devices)), call.time,
            key=f"{call.node}/{call.method}/{','.join(uid for _, _, uid in call.claims)}",
        ))
    return out
