"""``cdi-specs-resolve``: a prepared claim's CDI devices resolve on its node; an unprepared claim's do not.

A driver's ``NodePrepareResources`` answers, per claim, the devices it prepared with their fully
qualified CDI device IDs (``k8s.io/kubelet/pkg/apis/dra/v1/api.proto``: ``cdi_device_ids``); the
kubelet hands those IDs to the container runtime, which resolves each against the CDI specs of the node
(``tags.cncf.io/container-device-interface``: an ID no spec defines is "unresolvable" and the container
does not start). ``NodeUnprepareResources`` undoes the prepare, and the driver's CDI specs for the claim
go with it (the upstream test driver removes its file; a spec left behind is state that outlives the claim).

Judged for any driver from the gRPC interposer's record of the answers (:attr:`DriverCall.answers`) and
the node's CDI folder as the run read it (:attr:`NodeDriverState.cdi_devices`; not judged on a node whose
folder draguard cannot read):

- a claim the driver holds prepared (its last prepare succeeded for it, no unprepare succeeded since) has
  every CDI device ID of that answer defined, once, by a spec in the node's CDI folder;
- a claim whose unprepare succeeded has none of the IDs of its last prepare's answer still defined, unless
  a claim the driver holds prepared on that node was answered the same ID.

Both are judged only :data:`SETTLE` seconds after the call that made them so ended, so a spec written or
removed as the answer went out is never caught half-way. A reboot empties the node's CDI folder (tmpfs,
``/var/run/cdi``) while the driver's books keep the claim prepared; the kubelet prepares it again
(kubernetes/kubernetes PR #141966), so a prepare answered before the node's last reboot is not judged:
the prepare after it is.
"""

from __future__ import annotations

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants.calls import PREPARE, UNPREPARE, ClaimHistory
from draguard.harness.invariants.snapshot import DriverCall, PreparedDevice, Snapshot
from draguard.harness.invariants.violation import Violation

__all__ = ["NAME", "SETTLE", "check"]

NAME = "cdi-specs-resolve"

SETTLE = 2.0
"""Seconds after a call's answer before the CDI folder must show its effect."""

_Key = tuple[str, str, str]


def _ids(answer: tuple[PreparedDevice, ...]) -> list[str]:
    return list(dict.fromkeys(i for d in answer for i in d.cdi_ids))


def _ended(call: DriverCall) -> float:
    end = call.end
    return call.time if end is None else end


@INVARIANTS.register(NAME, summary="Every CDI device ID a driver answered for a claim it holds prepared resolves to "
                     "a CDI spec on its node, and none of them does once the claim is unprepared.",
                     judged="continuously", needs=("interposer-answers",))  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    folders = {(s.node, s.driver): s.cdi_devices for s in snapshot.drivers if s.cdi_devices is not None}
    booted = {(s.node, s.driver): s.booted for s in snapshot.drivers if s.booted is not None}
    if not folders:
        return []
    history = ClaimHistory()
    last: dict[_Key, tuple[tuple[PreparedDevice, ...], DriverCall]] = {}
    released: dict[_Key, DriverCall] = {}
    names: dict[_Key, str] = {}
    for call in snapshot.driver_calls:
        if call.method not in (PREPARE, UNPREPARE):
            continue
        history.advance(call)
        for namespace, name, uid in call.claims:
            key = (call.node, call.driver, uid)
            names[key] = f"{namespace}/{name}"
            st = history.states.get(key)
            if st is None:
                continue
            if call.method == PREPARE and st.prepared and st.prepared_by is call and st.answer is not None:
                last[key], _ = (st.answer, call), released.pop(key, None)
            elif call.method == UNPREPARE and st.unprepared and key in last and key not in released:
                released[key] = call
    held: dict[tuple[str, str], set[str]] = {}
    for key, (answer, _) in last.items():
        st = history.states[key]
        if st.prepared:
            held.setdefault(key[:2], set()).update(_ids(answer))
    out: list[Violation] = []
    for key, (answer, call) in last.items():
        node, driver, uid = key
        devices = folders.get((node, driver))
        st = history.states[key]
        if devices is None:
            continue
        claim = names[key]
        named = tuple(sorted({f"{driver}/{d.pool}/{d.device}" for d in answer}))
        if st.prepared and st.prepared_by is call:
            if snapshot.time - _ended(call) < SETTLE or _ended(call) < booted.get((node, driver), -1.0):
                continue  # too fresh, or answered before the node rebooted: judged again once prepared again
            missing = [i for i in _ids(answer) if i not in devices]
            if missing:
                out.append(Violation(
                    NAME, f"{driver} on {node} prepared ResourceClaim {claim} at {call.time:.1f}s with CDI device(s) "
                    f"{', '.join(missing)}, which no CDI spec in the node's CDI folder defines (once) at "
                    f"{snapshot.time:.1f}s: a container given them cannot start",
                    (f"ResourceClaim/{claim}",), named, snapshot.time, key=f"unresolved/{node}/{uid}"))
        elif key in released:
            gone = released[key]
            if snapshot.time - _ended(gone) < SETTLE:
                continue
            left = [i for i in _ids(answer) if i in devices and i not in held.get((node, driver), set())]
            if left:
                out.append(Violation(
                    NAME, f"{driver} on {node} unprepared ResourceClaim {claim} at {gone.time:.1f}s, yet at "
                    f"{snapshot.time:.1f}s the node's CDI folder still defines its CDI device(s) {', '.join(left)}",
                    (f"ResourceClaim/{claim}",), named, snapshot.time, key=f"left/{node}/{uid}"))
    return out
