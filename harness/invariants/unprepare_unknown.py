"""``unprepare-unknown``: an unprepare of a claim the driver does not hold succeeds.

The kubelet unprepares a claim whenever it cannot know that the driver already did: after it
restarted, after a call that timed out, and for a claim whose prepare it never saw answered (the
DRA kubelet plugin API, ``k8s.io/kubelet/pkg/apis/dra/v1/api.proto``: unprepare "must be idempotent";
"the claim might not have been prepared"). A driver that answers such a call with an error ("unknown
claim") keeps the kubelet retrying for ever: the pod cannot finish terminating and the claim is
never released for the next one.

Judged from the gRPC interposer's record (:mod:`.calls`), for any driver: an unprepare of a claim the
driver does not hold on that node must succeed for that claim: one never prepared there (a prepare
the interposer failed in the driver's place never reached it), one whose prepares the driver itself
failed, one an earlier unprepare already released. Not judged: a claim
with a prepare the driver did not answer since (it was down or crashed mid-call, the caller gave
up: it may hold part of it, and releasing that may fail for a reason of its own); an outcome that is
not the driver's answer; a call failed as a whole that also carried claims the driver held (the
failure may be theirs).
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import UNPREPARE, claim_failed, drivers_answer, replay
from draguard.harness.invariants.snapshot import Snapshot
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "check"]

NAME = "unprepare-unknown"


@INVARIANTS.register(NAME, summary="An unprepare of a claim the driver never prepared, or already unprepared, "
                     "succeeds.", judged="continuously", needs=("interposer",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for call, history in replay(snapshot):
        if call.method != UNPREPARE or not drivers_answer(call):
            continue
        states = {uid: history.state(call, uid) for _, _, uid in call.claims}
        unknown = {uid for uid, st in states.items() if not st.prepared and not st.uncertain}
        if call.status != "OK" and len(unknown) < len(states):
            continue  # failed as a whole, with a claim the driver held: the failure may be that one's
        for namespace, name, uid in call.claims:
            failed = claim_failed(call, uid)
            if uid not in unknown or failed is None:
                continue
            st = states[uid]
            what = ("already unprepared" if st.unprepared else "its prepare failed" if st.failures
                    else "never prepared on this node")
            out.append(Violation(
                NAME,
                f"{call.driver} on {call.node} failed the unprepare of ResourceClaim {namespace}/{name} ({what}) at "
                f"{call.time:.1f}s: {failed}; an unprepare of a claim the driver does not hold must succeed",
                (f"ResourceClaim/{namespace}/{name}",), (), call.time, key=f"{call.node}/{uid}"))
    return out
