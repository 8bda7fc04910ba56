"""no-double-allocation: one device, one claim — unless shareable or admin access."""

from __future__ import annotations

from invariant_objects import claim, gpus, request, result

from draguard.harness.invariants import DeviceId, Snapshot
from draguard.harness.invariants.no_double_allocation import check


def test_distinct_devices_hold() -> None:
    a = claim("a", [request()], [result("gpu-0")])
    b = claim("b", [request()], [result("gpu-1")])
    assert check(Snapshot(time=0, claims=(a, b), slices=(gpus("node-a"),))) == []


def test_the_same_device_in_two_claims_is_a_violation() -> None:
    a = claim("a", [request()], [result("gpu-0")])
    b = claim("b", [request()], [result("gpu-0")])
    [violation] = check(Snapshot(time=3, claims=(a, b), slices=(gpus("node-a"),)))
    assert violation.message == (
        "device gpu.draguard.dev/node-a/gpu-0 is allocated 2 times: to ResourceClaim/chaos/a, ResourceClaim/chaos/b"
    )
    assert violation.devices == ("gpu.draguard.dev/node-a/gpu-0",)


def test_one_claim_getting_a_device_twice_is_a_violation() -> None:
    twice = claim("a", [request("x"), request("y")], [result("gpu-0", req="x"), result("gpu-0", req="y")])
    [violation] = check(Snapshot(time=0, claims=(twice,), slices=(gpus("node-a"),)))
    assert violation.objects == ("ResourceClaim/chaos/a",)


def test_admin_access_and_shareable_devices_are_allowed() -> None:
    a = claim("a", [request()], [result("gpu-0")])
    monitor = claim("m", [request(admin=True)], [result("gpu-0", adminAccess=True)])
    x = claim("x", [request()], [result("gpu-1", node="node-b", shareID="s1")])
    y = claim("y", [request()], [result("gpu-1", node="node-b", shareID="s2")])
    slices = (gpus("node-a"), gpus("node-b", multi=True))
    assert check(Snapshot(time=0, claims=(a, monitor, x, y), slices=slices)) == []


def test_a_shareable_device_stays_shareable_while_its_slice_is_gone() -> None:
    # A restarted kubelet deletes its node's slices until the driver republishes them: the two claims on
    # the shareable device are no double allocation meanwhile.
    x = claim("x", [request()], [result("gpu-1", node="node-b", shareID="s1")])
    y = claim("y", [request()], [result("gpu-1", node="node-b", shareID="s2")])
    multi = gpus("node-b", multi=True)
    before = {DeviceId("gpu.draguard.dev", "node-b", d["name"]): d for d in multi["spec"]["devices"]}
    assert check(Snapshot(time=0, claims=(x, y), slices=(), published_before=before)) == []
    assert len(check(Snapshot(time=0, claims=(x, y), slices=()))) == 1  # no history: not known to be shareable
