"""claim-atomic: every request of an allocated claim is satisfied in full."""

from __future__ import annotations

from invariant_objects import claim, device_class, gpus, request, result

from draguard.harness.invariants import Snapshot, evaluate
from draguard.harness.invariants.claim_atomic import check


def snap(*claims: dict) -> Snapshot:  # type: ignore[type-arg]
    return Snapshot(time=12.5, claims=claims, slices=(gpus("node-a"),), device_classes=(device_class(),))


def test_a_claim_with_all_its_devices_holds() -> None:
    ok = claim("c", [request("gpu", 2)], [result("gpu-0"), result("gpu-1")])
    pending = claim("p", [request("gpu", 2)])
    assert check(snap(ok, pending)) == []


def test_a_partial_allocation_is_a_violation_naming_claim_and_devices() -> None:
    partial = claim("c", [request("gpu", 2), request("nic", 1)], [result("gpu-0")])
    found = check(snap(partial))
    assert [v.message for v in found] == [
        "ResourceClaim/chaos/c: request 'gpu' wants 2 device(s), the allocation has 1: a partial result",
        "ResourceClaim/chaos/c: request 'nic' wants 1 device(s), the allocation has 0: a partial result",
    ]
    assert found[0].objects == ("ResourceClaim/chaos/c",)
    assert found[0].devices == ("gpu.draguard.dev/node-a/gpu-0",)
    assert found[0].time == 12.5 and found[0].invariant == "claim-atomic"


def test_all_mode_needs_every_matching_device_of_the_pool() -> None:
    full = claim("full", [request("gpu", mode="All")], [result(f"gpu-{i}") for i in range(4)])
    some = claim("some", [request("gpu", mode="All", selectors=("device.attributes['gpu.draguard.dev'].nvlinkDomain == 0",))],
                 [result("gpu-0")])  # fmt: skip
    none = claim("none", [request("gpu", mode="All")], [])
    messages = [v.message for v in check(snap(full, some, none))]
    assert messages == [
        "ResourceClaim/chaos/some: request 'gpu' (allocationMode All) got 1 of the 2 matching devices of its pool: "
        "a partial result",
        "ResourceClaim/chaos/none: request 'gpu' (allocationMode All) got no device",
    ]


def test_first_available_is_judged_by_the_chosen_subrequest() -> None:
    prioritized = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.draguard.dev", "allocationMode": "ExactCount", "count": 2},
        {"name": "small", "deviceClassName": "gpu.draguard.dev", "allocationMode": "ExactCount", "count": 1},
    ]}  # fmt: skip
    ok = claim("ok", [prioritized], [result("gpu-0", req="gpu/small")])
    short = claim("short", [prioritized], [result("gpu-0", req="gpu/big")])
    mixed = claim("mixed", [prioritized], [result("gpu-0", req="gpu/big"), result("gpu-1", req="gpu/small")])
    assert [v.objects[0] for v in check(snap(ok, short, mixed))] == [
        "ResourceClaim/chaos/short",
        "ResourceClaim/chaos/mixed",
    ]


def test_results_for_an_unknown_request_are_a_violation() -> None:
    stray = claim("c", [request("gpu", 1)], [result("gpu-0"), result("gpu-1", req="ghost")])
    [violation] = evaluate(snap(stray), ["claim-atomic"])["claim-atomic"]
    assert "request 'ghost', which the claim does not have" in violation.message
