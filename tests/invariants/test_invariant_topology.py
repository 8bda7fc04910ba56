"""topology: selectors and constraints re-evaluated against the ResourceSlices."""

from __future__ import annotations

from invariant_objects import claim, device_class, gpus, request, result

from draguard.harness.invariants import DeviceId, Snapshot
from draguard.harness.invariants.topology import check

CLASS = device_class(selectors=("device.driver == 'gpu.draguard.dev'",
                                "device.attributes['gpu.draguard.dev'].type == 'gpu'"))  # fmt: skip
SAME_DOMAIN = [{"requests": [], "matchAttribute": "gpu.draguard.dev/nvlinkDomain"}]
DISTINCT = [{"requests": ["gpu"], "distinctAttribute": "gpu.draguard.dev/uuid"}]


def snap(*claims: dict) -> Snapshot:  # type: ignore[type-arg]
    return Snapshot(time=7, claims=claims, slices=(gpus("node-a"),), device_classes=(CLASS,))


def test_devices_matching_selectors_and_constraints_hold() -> None:
    ok = claim("ok", [request("gpu", 2, selectors=("device.attributes['gpu.draguard.dev'].nvlinkDomain == 1",))],
               [result("gpu-2"), result("gpu-3")], constraints=SAME_DOMAIN + DISTINCT)  # fmt: skip
    assert check(snap(ok)) == []


def test_a_device_outside_the_request_selector_is_a_violation() -> None:
    bad = claim("bad", [request("gpu", 1, selectors=("device.attributes['gpu.draguard.dev'].nvlinkDomain == 1",))],
                [result("gpu-0")])  # fmt: skip
    [violation] = check(snap(bad))
    assert violation.message == (
        "ResourceClaim/chaos/bad: device gpu.draguard.dev/node-a/gpu-0 does not match the selector of the request: "
        "device.attributes['gpu.draguard.dev'].nvlinkDomain == 1"
    )


def test_a_device_outside_the_class_selector_is_a_violation() -> None:
    tpu_class = device_class("tpu.example.com", selectors=("device.attributes['gpu.draguard.dev'].type == 'tpu'",))
    bad = claim("bad", [request("gpu", 1, cls="tpu.example.com")], [result("gpu-0")])
    snapshot = Snapshot(time=0, claims=(bad,), slices=(gpus("node-a"),), device_classes=(tpu_class,))
    [violation] = check(snapshot)
    assert "does not match the selector of DeviceClass tpu.example.com" in violation.message


def test_a_selector_that_fails_on_the_device_is_a_violation() -> None:
    bad = claim("bad", [request("gpu", 1, selectors=("device.attributes['gpu.draguard.dev'].missing == 1",))],
                [result("gpu-0")])  # fmt: skip
    [violation] = check(snap(bad))
    assert "fails on device gpu.draguard.dev/node-a/gpu-0" in violation.message


def test_match_attribute_across_nvlink_domains_is_a_violation() -> None:
    split = claim("split", [request("gpu", 2)], [result("gpu-1"), result("gpu-2")], constraints=SAME_DOMAIN)
    [violation] = check(snap(split))
    assert violation.message == (
        "ResourceClaim/chaos/split: matchAttribute gpu.draguard.dev/nvlinkDomain differs across devices "
        "(gpu-1=0, gpu-2=1)"
    )
    assert violation.devices == ("gpu.draguard.dev/node-a/gpu-1", "gpu.draguard.dev/node-a/gpu-2")


def test_distinct_attribute_with_a_shared_value_is_a_violation() -> None:
    same = claim("same", [request("gpu", 2)], [result("gpu-0"), result("gpu-1")],
                 constraints=[{"distinctAttribute": "gpu.draguard.dev/nvlinkDomain"}])  # fmt: skip
    [violation] = check(snap(same))
    assert "devices gpu-0 and gpu-1 share the value 0" in violation.message


def test_an_allocated_device_that_is_not_published_is_a_violation() -> None:
    ghost = claim("ghost", [request()], [result("gpu-9")])
    [violation] = check(snap(ghost))
    assert "gpu.draguard.dev/node-a/gpu-9 is not published in any ResourceSlice" in violation.message


def test_only_the_newest_pool_generation_counts() -> None:
    old = gpus("node-a")
    new = gpus("node-a", n=2)
    new["spec"]["pool"]["generation"] = 2
    c = claim("c", [request()], [result("gpu-3")])
    [violation] = check(Snapshot(time=0, claims=(c,), slices=(old, new), device_classes=(CLASS,)))
    assert "gpu-3 is not published" in violation.message


def _published(slice_: dict) -> dict:  # type: ignore[type-arg]
    return {DeviceId("gpu.draguard.dev", slice_["spec"]["pool"]["name"], d["name"]): d for d in slice_["spec"]["devices"]}


def test_a_device_whose_slice_is_gone_for_now_is_judged_as_last_published() -> None:
    # A restarted kubelet deletes its node's slices until the driver registers again: the claim's device
    # is judged as it was published, so a good allocation holds and a bad one is still caught.
    ok = claim("ok", [request("gpu", 1, selectors=("device.attributes['gpu.draguard.dev'].nvlinkDomain == 1",))],
               [result("gpu-2")])  # fmt: skip
    bad = claim("bad", [request("gpu", 1, selectors=("device.attributes['gpu.draguard.dev'].nvlinkDomain == 1",))],
                [result("gpu-0")])  # fmt: skip
    wiped = Snapshot(time=9, claims=(ok, bad), slices=(), device_classes=(CLASS,),
                     published_before=_published(gpus("node-a")))  # fmt: skip
    [violation] = check(wiped)
    assert violation.objects == ("ResourceClaim/chaos/bad",)
    assert "does not match the selector" in violation.message


def test_a_device_never_published_in_the_run_is_a_violation_even_with_history() -> None:
    ghost = claim("ghost", [request()], [result("gpu-9")])
    [violation] = check(Snapshot(time=0, claims=(ghost,), slices=(), device_classes=(CLASS,),
                                 published_before=_published(gpus("node-a"))))  # fmt: skip
    assert "gpu-9 is not published in any ResourceSlice, and was not earlier in the run" in violation.message
