"""``cdi-specs-resolve`` and ``lock-free-handlers`` on recorded calls: what each flags, and what it must not."""

from __future__ import annotations

from draguard.harness.invariants import DriverCall, NodeDriverState, PreparedDevice, Snapshot, evaluate
from draguard.harness.invariants.lock_free_handlers import waits

D = "test-driver.cdi.k8s.io"


def _prepare(t: float, uid: str, cdi: str | None = None, duration: float = 0.05, node: str = "n0") -> DriverCall:
    answer = (PreparedDevice("n0", f"dev-{uid}", ("req",), (cdi,) if cdi else ()),)
    return DriverCall(t, node, D, "NodePrepareResources", (("ns", f"c-{uid}", uid),), "OK", answers={uid: answer},
                      duration=duration)


def _unprepare(t: float, uid: str, duration: float = 0.05, status: str = "OK", error: str = "") -> DriverCall:
    return DriverCall(t, "n0", D, "NodeUnprepareResources", (("ns", f"c-{uid}", uid),), status, error,
                      duration=duration)


def _snap(t: float, calls: list[DriverCall], devices: frozenset[str] | None) -> Snapshot:
    return Snapshot(time=t, driver_calls=tuple(calls), drivers=(NodeDriverState("n0", D, cdi_devices=devices),))


def _cdi(snap: Snapshot) -> list[str]:
    return [v.message for v in evaluate(snap, ["cdi-specs-resolve"])["cdi-specs-resolve"]]


def test_a_prepared_claims_cdi_ids_must_resolve_on_its_node() -> None:
    calls = [_prepare(1.0, "a", f"{D}/test=claim-a")]
    assert _cdi(_snap(10.0, calls, frozenset({f"{D}/test=claim-a"}))) == []
    missing = _cdi(_snap(10.0, calls, frozenset({f"{D}/test=claim-a-other"})))
    assert len(missing) == 1 and f"{D}/test=claim-a" in missing[0] and "no CDI spec" in missing[0]
    assert _cdi(_snap(2.0, calls, frozenset())) == [], "within SETTLE of the answer: not judged yet"
    assert _cdi(_snap(10.0, calls, None)) == [], "a node whose CDI folder was not read is not judged"


def test_a_reboot_empties_the_folder_and_only_the_prepare_after_it_is_judged() -> None:
    calls = [_prepare(1.0, "a", f"{D}/test=claim-a")]
    rebooted = (NodeDriverState("n0", D, cdi_devices=frozenset(), booted=8.0),)
    snap = Snapshot(time=12.0, driver_calls=tuple(calls), drivers=rebooted)
    assert _cdi(snap) == [], "answered before the reboot emptied the folder: waits for the prepare after it"
    again = (*calls, _prepare(9.0, "a", f"{D}/test=claim-a"))  # the kubelet prepares again; no spec written
    found = _cdi(Snapshot(time=12.0, driver_calls=again, drivers=rebooted))
    assert len(found) == 1 and "no CDI spec" in found[0], found
    kept = (NodeDriverState("n0", D, cdi_devices=frozenset({f"{D}/test=claim-a"}), booted=8.0),)
    assert _cdi(Snapshot(time=12.0, driver_calls=again, drivers=kept)) == []


def test_an_unprepared_claim_leaves_no_cdi_device_behind() -> None:
    calls = [_prepare(1.0, "a", f"{D}/test=claim-a"), _unprepare(3.0, "a")]
    assert _cdi(_snap(10.0, calls, frozenset())) == []
    left = _cdi(_snap(10.0, calls, frozenset({f"{D}/test=claim-a"})))
    assert len(left) == 1 and "still defines" in left[0]
    shared = [*calls, _prepare(4.0, "b", f"{D}/test=claim-a")]  # another prepared claim answered the same ID
    assert _cdi(_snap(10.0, shared, frozenset({f"{D}/test=claim-a"}))) == []
    failed = [calls[0], _unprepare(3.0, "a", status="UNKNOWN", error="boom")]
    assert _cdi(_snap(10.0, failed, frozenset({f"{D}/test=claim-a"}))) == [], "not unprepared: still held"


def test_a_repeated_prepare_that_renames_the_device_leaves_the_first_id_unresolved_only_if_the_answer_changed() -> None:
    calls = [_prepare(1.0, "a", f"{D}/test=claim-a"), _prepare(3.0, "a", f"{D}/test=claim-a-again7")]
    assert len(_cdi(_snap(10.0, calls, frozenset({f"{D}/test=claim-a"})))) == 1
    assert _cdi(_snap(10.0, calls, frozenset({f"{D}/test=claim-a-again7"}))) == []


def _lock(calls: list[DriverCall]) -> list[str]:
    return [v.message for v in evaluate(Snapshot(time=60.0, driver_calls=tuple(calls)), ["lock-free-handlers"])["lock-free-handlers"]]


SOLO = [_prepare(float(i), f"s{i}") for i in range(3)]  # own time of a prepare: 0.05 s


def test_a_call_that_waited_for_another_claims_slow_call_is_a_violation() -> None:
    slow = _prepare(10.0, "a", duration=3.0)
    waited = _prepare(10.5, "b", duration=2.55)  # answered 0.05 s after the slow one: its own time
    found = _lock([*SOLO, slow, waited])
    assert len(found) == 1 and "waited 2.5s" in found[0] and "c-b" in found[0], found
    first = _prepare(10.0, "b", duration=4.03)  # sent first, lost the race for the lock (as recorded upstream)
    raced = _lock([_prepare(10.001, "a", duration=2.01), first])
    assert len(raced) == 1 and "c-b" in raced[0] and "waited 2.0s" in raced[0], raced
    unprep = _unprepare(10.4, "c", duration=2.65)  # an unprepare waits as well
    assert len(_lock([*SOLO, slow, unprep, _unprepare(20.0, "d")])) == 1


def test_calls_handled_in_parallel_or_slow_alike_are_not_a_violation() -> None:
    slow = _prepare(10.0, "a", duration=3.0)
    assert _lock([*SOLO, slow, _prepare(10.5, "b", duration=0.05)]) == [], "answered at once: parallel"
    assert _lock([*SOLO, slow, _prepare(10.5, "b", duration=3.5)]) == [], "answered long after A: its own slowness"
    assert _lock([*SOLO, slow, _prepare(10.5, "a", duration=2.55)]) == [], "the same claim: the wait is right"
    assert _lock([*SOLO, slow, _prepare(12.5, "b", duration=0.6)]) == [], "waited 0.5 s: under MIN_WAIT"
    every_slow = [_prepare(float(i * 10), f"s{i}", duration=2.0) for i in range(3)]
    assert _lock([*every_slow, _prepare(40.0, "a", duration=2.0), _prepare(40.5, "b", duration=2.0)]) == [], \
        "a driver slow for every call alike: B took its own time"
    other_node = _prepare(10.5, "b", duration=2.55, node="n1")
    assert waits(Snapshot(time=60.0, driver_calls=(*SOLO, slow, other_node))) == []
    injected = DriverCall(10.5, "n0", D, "NodePrepareResources", (("ns", "c-b", "b"),), "OK", injected="delay",
                          duration=2.55)
    assert _lock([*SOLO, slow, injected]) == [], "the interposer's own delay is not the driver's"
