"""Incremental judging finds every new violation a full evaluation finds, judging far fewer claims."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

from draguard.harness.bench.scale import _synthetic
from draguard.harness.invariants import evaluate
from draguard.harness.judge.incremental import INCREMENTAL, Incremental

NAMES = sorted(INCREMENTAL)


def _messages(found: dict[str, Any]) -> set[str]:
    return {v.message for vs in found.values() for v in vs}


def _keys(found: dict[str, Any]) -> set[tuple[str, str]]:
    """What was violated: a double allocation by its device (its message lists however many claims
    hold it now), any other violation by its message."""
    return {(n, str(v.devices) if n == "no-double-allocation" else v.message) for n, vs in found.items() for v in vs}


def _bump(claim: dict[str, Any]) -> dict[str, Any]:
    claim = copy.deepcopy(claim)
    claim["metadata"]["resourceVersion"] = str(int(claim["metadata"].get("resourceVersion", "1")) + 1)
    return claim


def test_a_changed_claim_taking_an_unchanged_claims_device_is_a_double_allocation() -> None:
    snap = _synthetic(10, 40, 8)
    inc = Incremental()
    assert not _messages(evaluate(inc.reduce(snap), NAMES))
    assert inc.last_judged == 40
    claims = list(snap.claims)
    victim = claims[3]["status"]["allocation"]["devices"]["results"][0]
    thief = _bump(claims[7])
    thief["status"]["allocation"]["devices"]["results"][0].update(pool=victim["pool"], device=victim["device"])
    claims[7] = thief
    changed = dataclasses.replace(snap, claims=tuple(claims))
    reduced = inc.reduce(changed)
    assert inc.last_judged == 2  # the changed claim and the one on its device
    found = evaluate(reduced, NAMES)
    assert found["no-double-allocation"], "the incremental round missed the double allocation"
    assert _messages(found) == _messages(evaluate(changed, NAMES))


def test_an_unchanged_round_judges_nothing_and_a_slice_change_judges_everything() -> None:
    snap = _synthetic(5, 20, 8)
    inc = Incremental()
    inc.reduce(snap)
    inc.reduce(snap)
    assert inc.last_judged == 0
    slices = list(snap.slices)
    slices[0] = copy.deepcopy(slices[0])
    slices[0]["metadata"]["resourceVersion"] = "99"
    inc.reduce(dataclasses.replace(snap, slices=tuple(slices)))
    assert inc.last_judged == 20


def test_random_changes_incremental_finds_what_full_evaluation_finds() -> None:
    rng = random.Random(12)
    snap = _synthetic(6, 40, 8)
    inc = Incremental()
    reported = _keys(evaluate(inc.reduce(snap), NAMES))
    for _ in range(40):
        claims = list(snap.claims)
        i = rng.randrange(len(claims))
        c = _bump(claims[i])
        result = c["status"]["allocation"]["devices"]["results"][0]
        result.update(pool=f"n-{rng.randrange(6)}", device=f"gpu-{rng.randrange(9)}")  # gpu-8 does not exist
        claims[i] = c
        snap = dataclasses.replace(snap, claims=tuple(claims))
        reported |= _keys(evaluate(inc.reduce(snap), NAMES))
        full = _keys(evaluate(snap, NAMES))
        assert full <= reported, full - reported


def test_a_device_prepared_for_an_admin_claim_and_its_user_is_no_double_allocation_in_any_round() -> None:
    """The drivers' books are judged every round, and a device prepared for an admin-access claim and
    for the claim that uses it is allowed: an unchanged round must still know which claim is admin
    (it judged no claim, and called every shared device a double allocation)."""
    from draguard.harness.invariants import DeviceId, NodeDriverState

    snap = _synthetic(2, 4, 8)
    claims = [copy.deepcopy(c) for c in snap.claims]
    user = claims[0]
    admin = copy.deepcopy(user)
    admin["metadata"].update(name="admin", uid="uid-admin")
    admin["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    claims.append(admin)
    r = user["status"]["allocation"]["devices"]["results"][0]
    device = DeviceId(r["driver"], r["pool"], r["device"])
    books = NodeDriverState(node=r["pool"], driver=r["driver"], prepared={"uid-0": (device,), "uid-admin": (device,)},
                            devices={}, cdi_specs=frozenset())  # fmt: skip
    snap = dataclasses.replace(snap, claims=tuple(claims), drivers=(books,))
    assert not evaluate(snap, ["no-double-allocation"])["no-double-allocation"]
    inc = Incremental()
    for _ in range(3):  # the first round judges everything, the next ones nothing that changed
        assert not evaluate(inc.reduce(snap), ["no-double-allocation"])["no-double-allocation"]
    # and a device prepared for two claims without admin access is still found in an unchanged round
    other = snap.claims[1]["metadata"]["uid"]
    books = dataclasses.replace(books, prepared={"uid-0": (device,), other: (device,)})
    found = evaluate(inc.reduce(dataclasses.replace(snap, drivers=(books,))), ["no-double-allocation"])
    assert found["no-double-allocation"]


def test_an_equal_claim_read_again_is_not_judged_and_a_deleted_claim_no_longer_holds_its_device() -> None:
    """Rounds look claims up by identity (the watch replaces a changed object): a claim read again with
    the same version (a re-list) is a new object but no change; a claim that is gone is forgotten, so a
    later claim on its device is judged alone, and one that takes a device still held is judged with
    its holder."""
    snap = _synthetic(4, 16, 8)
    inc = Incremental()
    inc.reduce(snap)
    relisted = dataclasses.replace(snap, claims=tuple(copy.deepcopy(c) for c in snap.claims))
    assert not evaluate(inc.reduce(relisted), NAMES)["claim-atomic"]
    assert inc.last_judged == 0
    claims = list(relisted.claims)
    gone = claims.pop(5)
    held = gone["status"]["allocation"]["devices"]["results"][0]
    inc.reduce(dataclasses.replace(relisted, claims=tuple(claims)))
    taker = _bump(claims[0])
    taker["status"]["allocation"]["devices"]["results"][0].update(pool=held["pool"], device=held["device"])
    claims[0] = taker
    after = dataclasses.replace(relisted, claims=tuple(claims))
    found = evaluate(inc.reduce(after), NAMES)
    assert inc.last_judged == 1  # the deleted claim's device is free: only the taker is judged
    assert not found["no-double-allocation"]
    thief = _bump(claims[1])
    victim = claims[2]["status"]["allocation"]["devices"]["results"][0]
    thief["status"]["allocation"]["devices"]["results"][0].update(pool=victim["pool"], device=victim["device"])
    claims[1] = thief
    found = evaluate(inc.reduce(dataclasses.replace(after, claims=tuple(claims))), NAMES)
    assert inc.last_judged == 2
    assert found["no-double-allocation"]
