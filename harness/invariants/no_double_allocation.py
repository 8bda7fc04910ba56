"""``no-double-allocation``: no device is allocated to two claims (or twice to one), unless the
device allows multiple allocations or the allocation has admin access."""

from __future__ import annotations

from collections import defaultdict

from draguard.harness.invariants.selection import request_spec
from draguard.harness.invariants.snapshot import DeviceId, Obj, Snapshot, ref
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


@INVARIANTS.register(NAME, summary="No device is allocated to two claims, unless the device allows multiple "
                     "allocations or the claim has admin access.", judged="continuously")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
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
