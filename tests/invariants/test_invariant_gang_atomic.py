"""gang-atomic: a gang is complete (minCount members) or holds nothing; a partial gang names what it
holds; while the run goes on it carries the gang's grace period, once settled none."""

from __future__ import annotations

from invariant_objects import NS, claim, gpus, pod, request, result

from draguard.harness.invariants import Gang, Snapshot
from draguard.harness.invariants.gang_atomic import check

MEMBERS = ("gang-a-0", "gang-a-1", "gang-a-2")


def gang(settled: bool = True, min_count: int | None = None) -> Gang:
    return Gang("gang-a", NS, MEMBERS, claims_per_member=1, settled=settled, min_count=min_count, grace=20.0)


def member(i: int, allocated: bool, bound: bool = True) -> tuple[dict, dict]:  # type: ignore[type-arg]
    p = pod(f"gang-a-{i}", node="node-a" if bound else None, phase="Running" if bound else "Pending",
            template_claims={"gpus": f"gang-a-{i}-gpus-abc"})  # fmt: skip
    results = [result(f"gpu-{i}")] if allocated else None
    c = claim(f"gang-a-{i}-gpus-abc", [request()], results, reserved=[p] if allocated else None, owner=p)
    return p, c


def snap(members: list[tuple[dict, dict]], settled: bool = True,  # type: ignore[type-arg]
         min_count: int | None = None) -> Snapshot:
    return Snapshot(time=90.0, pods=tuple(p for p, _ in members), claims=tuple(c for _, c in members),
                    slices=(gpus("node-a"),), gangs=(gang(settled, min_count),))  # fmt: skip


def test_a_complete_gang_holds() -> None:
    assert check(snap([member(i, True) for i in range(3)])) == []


def test_a_gang_that_holds_nothing_holds() -> None:
    assert check(snap([member(i, False, bound=False) for i in range(3)])) == []


def test_a_partial_gang_is_reported_with_its_members_and_devices() -> None:
    [violation] = check(snap([member(0, True), member(1, True), member(2, False, bound=False)]))
    assert violation.message == (
        "gang chaos/gang-a is partial after settling: 2 of 3 members bound with all claims allocated (it needs 3), "
        "yet it holds 2 device(s) (2 member(s) hold resources): a deadlock ingredient"
    )
    assert violation.grace == 0.0 and violation.key == "gang chaos/gang-a partial"
    assert violation.objects == (
        "Pod/chaos/gang-a-0", "Pod/chaos/gang-a-1",
        "ResourceClaim/chaos/gang-a-0-gpus-abc", "ResourceClaim/chaos/gang-a-1-gpus-abc",
    )  # fmt: skip
    assert violation.devices == ("gpu.draguard.dev/node-a/gpu-0", "gpu.draguard.dev/node-a/gpu-1")


def test_before_settling_a_partial_gang_carries_its_grace_period() -> None:
    [violation] = check(snap([member(0, True), member(1, False), member(2, False)], settled=False))
    assert violation.grace == 20.0 and "partial for more than 20s" in violation.message
    assert violation.key == "gang chaos/gang-a partial"


def test_min_count_complete_members_make_a_whole_gang() -> None:
    members = [member(0, True), member(1, True), member(2, False, bound=False)]
    assert check(snap(members, min_count=2)) == []
    [violation] = check(snap([member(0, True), member(1, False), member(2, False)], min_count=2))
    assert "1 of 3 members" in violation.message and "(it needs 2)" in violation.message


def test_template_claims_are_found_through_their_owner_when_status_lags() -> None:
    members = [member(i, True) for i in range(2)] + [member(2, False, bound=False)]
    for p, _ in members:
        del p["status"]["resourceClaimStatuses"]
    [violation] = check(snap(members))
    assert len(violation.devices) == 2


def test_a_shared_claim_held_by_an_unfinished_gang_is_partial() -> None:
    shared = claim("gang-a-shared", [request(count=2)], [result("gpu-0"), result("gpu-1")])
    pods = [pod(f"gang-a-{i}", node="node-a" if i == 0 else None, claims={"gpus": "gang-a-shared"}) for i in range(3)]
    shared["status"]["reservedFor"] = [{"resource": "pods", "name": "gang-a-0", "uid": "uid-gang-a-0"}]
    [violation] = check(Snapshot(time=1.0, pods=tuple(pods), claims=(shared,), gangs=(gang(),)))
    assert "1 of 3 members" in violation.message


def test_a_gang_whose_pods_are_still_being_created_is_not_judged_before_settling() -> None:
    members = [member(0, True), member(1, False, bound=False)]  # gang-a-2 not created yet
    creating = Gang("gang-a", NS, MEMBERS, claims_per_member=1, settled=False, grace=20.0, created=False)
    base = snap(members, settled=False)
    assert check(Snapshot(time=base.time, pods=base.pods, claims=base.claims, slices=base.slices, gangs=(creating,))) == []
    # once created, the same partial gang carries its grace; after settling it is reported whatever it was
    [violation] = check(base)
    assert violation.grace == 20.0
    settled = Gang("gang-a", NS, MEMBERS, claims_per_member=1, settled=True, grace=20.0, created=False)
    [violation] = check(Snapshot(time=base.time, pods=base.pods, claims=base.claims, slices=base.slices, gangs=(settled,)))
    assert violation.grace == 0.0
