"""per-claim-errors: a driver never fails a call of several claims as a whole (judged from the interposer's record)."""

from __future__ import annotations

from invariant_objects import NS, claim, pod, request, result

from draguard.harness.invariants import DriverCall, Snapshot
from draguard.harness.invariants.per_claim_errors import check
from draguard.harness.core.registry import INVARIANTS

BROKEN = (NS, "old-0-broken-x", "uid-broken")
HEALTHY = (NS, "old-0-healthy-y", "uid-healthy")


def call(status: str, claims: tuple[tuple[str, str, str], ...] = (BROKEN, HEALTHY), *,
         method: str = "NodeUnprepareResources", injected: str | None = None, **kw: object) -> DriverCall:
    return DriverCall(time=3.5, node="gpu-node-0", driver="gpu.draguard.dev", method=method, claims=claims,
                      status=status, injected=injected, **kw)  # type: ignore[arg-type]


def test_a_call_of_two_claims_failed_as_a_whole_is_a_violation_whatever_the_order() -> None:
    for claims in ((BROKEN, HEALTHY), (HEALTHY, BROKEN)):
        [v] = check(Snapshot(time=9, driver_calls=(call("UNKNOWN", claims, error="reset of gpu-0 failed"),)))
        assert v.invariant == "per-claim-errors" and v.time == 3.5
        assert "failed NodeUnprepareResources of 2 claims" in v.message and "with UNKNOWN: reset of gpu-0 failed" in v.message
        assert set(v.objects) == {f"ResourceClaim/{NS}/old-0-broken-x", f"ResourceClaim/{NS}/old-0-healthy-y"}


def test_prepare_is_judged_too_and_the_claims_pods_and_devices_are_named() -> None:
    owner = pod("old-0", claims={"gpus": "old-0-gpus"})
    c = claim("old-0-gpus", [request()], [result("gpu-1", node="gpu-node-0")], owner=owner, node="gpu-node-0")
    other = (NS, "old-0-more", "uid-more")
    [v] = check(Snapshot(time=1, claims=(c,), driver_calls=(
        call("INTERNAL", ((NS, "old-0-gpus", "uid-old-0-gpus"), other), method="NodePrepareResources"),)))
    assert f"Pod/{NS}/old-0" in v.objects and "gpu.draguard.dev/gpu-node-0/gpu-1" in v.devices


def test_per_claim_errors_single_claims_and_statuses_that_are_not_the_drivers_answer_hold() -> None:
    fine = (
        call("OK", claim_errors={"uid-broken": "reset of gpu-0 failed"}),  # the correct driver's answer
        call("UNKNOWN", (BROKEN,)),  # one claim fails alone either way
        call("UNAVAILABLE", error="connection refused"),  # no driver behind the socket
        call("DEADLINE_EXCEEDED"),  # the caller gave up on a hung call
        call("CANCELLED"),
        call("INTERNAL", error="Received RST_STREAM with error code 2"),  # the driver process died mid-call
        call("UNKNOWN", error="Stream removed"),
        call("UNKNOWN", injected="error"),  # the interposer's own fault
        call("UNKNOWN", injected="duplicate"),  # a call the interposer made itself
        call("UNKNOWN", method="GetInfo"),
    )
    assert check(Snapshot(time=9, driver_calls=fine)) == []


def test_one_breach_per_node_method_and_claims_however_often_retried() -> None:
    retries = tuple(call("UNKNOWN") for _ in range(5))
    keys = {v.key for v in check(Snapshot(time=9, driver_calls=retries))}
    assert len(keys) == 1


def test_it_declares_that_it_needs_the_interposer() -> None:
    entry = INVARIANTS.get("per-claim-errors")
    assert entry.meta["needs"] == ("interposer",) and entry.meta["judged"] == "continuously"
