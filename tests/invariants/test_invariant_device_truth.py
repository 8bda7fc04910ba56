"""The invariants judge the device truth: what the hardware says, whatever the driver's books say.

Each check is shown failing for the reason it exists and holding on a clean truth."""

from __future__ import annotations

from invariant_objects import DRIVER, claim, gpus, pod, request, result

from draguard.harness.devices.truth import ContainerRecord, DeviceRecord, Incident, NodeTruth
from draguard.harness.invariants import DeviceId, NodeDriverState, Snapshot
from draguard.harness.invariants import container_devices, no_double_allocation, no_leak, sharing_explicit

SLICE = gpus("node-a")


def truth(*records: DeviceRecord, incidents: tuple[Incident, ...] = ()) -> NodeTruth:
    return NodeTruth("node-a", {r.name: r for r in records}, incidents)


def gpu(name: str = "gpu-0", **state: object) -> DeviceRecord:
    return DeviceRecord(name, f"GPU-{name}", memory_total=80 << 30, **state)  # type: ignore[arg-type]


def test_a_clean_truth_holds_for_every_invariant() -> None:
    s = Snapshot(time=0, slices=(SLICE,), device_truth=(truth(gpu("gpu-0"), gpu("gpu-1")),))
    for inv in (no_leak, no_double_allocation, sharing_explicit, container_devices):
        assert inv.check(s) == [], inv.NAME


def test_a_device_left_dirty_or_failed_that_no_claim_holds_is_a_leak_though_the_books_are_clean() -> None:
    books = NodeDriverState("node-a", DRIVER)  # the driver forgot the claim and the device
    s = Snapshot(time=0, slices=(SLICE,), drivers=(books,), device_truth=(truth(
        gpu("gpu-0", reset="failed", reset_error="reset of device gpu-0 failed", used_by=("uid-a",)),
        gpu("gpu-1", reset="dirty", used_by=("uid-b",))),))  # fmt: skip
    messages = [v.message for v in no_leak.check(s)]
    assert messages == [
        "device gpu-0 on node node-a is failed: its last reset failed (reset of device gpu-0 failed); it was used by "
        "claim(s) uid-a and no claim holds it now (device truth)",
        "device gpu-1 on node node-a is dirty: it was not reset after its last use; it was used by claim(s) uid-b and "
        "no claim holds it now (device truth)",
    ]


def test_a_dirty_device_still_held_by_its_claim_is_no_leak() -> None:
    held = claim("a", [request()], [result("gpu-0")], reserved=[pod("w-0")])
    s = Snapshot(time=0, pods=(pod("w-0", claims={"gpus": "a"}),), claims=(held,), slices=(SLICE,),
                 device_truth=(truth(gpu("gpu-0", reset="dirty", used_by=("uid-a",))),))  # fmt: skip
    assert no_leak.check(s) == []
    prepared = NodeDriverState("node-a", DRIVER, prepared={"uid-a": (DeviceId(DRIVER, "node-a", "gpu-0"),)})
    s2 = Snapshot(time=0, slices=(SLICE,), drivers=(prepared,),
                  device_truth=(truth(gpu("gpu-0", reset="failed", used_by=("uid-a",))),))  # fmt: skip
    assert [v for v in no_leak.check(s2) if "device truth" in v.message] == [], "the correct driver keeps its claim"


def test_containers_of_gone_pods_leftover_partitions_and_dirty_handoffs_are_leaks() -> None:
    c = ContainerRecord("uid-gone/main", "chaos/gone", ("uid-x",), 4242, 1 << 30)
    handoff = Incident("dirty-handoff", "gpu-1", "container uid-b/main of pod chaos/b (claim uid-b) got gpu-1, which "
                       "claim uid-a used and no reset followed", ("uid-a", "uid-b"), "chaos/b")  # fmt: skip
    s = Snapshot(time=0, slices=(SLICE,), device_truth=(truth(
        gpu("gpu-0", reset="dirty", used_by=("uid-x",), containers=(c,), partitions=("gpu-0-mig-1",)),
        incidents=(handoff,)),))  # fmt: skip
    messages = [v.message for v in no_leak.check(s)]
    assert any("container uid-gone/main of pod chaos/gone still runs" in m for m in messages)
    assert any("keeps partition gpu-0-mig-1, which no claim holds" in m for m in messages)
    assert any("got gpu-1, which claim uid-a used and no reset followed" in m for m in messages)


def test_two_claims_on_one_device_show_in_the_truth_and_in_the_drivers_books() -> None:
    incident = Incident("shared-without-sharing", "gpu-0", "container x of pod chaos/b (claim uid-b) started on gpu-0 "
                        "while containers of claim uid-a run there, and the device allows no sharing")  # fmt: skip
    gpu0 = DeviceId(DRIVER, "node-a", "gpu-0")
    books = NodeDriverState("node-a", DRIVER, prepared={"uid-a": (gpu0,), "uid-b": (gpu0,)})
    s = Snapshot(time=0, slices=(SLICE,), drivers=(books,), device_truth=(truth(gpu(), incidents=(incident,)),))
    messages = [v.message for v in no_double_allocation.check(s)]
    assert messages == [
        f"driver {DRIVER} on node node-a has device gpu-0 prepared for 2 claims: uid-a, uid-b",
        f"node node-a: {incident.message} (device truth)",
    ]
    multi = Snapshot(time=0, slices=(gpus("node-a", multi=True),), drivers=(books,))
    assert no_double_allocation.check(multi) == [], "a device that allows multiple allocations may be shared"


def test_sharing_left_behind_and_pods_sharing_without_a_strategy_break_sharing_explicit() -> None:
    unshared = Incident("unshared-pods", "gpu-1", "gpu-1 runs containers of 2 pods (chaos/a, chaos/b) with no sharing "
                        "strategy set up on it", ("uid-s",))  # fmt: skip
    s = Snapshot(time=0, slices=(SLICE,), device_truth=(truth(
        gpu("gpu-0", sharing="MPS", sharing_claim="uid-gone"), gpu("gpu-1"), incidents=(unshared,)),))  # fmt: skip
    messages = [v.message for v in sharing_explicit.check(s)]
    assert messages == [
        "device gpu-0 on node node-a keeps MPS sharing state of claim uid-gone, which no longer holds it (device truth)",
        f"node node-a: {unshared.message} (device truth)",
    ]
    held = claim("s", [request()], [result("gpu-0")], reserved=[pod("w-0")])
    s2 = Snapshot(time=0, claims=(held,), slices=(SLICE,),
                  device_truth=(truth(gpu("gpu-0", sharing="MPS", sharing_claim="uid-s")),))  # fmt: skip
    assert [v for v in sharing_explicit.check(s2) if "device truth" in v.message] == []


def test_a_claim_reserved_for_several_pods_counts_as_shared() -> None:
    a, b = pod("w-0", claims={"gpus": "s"}), pod("w-1", claims={"gpus": "s"})
    shared = claim("s", [request()], [result("gpu-0")], reserved=[a, b])
    [v] = sharing_explicit.check(Snapshot(time=0, pods=(a, b), claims=(shared,), slices=(SLICE,)))
    assert "shares device" in v.message and "without naming a sharing strategy" in v.message
    alone = claim("s", [request()], [result("gpu-0")], reserved=[a])
    assert sharing_explicit.check(Snapshot(time=0, pods=(a,), claims=(alone,), slices=(SLICE,))) == []


def test_a_container_that_could_not_get_its_devices_breaks_container_devices_once() -> None:
    failed = Incident("container-failed", "", "container main of pod chaos/w-0: unresolvable CDI devices "
                      "gpu.draguard.dev/gpu=uid-a-gpu-0", ("uid-a",), "chaos/w-0")  # fmt: skip
    s = Snapshot(time=0, device_truth=(truth(gpu(), incidents=(failed, failed)),))
    [v] = container_devices.check(s)
    assert "unresolvable CDI devices gpu.draguard.dev/gpu=uid-a-gpu-0" in v.message
    assert v.objects == ("Node/node-a", "Pod/chaos/w-0")
