"""``no-double-allocation``: no device is allocated to two claims (or twice to one), unless the
device allows multiple allocations or the allocation has admin access.

Judged in the API (allocation results) and at the node: a driver that prepares a device for a
claim while it is still prepared for another one (the API freed it first, e.g. after a
force-delete, and the node had not unprepared it yet) has handed it out twice, whatever the API says.
"""

from __future__ import annotations

from collections import defaultdict

from draguard.harness.invariants.selection import request_spec
from draguard.harness.invariants.snapshot import DeviceId, Obj, Snapshot, allocation_results, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.registry import INVARIANTS

__all__ = ["NAME", "check", "exclusive_users"]

NAME = "no-double-allocation"


def _admin(claim: Obj, result: Obj) -> bool:
    if result.get("adminAccess"):
        return True
    spec = request_spec(claim, result.get("request", ""))
    return bool(spec and spec.get("adminAccess"))


def exclusive_users(snapshot: Snapshot) -> dict[DeviceId, list[Obj]]:
    """Device -> the claims allocated it without admin access (a claim once per result)."""
    users: dict[DeviceId, list[Obj]] = defaultdict(list)
    for claim, result, device in snapshot.allocated():
        if not _admin(claim, result):
            users[device].append(claim)
    return users


def _shared_ok(snapshot: Snapshot, device: DeviceId, uids: list[str]) -> bool:
    """A device that allows multiple allocations, or one that some of these claims hold with admin access."""
    published = snapshot.devices.get(device)
    if published is not None and published.get("allowMultipleAllocations"):
        return True
    by_uid = {c["metadata"].get("uid"): c for c in snapshot.claims}
    for uid in uids:
        claim = by_uid.get(uid)
        if claim is None:
            continue
        for result in allocation_results(claim):
            if result.get("device") == device.device and result.get("pool") == device.pool and _admin(claim, result):
                return True
    return False


def _prepared_twice(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for state in snapshot.drivers:
        holders: dict[DeviceId, list[str]] = defaultdict(list)
        for uid, devices in state.prepared.items():
            for device in dict.fromkeys(devices):
                holders[device].append(uid)
        for device, uids in sorted(holders.items()):
            if len(uids) < 2 or _shared_ok(snapshot, device, uids):
                continue
            out.append(Violation(NAME, f"device {device} is prepared on node {state.node} for {len(uids)} claims at "
                                 f"once: {', '.join(sorted(uids))}", (f"Node/{state.node}",), (str(device),),
                                 snapshot.time))  # fmt: skip
    return out


@INVARIANTS.register(NAME, summary="No device is allocated to two claims, unless the device allows multiple "
                     "allocations or the claim has admin access.")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = _prepared_twice(snapshot)
    for device, claims in sorted(exclusive_users(snapshot).items()):
        if len(claims) < 2:
            continue
        published = snapshot.devices.get(device)
        if published is not None and published.get("allowMultipleAllocations"):
            continue
        refs = [ref("ResourceClaim", c) for c in claims]
        out.append(Violation(NAME, f"device {device} is allocated {len(claims)} times: to {', '.join(refs)}",
                             tuple(dict.fromkeys(refs)), (str(device),), snapshot.time))  # fmt: skip
    return out
