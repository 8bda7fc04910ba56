"""The invariants that judge any driver from its recorded gRPC calls and answers: prepare-idempotent,
unprepare-unknown, prepared-devices-allocated and no-prepare-loop (synthesized interposer records)."""

from __future__ import annotations

from invariant_objects import NS, claim, pod, request, result

from draguard.harness.core.registry import INVARIANTS
from draguard.harness.invariants import DriverCall, PreparedDevice, Snapshot
from draguard.harness.invariants import no_prepare_loop, prepare_idempotent, prepared_devices, unprepare_unknown
from draguard.harness.scenario.checks import lacking

NODE = "node-a"
DRIVER = "gpu.draguard.dev"
GPUS = (NS, "infer-0-gpus", "uid-infer-0-gpus")
OTHER = (NS, "infer-1-gpus", "uid-infer-1-gpus")
PREPARE, UNPREPARE = "NodePrepareResources", "NodeUnprepareResources"


def call(t: float, method: str, status: str = "OK", claims: tuple[tuple[str, str, str], ...] = (GPUS,), *,
         error: str = "", claim_errors: dict[str, str] | None = None, injected: str | None = None,
         answers: dict[str, tuple[PreparedDevice, ...]] | None = None) -> DriverCall:
    return DriverCall(time=t, node=NODE, driver=DRIVER, method=method, claims=claims, status=status, error=error,
                      claim_errors=claim_errors or {}, injected=injected, answers=answers)


def dev(name: str, cdi: str | None = None, requests: tuple[str, ...] = ("gpu",)) -> PreparedDevice:
    return PreparedDevice(NODE, name, requests, (cdi or f"k8s.{DRIVER}/gpu={name}",))


def snap(*calls: DriverCall, **kw: object) -> Snapshot:
    return Snapshot(time=99, driver_calls=calls, **kw)  # type: ignore[arg-type]


# -- prepare-idempotent --------------------------------------------------------------------------
def test_a_repeated_prepare_that_fails_is_a_violation_naming_the_claim_and_both_answers() -> None:
    first = call(1, PREPARE, answers={GPUS[2]: (dev("gpu-0"),)})
    again = call(5, PREPARE, claim_errors={GPUS[2]: "claim uid-infer-0-gpus already prepared"})
    [v] = prepare_idempotent.check(snap(first, again))
    assert v.invariant == "prepare-idempotent" and v.time == 5
    assert "failed a repeated prepare of ResourceClaim" in v.message and "already prepared" in v.message
    assert "prepared at 1.0s with node-a/gpu-0" in v.message
    assert v.objects == (f"ResourceClaim/{NS}/infer-0-gpus",) and v.devices == (f"{DRIVER}/{NODE}/gpu-0",)


def test_a_repeated_prepare_that_answers_other_devices_or_cdi_ids_is_a_violation() -> None:
    first = call(1, PREPARE, answers={GPUS[2]: (dev("gpu-0"),)})
    for other in ((dev("gpu-1"),), (dev("gpu-0", cdi="k8s.gpu.draguard.dev/gpu=stale"),)):
        [v] = prepare_idempotent.check(snap(first, call(5, PREPARE, answers={GPUS[2]: other})))
        assert "answered a repeated prepare" in v.message and "the first prepare (prepared at 1.0s" in v.message


def test_a_repeated_prepare_answered_alike_and_a_prepare_after_an_unprepare_hold() -> None:
    same = {GPUS[2]: (dev("gpu-0"),)}
    fine = (
        call(1, PREPARE, answers=same), call(2, PREPARE, answers=same),  # idempotent
        call(3, PREPARE, answers=None),  # the record does not carry the answer: nothing to compare
        call(4, PREPARE, "UNAVAILABLE", error="connection refused"),  # the driver was down: not its answer
        call(5, PREPARE, "UNKNOWN", injected="error"),  # the interposer's own fault
        call(6, UNPREPARE),
        call(7, PREPARE, claim_errors={GPUS[2]: "reset of gpu-0 pending"}),  # not prepared any more: not a repeat
    )
    assert prepare_idempotent.check(snap(*fine)) == []


def test_a_call_failed_as_a_whole_with_an_unprepared_claim_in_it_is_not_blamed_on_the_prepared_one() -> None:
    calls = (call(1, PREPARE), call(5, PREPARE, "INTERNAL", (GPUS, OTHER), error="no device for infer-1"))
    assert prepare_idempotent.check(snap(*calls)) == []
    both = (call(1, PREPARE, claims=(GPUS, OTHER)), call(5, PREPARE, "INTERNAL", (GPUS, OTHER), error="busy"))
    assert len(prepare_idempotent.check(snap(*both))) == 2


# -- unprepare-unknown ---------------------------------------------------------------------------
def test_an_unprepare_of_an_unknown_or_already_unprepared_claim_that_fails_is_a_violation() -> None:
    [unknown] = unprepare_unknown.check(snap(call(2, UNPREPARE, claim_errors={GPUS[2]: "unknown claim"})))
    assert "(never prepared on this node)" in unknown.message and "unknown claim" in unknown.message
    twice = (call(1, PREPARE), call(2, UNPREPARE), call(3, UNPREPARE, "NOT_FOUND", error="claim not found"))
    [again] = unprepare_unknown.check(snap(*twice))
    assert "(already unprepared)" in again.message and "NOT_FOUND: claim not found" in again.message
    assert again.objects == (f"ResourceClaim/{NS}/infer-0-gpus",) and again.time == 3
    failed = (call(1, PREPARE, claim_errors={GPUS[2]: "injected prepare failure"}),
              call(2, UNPREPARE, claim_errors={GPUS[2]: "unknown claim"}))
    [never] = unprepare_unknown.check(snap(*failed))
    assert "(its prepare failed)" in never.message
    injected = (call(1, PREPARE, "UNAVAILABLE", error="injected prepare failure", injected="error"),
                call(2, PREPARE, "DEADLINE_EXCEEDED", injected="hang"),
                call(3, UNPREPARE, claim_errors={GPUS[2]: "claim not found in the checkpoint"}))
    [unseen] = unprepare_unknown.check(snap(*injected))
    assert "(never prepared on this node)" in unseen.message, "the interposer's failures never reached the driver"


def test_unprepares_of_held_or_half_prepared_claims_and_successes_hold() -> None:
    fine = (
        call(1, UNPREPARE),  # unknown, and it succeeds
        call(2, PREPARE), call(3, UNPREPARE, claim_errors={GPUS[2]: "reset of gpu-0 failed"}),  # held: not judged
        call(4, UNPREPARE),
        call(5, PREPARE, "UNAVAILABLE", claims=(OTHER,)),  # a prepare the driver never answered: may hold part
        call(6, UNPREPARE, claims=(OTHER,), claim_errors={OTHER[2]: "reset failed"}),
        call(7, UNPREPARE, "UNKNOWN", injected="error"),  # the interposer's fault
        call(8, PREPARE, claims=(GPUS, OTHER), claim_errors={GPUS[2]: "injected"}, injected="claim-error"),
        call(9, UNPREPARE, claims=(OTHER,), claim_errors={OTHER[2]: "reset failed"}),  # OTHER reached the driver
    )
    assert unprepare_unknown.check(snap(*fine)) == []


# -- prepared-devices-allocated ------------------------------------------------------------------
def test_a_prepare_that_answers_a_device_the_allocation_does_not_name_is_a_violation() -> None:
    c = claim("infer-0-gpus", [request(count=2)], [result("gpu-0"), result("gpu-1")])
    wrong = call(2, PREPARE, answers={GPUS[2]: (dev("gpu-0"), dev("gpu-3"))})
    [v] = prepared_devices.check(snap(wrong, claims=(c,)))
    assert "answered node-a/gpu-3, which the allocation does not name" in v.message
    assert "did not answer allocated node-a/gpu-1" in v.message and "(allocated: node-a/gpu-0, node-a/gpu-1)" in v.message
    assert set(v.devices) == {f"{DRIVER}/{NODE}/gpu-{i}" for i in (0, 1, 3)}


def test_a_device_answered_for_another_request_is_a_violation_and_a_sub_request_counts_for_its_request() -> None:
    c = claim("infer-0-gpus", [request("gpu"), request("nic")], [result("gpu-0", req="gpu/h100"), result("gpu-1", req="nic")])
    ok = call(2, PREPARE, answers={GPUS[2]: (dev("gpu-0", requests=("gpu/h100",)), dev("gpu-1", requests=("nic",)))})
    assert prepared_devices.check(snap(ok, claims=(c,))) == []
    swapped = call(2, PREPARE, answers={GPUS[2]: (dev("gpu-0", requests=("nic",)), dev("gpu-1", requests=()))})
    [v] = prepared_devices.check(snap(swapped, claims=(c,)))
    assert "answered node-a/gpu-0 for request(s) nic, but it was allocated for gpu/h100" in v.message


def test_answers_that_match_and_claims_that_cannot_be_compared_hold() -> None:
    c = claim("infer-0-gpus", [request()], [result("gpu-0"), {**result("nic-0"), "driver": "nic.example.com"}])
    fine = (
        call(1, PREPARE, answers={GPUS[2]: (dev("gpu-0"),)}),  # another driver's device is not this one's to answer
        call(2, PREPARE, answers=None),  # nothing recorded
        call(3, PREPARE, claims=(OTHER,), answers={OTHER[2]: (dev("gpu-7"),)}),  # claim gone from the API
        call(4, PREPARE, claim_errors={GPUS[2]: "busy"}, answers={}),  # failed: no answer to compare
    )
    assert prepared_devices.check(snap(*fine, claims=(c,))) == []


def test_what_a_claim_holds_now_is_judged_not_a_prepare_since_unprepared_or_of_an_allocation_now_elsewhere() -> None:
    c = claim("infer-0-gpus", [request()], [result("gpu-1")])
    wrong = call(1, PREPARE, answers={GPUS[2]: (dev("gpu-0"),)})  # answered for an allocation since replaced
    assert prepared_devices.check(snap(wrong, call(2, UNPREPARE), call(3, PREPARE, answers={GPUS[2]: (dev("gpu-1"),)}),
                                       claims=(c,))) == []
    assert prepared_devices.check(snap(wrong, call(2, UNPREPARE), claims=(c,))) == []
    moved = claim("infer-0-gpus", [request()], [result("gpu-1", node="node-b")], node="node-b")
    assert prepared_devices.check(snap(wrong, claims=(moved,))) == []  # node-a never released it: no-leak's
    [v] = prepared_devices.check(snap(wrong, call(2, UNPREPARE, "UNKNOWN", error="reset failed"), claims=(c,)))
    assert v.time == 1 and "answered node-a/gpu-0, which the allocation does not name" in v.message


def test_a_device_of_another_claim_answered_names_both_devices_and_the_claim() -> None:
    mine = claim("infer-0-gpus", [request()], [result("gpu-0")])
    theirs = claim("infer-1-gpus", [request()], [result("gpu-1")])
    swapped = call(2, PREPARE, claims=(GPUS, OTHER), answers={GPUS[2]: (dev("gpu-1"),), OTHER[2]: (dev("gpu-1"),)})
    [v] = prepared_devices.check(snap(swapped, claims=(mine, theirs)))
    assert v.objects == (f"ResourceClaim/{NS}/infer-0-gpus",) and v.key == f"{NODE}/{GPUS[2]}"
    assert v.message.startswith(f"{DRIVER} on {NODE} prepared ResourceClaim {NS}/infer-0-gpus at 2.0s and answered "
                                "node-a/gpu-1, which the allocation does not name; did not answer allocated node-a/gpu-0")
    assert set(v.devices) == {f"{DRIVER}/{NODE}/gpu-0", f"{DRIVER}/{NODE}/gpu-1"}


def test_it_is_judged_with_the_interposer_and_not_without_saying_why() -> None:
    entry = INVARIANTS.get("prepared-devices-allocated")
    assert entry.meta["needs"] == ("interposer-answers",)
    assert "interposer-answers" not in lacking("fake", "local", True)
    for driver in ("fake", "external"):
        assert lacking(driver, "local", False)["interposer-answers"].startswith("spec.driver.interpose is not true")


# -- no-prepare-loop -----------------------------------------------------------------------------
def _waiting(phase: str = "Pending", node: str = NODE, deleting: bool = False) -> tuple[dict[str, object], dict[str, object]]:
    p = pod("infer-0", node=node, template_claims={"gpus": "infer-0-gpus"}, phase=phase)
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"  # type: ignore[index]
    c = claim("infer-0-gpus", [request()], [result("gpu-0")], reserved=[p])
    return p, c


def _failures(times: tuple[float, ...]) -> tuple[DriverCall, ...]:
    return tuple(call(t, PREPARE, claim_errors={GPUS[2]: "claim already prepared with other devices"}) for t in times)


LOOP = (0.0, 0.5, 1.5, 3.5, 7.5, 15.5, 25.5, 35.5)


def test_a_prepare_failing_again_and_again_for_a_pod_that_should_run_is_a_violation() -> None:
    p, c = _waiting()
    [v] = no_prepare_loop.check(snap(call(-5, PREPARE), call(-4, UNPREPARE), *_failures(LOOP), pods=(p,), claims=(c,)))
    assert v.invariant == "no-prepare-loop" and v.time == 0.0
    assert "failed the prepare of ResourceClaim" in v.message and "8 times in a row from 0.0s to 35.5s" in v.message
    assert "pod(s) infer-0 waited" in v.message and "already prepared with other devices" in v.message
    assert set(v.objects) == {f"ResourceClaim/{NS}/infer-0-gpus", f"Pod/{NS}/infer-0"}


def test_transient_failures_gone_pods_and_failures_that_are_not_the_drivers_hold() -> None:
    p, c = _waiting()
    assert no_prepare_loop.check(snap(*_failures((0, 0.5, 1.5)), pods=(p,), claims=(c,))) == []  # a few retries
    assert no_prepare_loop.check(snap(*_failures((0, 0.5, 1.5, 3.5, 7.5, 15.5)), pods=(p,), claims=(c,))) == []  # < 30 s
    assert no_prepare_loop.check(snap(*_failures(LOOP), call(40, PREPARE), pods=(p,), claims=(c,))) == []  # it succeeded
    down = tuple(call(t, PREPARE, "UNAVAILABLE", error="connection refused") for t in LOOP)
    assert no_prepare_loop.check(snap(*down, pods=(p,), claims=(c,))) == []  # the driver was kept down
    injected = tuple(call(t, PREPARE, "UNKNOWN", injected="error") for t in LOOP)
    assert no_prepare_loop.check(snap(*injected, pods=(p,), claims=(c,))) == []
    for gone in (_waiting(deleting=True), _waiting(phase="Failed"), _waiting(node="node-b")):
        assert no_prepare_loop.check(snap(*_failures(LOOP), pods=(gone[0],), claims=(gone[1],))) == []
    assert no_prepare_loop.check(snap(*_failures(LOOP), pods=(), claims=(c,))) == []  # the pod is gone


def test_each_judges_any_driver_and_needs_only_the_record() -> None:
    for name in ("prepare-idempotent", "unprepare-unknown", "no-prepare-loop"):
        entry = INVARIANTS.get(name)
        assert entry.meta["needs"] == ("interposer",) and entry.meta["judged"] == "continuously"
        assert entry.summary.endswith(".")
