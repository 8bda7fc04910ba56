"""``prepare-idempotent``: a repeated prepare of a prepared claim answers as the first one did.

The kubelet prepares a claim again whenever it cannot know that the driver did: after it restarted,
after a call that timed out, for every pod of a claim they share (``pkg/kubelet/cm/dra/manager.go``
prepares the claims of each pod it syncs), and the DRA kubelet plugin API asks the driver to make
``NodePrepareResources`` idempotent (``k8s.io/kubelet/pkg/apis/dra/v1/api.proto``: "the kubelet may
call it multiple times for the same claim"). A driver that answers a second prepare with an error
("already prepared"), or with other devices or CDI IDs, leaves the pod that needs the claim unable
to start, or gives its containers devices other than the ones it first named.

Judged from the gRPC interposer's record (:mod:`.calls`), for any driver: a prepare of a claim the
driver had prepared (no successful unprepare since) must succeed for that claim; when the record
carries the answers (:attr:`DriverCall.answers`) it must name the same devices with the same CDI IDs.
Not a breach: an outcome that is not the driver's answer (:func:`.calls.drivers_answer`), and a call
that failed as a whole while it also carried claims that were not prepared (the failure may be theirs;
``per-claim-errors`` judges a call failed as a whole).
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import PREPARE, claim_failed, drivers_answer, replay
from draguard.harness.invariants.snapshot import PreparedDevice, Snapshot
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "check"]

NAME = "prepare-idempotent"


def _describe(devices: tuple[PreparedDevice, ...]) -> str:
    return ", ".join(f"{d.pool}/{d.device} [{' '.join(d.cdi_ids) or 'no CDI IDs'}]" for d in devices) or "no devices"


def _key(devices: tuple[PreparedDevice, ...]) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(d.pool, d.device, tuple(sorted(d.cdi_ids))) for d in devices}


@INVARIANTS.register(NAME, summary="A repeated prepare of a prepared claim succeeds and answers the same devices and "
                     "CDI IDs as the first.", judged="continuously", needs=("interposer",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for call, history in replay(snapshot):
        if call.method != PREPARE or not drivers_answer(call):
            continue
        states = {uid: history.state(call, uid) for _, _, uid in call.claims}
        whole_call_is_theirs = call.status != "OK" and not all(st.prepared for st in states.values())
        for namespace, name, uid in call.claims:
            st = states[uid]
            if not st.prepared or whole_call_is_theirs:
                continue
            failed = claim_failed(call, uid)
            where = f"{call.driver} on {call.node}"
            first = f"prepared at {st.prepared_at:.1f}s" + (f" with {_describe(st.answer)}" if st.answer is not None else "")
            if failed is not None:
                message = (f"{where} failed a repeated prepare of ResourceClaim {namespace}/{name} ({first}) at "
                           f"{call.time:.1f}s: {failed}; a prepare of a prepared claim must answer as the first one")
            elif st.answer is not None and call.answers is not None and _key(st.answer) != _key(call.answers.get(uid, ())):
                message = (f"{where} answered a repeated prepare of ResourceClaim {namespace}/{name} at {call.time:.1f}s "
                           f"with {_describe(call.answers.get(uid, ()))}; the first prepare ({first}) named others")
            else:
                continue
            devices = {f"{call.driver}/{d.pool}/{d.device}" for d in (st.answer or ()) + (call.answers or {}).get(uid, ())}
            out.append(Violation(NAME, message, (f"ResourceClaim/{namespace}/{name}",), tuple(sorted(devices)), call.time,
                                 key=f"{call.node}/{uid}"))
    return out
