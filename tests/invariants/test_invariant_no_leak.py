"""no-leak: nothing outlives its consumer, and the inventory comes back."""

from __future__ import annotations

from invariant_objects import DRIVER, claim, gpus, pod, request, result

from draguard.harness.invariants import DeviceId, DeviceState, GpuUsage, NodeDriverState, Snapshot
from draguard.harness.invariants.no_leak import check

SLICE = gpus("node-a")
INVENTORY = frozenset(DeviceId(DRIVER, "node-a", f"gpu-{i}") for i in range(4))
GPU0 = DeviceId(DRIVER, "node-a", "gpu-0")


def test_a_running_consumer_with_its_prepared_claim_holds() -> None:
    p = pod("w-0", claims={"gpus": "c"})
    c = claim("c", [request()], [result("gpu-0")], reserved=[p])
    driver = NodeDriverState("node-a", DRIVER, prepared={"uid-c": (GPU0,)},
                             devices={"gpu-0": DeviceState("prepared", ("uid-c",))}, cdi_specs=frozenset({"uid-c"}))  # fmt: skip
    assert check(Snapshot(time=0, pods=(p,), claims=(c,), slices=(SLICE,), drivers=(driver,),
                          initial_inventory=INVENTORY)) == []  # fmt: skip


def test_everything_released_after_consumers_left_holds() -> None:
    driver = NodeDriverState("node-a", DRIVER, devices={f"gpu-{i}": DeviceState() for i in range(4)})
    done = pod("w-0", phase="Succeeded")
    done["spec"]["resourceClaims"] = []
    assert check(Snapshot(time=0, pods=(done,), slices=(SLICE,), drivers=(driver,), initial_inventory=INVENTORY)) == []


def test_reservations_for_gone_or_finished_pods_and_unreserved_allocations_are_leaks() -> None:
    finished = pod("w-1", phase="Succeeded", claims={"gpus": "b"})
    gone = claim("a", [request()], [result("gpu-0")], reserved=[pod("w-0")])
    done = claim("b", [request()], [result("gpu-1")], reserved=[finished])
    orphan = claim("c", [request()], [result("gpu-2")])
    messages = [v.message for v in check(Snapshot(time=0, pods=(finished,), claims=(gone, done, orphan),
                                                  slices=(SLICE,)))]  # fmt: skip
    assert messages == [
        "ResourceClaim/chaos/a: reservedFor names pod w-0 (uid uid-w-0), which is gone",
        "ResourceClaim/chaos/b: reservedFor names pod w-1, which has finished (Succeeded)",
        "ResourceClaim/chaos/c: allocated but reserved for no consumer",
    ]


def test_prepared_claims_and_cdi_specs_without_owner_are_leaks() -> None:
    driver = NodeDriverState("node-a", DRIVER, prepared={"uid-gone": (GPU0,)}, cdi_specs=frozenset({"uid-gone", "uid-x"}))
    found = check(Snapshot(time=0, drivers=(driver,)))
    assert [v.message for v in found] == [
        "driver gpu.draguard.dev on node node-a still has claim uid-gone prepared, but no allocated claim has that uid",
        "node node-a has a CDI spec for claim uid-x, which driver gpu.draguard.dev has not prepared",
    ]
    assert found[0].devices == ("gpu.draguard.dev/node-a/gpu-0",)


def test_a_device_lost_or_stuck_after_consumers_left_is_a_leak() -> None:
    shrunk = gpus("node-a", n=3)
    driver = NodeDriverState("node-a", DRIVER, devices={"gpu-1": DeviceState("resetting")})
    [violation] = check(Snapshot(time=0, slices=(shrunk,), drivers=(driver,), initial_inventory=INVENTORY))
    assert violation.message.startswith("device inventory is 2 of 4 at the start after all consumers left")
    assert violation.devices == ("gpu.draguard.dev/node-a/gpu-1", "gpu.draguard.dev/node-a/gpu-3")


def test_the_inventory_is_not_judged_while_consumers_live() -> None:
    p = pod("w-0", claims={"gpus": "c"})
    c = claim("c", [request()], [result("gpu-0")], reserved=[p])
    assert check(Snapshot(time=0, pods=(p,), claims=(c,), slices=(SLICE,), initial_inventory=INVENTORY)) == []


def test_gpu_memory_left_on_a_freed_device_is_a_leak() -> None:
    usage = {GPU0: GpuUsage(processes=(4242,), memory_used_bytes=1 << 30), DeviceId(DRIVER, "node-a", "gpu-1"): GpuUsage()}
    [violation] = check(Snapshot(time=0, slices=(SLICE,), gpu_usage=usage))
    assert violation.message == (
        "freed device gpu.draguard.dev/node-a/gpu-0 still has 1 process(es) and 1073741824 bytes of memory in use"
    )


def test_a_deleted_pod_still_there_with_its_claims_after_cleanup_is_a_leak() -> None:
    stuck = pod("w-0", template_claims={"gpus": "w-0-gpus"}, phase="Pending")
    stuck["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:05Z"
    c = claim("w-0-gpus", [request()], [result("gpu-0")], reserved=[stuck])
    [violation] = check(Snapshot(time=9, pods=(stuck,), claims=(c,), slices=(SLICE,), initial_inventory=INVENTORY))
    assert violation.message == ("Pod/chaos/w-0 was deleted at 2026-12-01T10:00:05Z and is still there, holding 1 "
                                 "claim(s): its node cannot unprepare them")  # fmt: skip
    assert violation.objects == ("Pod/chaos/w-0", "ResourceClaim/chaos/w-0-gpus")
    assert violation.devices == ("gpu.draguard.dev/node-a/gpu-0",)
    del stuck["metadata"]["deletionTimestamp"]  # the same pod, not deleted: a consumer, nothing to judge yet
    assert check(Snapshot(time=9, pods=(stuck,), claims=(c,), slices=(SLICE,), initial_inventory=INVENTORY)) == []
