"""``no-double-allocation``: no device is allocated to two claims (or twice to one), unless the
device allows multiple allocations or the allocation has admin access.

Judged in three places: the API (allocation results), each driver's books (a device prepared for
two claims on one node) and the device truth (containers of two claims on one device at once).
"""

from __future__ import annotations

from collections import defaultdict

from draguard.harness.invariants.selection import request_spec
from draguard.harness.invariants.snapshot import DeviceId, Obj, Snapshot, ref
from draguard.harness.invariants.violation import Violation
from draguard.harness.core.registry import INVARIANTS

__all__ = ["NAME", "check", "exclusive_users", "admin_access"]

NAME = "no-double-allocation"


def admin_access(claim: Obj, result: Obj) -> bool:
    """Whether ``result`` of ``claim`` was allocated with admin access (it may share its device)."""
    if result.get("adminAccess"):
        return True
    spec = request_spec(claim, result.get("request", ""))
    return bool(spec and spec.get("adminAccess"))


def exclusive_users(snapshot: Snapshot) -> dict[DeviceId, list[Obj]]:
    """Device -> the claims allocated it without admin access (a claim once per result)."""
    users: dict[DeviceId, list[Obj]] = defaultdict(list)
    for claim, result, device in snapshot.allocated():
        if not admin_access(claim, result):
            users[device].append(claim)
    return users


def _shareable(snapshot: Snapshot, driver: str, node: str, device: str) -> bool:
    published = snapshot.device(DeviceId(driver, node, device))
    return bool(published is not None and published.get("allowMultipleAllocations"))


def _drivers(snapshot: Snapshot) -> list[Violation]:
    admin = {(c["metadata"].get("uid"), d.device) for c, r, d in snapshot.allocated() if admin_access(c, r)}
    out: list[Violation] = []
    for state in snapshot.drivers:
        owners: dict[str, set[str]] = defaultdict(set)
        for uid, devices in state.prepared.items():
            for d in devices:
                if (uid, d.device) not in admin:
                    owners[d.device].add(uid)
        for device, uids in sorted(owners.items()):
            if len(uids) > 1 and not _shareable(snapshot, state.driver, state.node, device):
                out.append(Violation(NAME, f"driver {state.driver} on node {state.node} has device {device} prepared "
                                     f"for {len(uids)} claims: {', '.join(sorted(uids))}", (f"Node/{state.node}",),
                                     (f"{state.driver}/{state.node}/{device}",), snapshot.time))  # fmt: skip
    return out


def _truth(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for t in snapshot.device_truth:
        for i in t.incidents:
            if i.kind == "shared-without-sharing":
                out.append(Violation(NAME, f"node {t.node}: {i.message} (device truth)", (f"Node/{t.node}",),
                                     (snapshot.truth_device(t.node, i.device),), snapshot.time))  # fmt: skip
    return out


@INVARIANTS.register(NAME, summary="No device is allocated to two claims, unless the device allows multiple "
                     "allocations or the claim has admin access.", judged="continuously")  # fmt: skip
def check(snapshot: Snapshot) -> list[Violation]:
    out: list[Violation] = []
    for device, claims in sorted(exclusive_users(snapshot).items()):
        if len(claims) < 2:
            continue
        published = snapshot.device(device)  # as last published, if its slice is gone for now
        if published is not None and published.get("allowMultipleAllocations"):
            continue
        refs = [ref("ResourceClaim", c) for c in claims]
        out.append(Violation(NAME, f"device {device} is allocated {len(claims)} times: to {', '.join(refs)}",
                             tuple(dict.fromkeys(refs)), (str(device),), snapshot.time))  # fmt: skip
    return out + _drivers(snapshot) + _truth(snapshot)
