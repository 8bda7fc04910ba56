"""sharing-explicit: shared accelerators name a strategy; sharing state goes with its claims."""

from __future__ import annotations

from invariant_objects import DRIVER, claim, gpus, request, result

from draguard.harness.invariants import DeviceState, NodeDriverState, Snapshot
from draguard.harness.invariants.sharing_explicit import check

TIME_SLICING = [{"requests": [], "opaque": {"driver": DRIVER, "parameters": {
    "apiVersion": "gpu.draguard.dev/v1alpha1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}]  # fmt: skip


def test_shared_devices_with_a_strategy_and_exclusive_devices_hold() -> None:
    a = claim("a", [request()], [result("gpu-0")], config=TIME_SLICING)
    b = claim("b", [request()], [result("gpu-0")], config=TIME_SLICING)
    alone = claim("alone", [request()], [result("gpu-1")])
    assert check(Snapshot(time=0, claims=(a, b, alone), slices=(gpus("node-a"),))) == []


def test_a_strategy_recorded_in_the_allocation_config_counts() -> None:
    c = claim("c", [request()], [result("gpu-0")])
    c["status"]["allocation"]["devices"]["config"] = [{"source": "FromClass", **TIME_SLICING[0]}]
    assert check(Snapshot(time=0, claims=(c,), slices=(gpus("node-a", multi=True),))) == []


def test_a_shared_device_without_strategy_is_a_violation() -> None:
    a = claim("a", [request()], [result("gpu-0")], config=TIME_SLICING)
    b = claim("b", [request()], [result("gpu-0")])
    [violation] = check(Snapshot(time=0, claims=(a, b), slices=(gpus("node-a"),)))
    assert violation.message == (
        "ResourceClaim/chaos/b shares device gpu.draguard.dev/node-a/gpu-0 without naming a sharing strategy "
        "(opaque config parameters.sharing.strategy)"
    )


def test_a_config_for_another_request_does_not_count() -> None:
    other = [{"requests": ["nic"], "opaque": TIME_SLICING[0]["opaque"]}]
    c = claim("c", [request()], [result("gpu-0", shareID="s-1")], config=other)
    assert len(check(Snapshot(time=0, claims=(c,), slices=(gpus("node-a"),)))) == 1


def test_sharing_state_left_after_unprepare_is_a_violation() -> None:
    live = NodeDriverState("node-a", DRIVER, prepared={"uid-a": ()},
                           devices={"gpu-0": DeviceState("prepared", ("uid-a",), "MPS")})  # fmt: skip
    assert check(Snapshot(time=0, drivers=(live,))) == []
    stale = NodeDriverState("node-a", DRIVER, devices={"gpu-0": DeviceState("free", ("uid-a",), "MPS")})
    [violation] = check(Snapshot(time=0, drivers=(stale,)))
    assert violation.message == "device gpu-0 on node node-a keeps MPS sharing state after its claims were unprepared"
