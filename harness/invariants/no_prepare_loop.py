"""``no-prepare-loop``: a prepare does not keep failing for a pod that should run.

A failed ``NodePrepareResources`` is retried: the kubelet records ``FailedPrepareDynamicResources``
and syncs the pod again with back-off (``pkg/kubelet/cm/dra/manager.go``). A transient failure ends
in a success; a driver that fails every retry (it refuses to re-prepare a claim it already holds, it
lost state it needs) leaves the pod Pending for ever, and a run only saw that as a settle timeout,
or not at all when no progress was expected of that pod.

Judged from the gRPC interposer's record (:mod:`.calls`), for any driver: a claim whose prepare the
driver failed :data:`MIN_FAILURES` times in a row on one node over at least :data:`MIN_SECONDS`, with
no success since, while a pod that should run (it exists, is not being deleted, has not finished, and
is bound to that node) still has it reserved, is a violation. Not counted: outcomes that are not the
driver's answer (the driver down, the caller gave up, the interposer's own faults), so a driver kept
down by a scenario is not blamed for it.
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import PREPARE, UNPREPARE, ClaimHistory
from draguard.harness.invariants.snapshot import Obj, Snapshot, pod_is_live
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "MIN_FAILURES", "MIN_SECONDS", "check"]

NAME = "no-prepare-loop"

MIN_FAILURES = 5
"""Failed prepares in a row. The fake node agent retries after 0.5, 1, 2, 4, 8 and then every 10 s; a
kubelet's pod back-off is longer: five failures are past any transient fault a scenario injects."""

MIN_SECONDS = 30.0
"""Seconds from the first to the last of them: a burst of quick retries is not yet a loop."""


def _waiting_pods(claim: Obj, node: str, pods: dict[str, Obj]) -> list[Obj]:
    """The pods that should run with ``claim`` on ``node``: reserved, present, not deleting, not finished."""
    out = []
    for consumer in (claim.get("status") or {}).get("reservedFor") or ():
        pod = pods.get(consumer.get("uid", ""))
        if (pod is not None and consumer.get("resource") == "pods" and pod_is_live(pod)
                and not (pod.get("metadata") or {}).get("deletionTimestamp")
                and (pod.get("spec") or {}).get("nodeName") == node):
            out.append(pod)
    return out


@INVARIANTS.register(NAME, summary="A prepare does not keep failing for a pod that should run: the driver's "
                     f"failures of one claim stop within {MIN_FAILURES} retries or {MIN_SECONDS:g}s.",
                     judged="continuously", needs=("interposer",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    history = ClaimHistory()
    for call in snapshot.driver_calls:
        if call.method in (PREPARE, UNPREPARE):
            history.advance(call)
    claims = {(c.get("metadata") or {}).get("uid"): c for c in snapshot.claims}
    pods = {str((p.get("metadata") or {}).get("uid", "")): p for p in snapshot.pods}
    out: list[Violation] = []
    for (node, driver, uid), st in history.states.items():
        if st.prepared or len(st.failures) < MIN_FAILURES:
            continue
        first, last = st.failures[0], st.failures[-1]
        claim = claims.get(uid)
        if last.time - first.time < MIN_SECONDS or claim is None:
            continue
        waiting = _waiting_pods(claim, node, pods)
        if not waiting:
            continue
        meta = claim.get("metadata") or {}
        errors = dict.fromkeys(f"{c.claim_errors.get(uid) or c.status + ': ' + c.error}" for c in st.failures)
        out.append(Violation(
            NAME,
            f"{driver} on {node} failed the prepare of ResourceClaim {meta.get('namespace')}/{meta.get('name')} "
            f"{len(st.failures)} times in a row from {first.time:.1f}s to {last.time:.1f}s while pod(s) "
            + ", ".join(f"{(p.get('metadata') or {}).get('name')}" for p in waiting)
            + f" waited to run on it: {'; '.join(list(errors)[:3])}",
            (f"ResourceClaim/{meta.get('namespace')}/{meta.get('name')}",
             *(f"Pod/{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}"
               for p in waiting)),
            (), first.time, key=f"{node}/{uid}"))
    return out
