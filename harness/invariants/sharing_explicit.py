"""``sharing-explicit``: a claim on a shared accelerator names its sharing strategy, and the sharing
state is gone from the device once its claims are unprepared.

A device is shared when it is allocated (without admin access) to more than one claim, when it
allows multiple allocations, when the result carries a ``shareID``, or when its claim is reserved
for more than one pod. The strategy is named by an
opaque configuration for the device's driver that applies to the request and has
``parameters.sharing.strategy`` (the shape of the NVIDIA GPU driver's ``GpuConfig``).
"""

from __future__ import annotations

from collections.abc import Mapping

from draguard.harness.invariants.no_double_allocation import exclusive_users
from draguard.harness.invariants.selection import base_request, opaque_configs
from draguard.harness.invariants.snapshot import Obj, Snapshot, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check", "sharing_strategy"]

NAME = "sharing-explicit"


def sharing_strategy(claim: Obj, result: Obj) -> str | None:
    """The sharing strategy a claim's configuration names for one allocation result, or None."""
    request = result.get("request", "")
    for requests, opaque in opaque_configs(claim):
        if opaque.get("driver") != result.get("driver"):
            continue
        if requests and request not in requests and base_request(request) not in requests:
            continue
        parameters = opaque.get("parameters")
        sharing = parameters.get("sharing") if isinstance(parameters, Mapping) else None
        strategy = sharing.get("strategy") if isinstance(sharing, Mapping) else None
        if isinstance(strategy, str) and strategy:
            return strategy
    return None


@INVARIANTS.register(NAME, summary="A claim on a shared accelerator names its sharing strategy, and its sharing "
                     "state is gone after the pod ends.", judged="after-cleanup")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    users = exclusive_users(snapshot)
    for claim, result, device_id in snapshot.allocated():
        device = snapshot.device(device_id) or {}
        pods = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or () if r.get("resource") == "pods"}
        shared = (len(users.get(device_id, ())) > 1 or device.get("allowMultipleAllocations") or result.get("shareID")
                  or len(pods) > 1)  # fmt: skip
        if shared and sharing_strategy(claim, result) is None:
            this = ref("ResourceClaim", claim)
            out.append(Violation(NAME, f"{this} shares device {device_id} without naming a sharing strategy "
                                 "(opaque config parameters.sharing.strategy)", (this,), (str(device_id),),
                                 snapshot.time))  # fmt: skip
    for state in snapshot.drivers:
        for name, device_state in sorted(state.devices.items()):
            if device_state.sharing and not any(uid in state.prepared for uid in device_state.claims):
                out.append(Violation(NAME, f"device {name} on node {state.node} keeps {device_state.sharing} sharing "
                                     "state after its claims were unprepared", (f"Node/{state.node}",),
                                     (f"{state.driver}/{state.node}/{name}",), snapshot.time))  # fmt: skip
    return out + _truth(snapshot)


def _truth(snapshot: Snapshot) -> list[Violation]:
    """What the devices say: pods sharing a device with no sharing set up on it, and sharing set-up
    left behind by a claim that nothing holds any more."""
    out: list[Violation] = []
    held = snapshot.held_on_nodes
    for t in snapshot.device_truth:
        for name, rec in sorted(t.devices.items()):
            if rec.sharing and rec.sharing_claim not in held.get((t.node, name), set()):
                out.append(Violation(NAME, f"device {name} on node {t.node} keeps {rec.sharing} sharing state of claim "
                                     f"{rec.sharing_claim}, which no longer holds it (device truth)",
                                     (f"Node/{t.node}",), (snapshot.truth_device(t.node, name),), snapshot.time))  # fmt: skip
        for i in t.incidents:
            if i.kind == "unshared-pods":
                out.append(Violation(NAME, f"node {t.node}: {i.message} (device truth)", (f"Node/{t.node}",),
                                     (snapshot.truth_device(t.node, i.device),), snapshot.time))  # fmt: skip
    return out
