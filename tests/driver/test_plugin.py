"""Prepare/unprepare behaviour of the fake driver, its device state machine and its mutants,
driven in-process with claims read from an in-memory store."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from draguard.harness import cdi
from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.driver.fault_control import set_faults
from draguard.harness.grpcapi.plugin import ClaimRef
from draguard.harness.driver.state import (
    Checkpoint,
    ClaimRecord,
    ClaimState,
    DeviceRecord,
    DeviceState,
    PreparedDevice,
    read_checkpoint,
)
from draguard.harness.core.paths import DEFAULT_DRIVER

from .conftest import NODE, ClaimStore, allocated_claim, make_driver


def _ref(store: ClaimStore, claim: dict) -> ClaimRef:  # type: ignore[type-arg]
    return store.add(claim)


def test_prepare_reserves_the_devices_writes_a_cdi_spec_and_checkpoints_the_claim(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-0", "gpu-1"]))
    result = drv.prepare([ref])[ref.uid]
    assert result.error == ""
    assert [d.device for d in result.devices] == ["gpu-0", "gpu-1"]
    assert all(d.pool == NODE and d.requests == ["req"] for d in result.devices)
    ids = [i for d in result.devices for i in d.cdi_device_ids]
    assert ids == [f"{DEFAULT_DRIVER}/gpu={ref.uid}-gpu-0", f"{DEFAULT_DRIVER}/gpu={ref.uid}-gpu-1"]
    assert cdi.check_ids(drv.dirs.cdi, ids) == []
    cp = read_checkpoint(root, NODE)
    assert cp.claims[ref.uid].state is ClaimState.PREPARE_COMPLETED
    assert cp.device_states() == {"gpu-0": DeviceState.PREPARED, "gpu-1": DeviceState.PREPARED}
    assert cp.leaks() == []


def test_prepare_is_idempotent_and_survives_a_restart(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-2"]))
    first = drv.prepare([ref])[ref.uid]
    again = drv.prepare([ref])[ref.uid]
    restarted = make_driver(root, store).prepare([ref])[ref.uid]
    assert first.devices == again.devices == restarted.devices


def test_unprepare_resets_the_devices_then_forgets_the_claim_and_removes_its_cdi_spec(
    root: Path, store: ClaimStore
) -> None:
    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    drv.prepare([ref])
    assert drv.unprepare([ref]) == {ref.uid: ""}
    cp = read_checkpoint(root, NODE)
    assert cp.claims == {} and cp.device_states() == {"gpu-0": DeviceState.FREE}
    assert not cdi.spec_path(drv.cdi_dir, DEFAULT_DRIVER, ref.uid).exists()
    assert drv.unprepare([ref]) == {ref.uid: ""}, "a second unprepare must succeed too"


def test_unprepare_of_a_claim_the_driver_never_saw_succeeds(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    assert drv.unprepare([ClaimRef(namespace="ns", name="ghost", uid="no-such-uid")]) == {"no-such-uid": ""}


def test_a_claim_of_another_driver_fails_alone_and_names_the_claim_and_driver(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    good = _ref(store, allocated_claim("mine", ["gpu-0"]))
    other = _ref(store, allocated_claim("theirs", ["gpu-1"], driver="gpu.example.com"))
    results = drv.prepare([good, other])
    assert results[good.uid].error == ""
    assert "ns/theirs" in results[other.uid].error and "gpu.draguard.dev" in results[other.uid].error
    assert "gpu.example.com" in results[other.uid].error
    assert set(read_checkpoint(root, NODE).claims) == {good.uid}


def test_prepare_rejects_a_uid_mismatch_a_missing_claim_another_pool_and_an_unknown_device(
    root: Path, store: ClaimStore
) -> None:
    drv = make_driver(root, store)
    real = allocated_claim("c1", ["gpu-0"])
    store.add(real)
    cases = {
        ClaimRef(namespace="ns", name="c1", uid="old-uid"): "UID mismatch",
        ClaimRef(namespace="ns", name="missing", uid="u2"): "not found",
        _ref(store, allocated_claim("far", ["gpu-0"], pool="node-b")): "not this node's pool",
        _ref(store, allocated_claim("odd", ["gpu-99"])): "gpu-99",
    }
    results = drv.prepare(list(cases))
    for ref, fragment in cases.items():
        assert fragment in results[ref.uid].error, results[ref.uid].error
    cp = read_checkpoint(root, NODE)
    assert cp.claims == {} and all(s is DeviceState.FREE for s in cp.device_states().values())


def test_a_device_held_by_one_claim_is_not_handed_to_another(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    a = _ref(store, allocated_claim("a", ["gpu-0"]))
    b = _ref(store, allocated_claim("b", ["gpu-0"]))
    drv.prepare([a])
    assert "gpu-0 is not available" in drv.prepare([b])[b.uid].error
    assert read_checkpoint(root, NODE).leaks() == []


def test_double_allocation_mutant_hands_a_device_to_two_claims(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, mutant="double-allocation")
    a = _ref(store, allocated_claim("a", ["gpu-0"]))
    b = _ref(store, allocated_claim("b", ["gpu-0"]))
    drv.prepare([a])
    assert drv.prepare([b])[b.uid].error == ""
    assert any("handed to 2 claims" in p for p in read_checkpoint(root, NODE).leaks())


def test_a_mig_slice_and_its_whole_gpu_are_never_prepared_for_two_claims(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, topology="a100-mig")
    whole = _ref(store, allocated_claim("whole", ["gpu-0"]))
    part = _ref(store, allocated_claim("part", ["gpu-0-mig-1g10gb-19-3"]))
    other_gpu = _ref(store, allocated_claim("other", ["gpu-1-mig-3g40gb-9-4"]))
    assert drv.prepare([whole])[whole.uid].error == ""
    assert "overlapping device gpu-0" in drv.prepare([part])[part.uid].error
    assert drv.prepare([other_gpu])[other_gpu.uid].error == ""


def test_admin_access_may_share_a_device_that_another_claim_holds(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    a = _ref(store, allocated_claim("a", ["gpu-0"]))
    monitor = _ref(store, allocated_claim("monitor", ["gpu-0"], admin=True))
    drv.prepare([a])
    assert drv.prepare([monitor])[monitor.uid].error == ""
    assert drv.unprepare([monitor]) == {monitor.uid: ""}
    assert read_checkpoint(root, NODE).device_states() == {"gpu-0": DeviceState.PREPARED}


def test_a_failed_reset_keeps_the_claim_reports_an_error_and_a_retry_frees_the_device(
    root: Path, store: ClaimStore
) -> None:
    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-0", "gpu-1"]))
    drv.prepare([ref])
    set_faults(root, NODE, reset_fail={"count": 1, "devices": ["gpu-1"]})
    error = drv.unprepare([ref])[ref.uid]
    assert "reset of device gpu-1 failed" in error
    cp = read_checkpoint(root, NODE)
    assert cp.claims[ref.uid].state is ClaimState.UNPREPARE_STARTED
    assert cp.devices["gpu-1"].state is DeviceState.FAILED and cp.devices["gpu-0"].state is DeviceState.FREE
    assert cp.leaks() == []
    assert {h.device: h.healthy for h in drv.health()}["gpu-1"] is False
    assert drv.unprepare([ref]) == {ref.uid: ""}
    cp = read_checkpoint(root, NODE)
    assert cp.claims == {} and set(cp.device_states().values()) == {DeviceState.FREE}


def test_forget_before_reset_mutant_orphans_the_device_when_the_reset_fails(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, mutant="forget-before-reset")
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    drv.prepare([ref])
    truth = DeviceTruth(root, NODE)
    truth.start_container("pod-1/main", "ns/p1", [ref.uid], ["gpu-0"])
    truth.stop_containers("pod-1")
    set_faults(root, NODE, reset_fail={"forever": True})
    assert "reset of device gpu-0 failed" in drv.unprepare([ref])[ref.uid]
    assert drv.unprepare([ref]) == {ref.uid: ""}, "the retry finds nothing to do: the claim is forgotten"
    cp = read_checkpoint(root, NODE)
    assert cp.claims == {} and cp.leaks() == [], "the driver's books look clean: it forgot the claim and the device"
    # Its health check polls NVML, which reports the device unhealthy: tainted, and never reset again.
    assert {h.device: h.healthy for h in drv.health()}["gpu-0"] is False
    gpu0 = truth.read().devices["gpu-0"]
    assert (gpu0.reset, gpu0.used_by, gpu0.health) == ("failed", (ref.uid,), "unhealthy"), "only the hardware knows"


def test_the_correct_driver_keeps_the_claim_until_the_device_reset_succeeds_in_the_truth(
    root: Path, store: ClaimStore
) -> None:
    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    drv.prepare([ref])
    truth = DeviceTruth(root, NODE)
    truth.start_container("pod-1/main", "ns/p1", [ref.uid], ["gpu-0"])
    assert "NVML_ERROR_IN_USE" in drv.unprepare([ref])[ref.uid], "a device with a running container cannot be reset"
    truth.stop_containers("pod-1")
    set_faults(root, NODE, reset_fail={"count": 1})
    assert "reset of device gpu-0 failed" in drv.unprepare([ref])[ref.uid]
    assert truth.read().devices["gpu-0"].reset == "failed" and ref.uid in read_checkpoint(root, NODE).claims
    assert drv.unprepare([ref]) == {ref.uid: ""}
    gpu0 = truth.read().devices["gpu-0"]
    assert (gpu0.reset, gpu0.used_by, gpu0.containers) == ("clean", (), ())
    assert [i.kind for i in truth.read().incidents] == ["reset-in-use"]


def _interrupted_prepare(root: Path, uid: str) -> None:
    """What a crash right after the PrepareStarted write leaves on disk."""
    cp = Checkpoint(DEFAULT_DRIVER, NODE)
    cp.claims[uid] = ClaimRecord(uid, "ns", "c1", ClaimState.PREPARE_STARTED, [PreparedDevice(["req"], NODE, "gpu-0")])
    cp.devices["gpu-0"] = DeviceRecord(DeviceState.PREPARED, uid)
    (root / NODE / "plugins" / DEFAULT_DRIVER).mkdir(parents=True, exist_ok=True)
    cp.save(root / NODE / "plugins" / DEFAULT_DRIVER / "checkpoint.json")


def test_unprepare_cleans_a_claim_left_in_prepare_started(root: Path, store: ClaimStore) -> None:
    _interrupted_prepare(root, "u1")
    drv = make_driver(root, store)
    assert drv.unprepare([ClaimRef(namespace="ns", name="c1", uid="u1")]) == {"u1": ""}
    assert read_checkpoint(root, NODE).claims == {}


def test_stale_cleanup_unprepares_prepare_started_claims_whose_resource_claim_is_gone(
    root: Path, store: ClaimStore
) -> None:
    _interrupted_prepare(root, "u1")
    assert make_driver(root, store).cleanup_stale() == ["u1"]
    cp = read_checkpoint(root, NODE)
    assert cp.claims == {} and cp.device_states() == {"gpu-0": DeviceState.FREE}


def test_prepare_started_leak_mutant_never_cleans_such_claims(root: Path, store: ClaimStore) -> None:
    _interrupted_prepare(root, "u1")
    drv = make_driver(root, store, mutant="prepare-started-leak")
    assert drv.cleanup_stale() == []
    assert drv.unprepare([ClaimRef(namespace="ns", name="c1", uid="u1")]) == {"u1": ""}
    cp = read_checkpoint(root, NODE)
    assert cp.claims["u1"].state is ClaimState.PREPARE_STARTED
    assert cp.devices["gpu-0"].state is DeviceState.PREPARED


def _prepare_overtaken_by_unprepare(root: Path, store: ClaimStore, mutant: str | None) -> tuple[str, Checkpoint]:
    drv = make_driver(root, store, mutant=mutant)
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    set_faults(root, NODE, prepare_hang={"seconds": 0.4, "count": 1})
    results: dict[str, str] = {}
    worker = threading.Thread(target=lambda: results.update(error=drv.prepare([ref])[ref.uid].error))
    worker.start()
    time.sleep(0.15)  # the prepare has read the claim and hangs
    assert drv.unprepare([ref]) == {ref.uid: ""}
    worker.join(5)
    return results["error"], read_checkpoint(root, NODE)


def test_a_prepare_overtaken_by_unprepare_is_rejected_as_stale(root: Path, store: ClaimStore) -> None:
    error, cp = _prepare_overtaken_by_unprepare(root, store, None)
    assert "stale prepare" in error
    assert cp.claims == {} and all(s is DeviceState.FREE for s in cp.device_states().values())


def test_stale_prepare_mutant_accepts_the_overtaken_prepare(root: Path, store: ClaimStore) -> None:
    error, cp = _prepare_overtaken_by_unprepare(root, store, "stale-prepare")
    assert error == ""
    assert cp.device_states() == {"gpu-0": DeviceState.PREPARED}


def test_unprepare_needs_only_the_uid_once_the_claim_is_deleted(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    drv.prepare([ref])
    store.remove("ns", "c1")
    assert drv.unprepare([ref]) == {ref.uid: ""}


def test_unprepare_needs_claim_mutant_fails_once_the_claim_is_deleted(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, mutant="unprepare-needs-claim")
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    drv.prepare([ref])
    store.remove("ns", "c1")
    assert "not found" in drv.unprepare([ref])[ref.uid]
    assert ref.uid in read_checkpoint(root, NODE).claims


def test_incomplete_cdi_mutant_returns_ids_its_spec_does_not_resolve(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, mutant="incomplete-cdi")
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    ids = [i for d in drv.prepare([ref])[ref.uid].devices for i in d.cdi_device_ids]
    problems = cdi.check_ids(drv.cdi_dir, ids)
    assert ids and f"CDI device {ids[0]} is in no spec under {drv.cdi_dir}" in problems
    assert any("'devices' must list at least one device" in p for p in problems), problems


def test_injected_prepare_and_unprepare_failures_are_per_claim_and_counted(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    a = _ref(store, allocated_claim("a", ["gpu-0"]))
    b = _ref(store, allocated_claim("b", ["gpu-1"]))
    set_faults(root, NODE, prepare_fail={"claims": ["ns/a"], "count": 1}, unprepare_fail={"claims": ["b"], "count": 1})
    first = drv.prepare([a, b])
    assert "injected prepare failure" in first[a.uid].error and first[b.uid].error == ""
    assert drv.prepare([a])[a.uid].error == ""
    assert "injected unprepare failure" in drv.unprepare([a, b])[b.uid]
    assert drv.unprepare([b]) == {b.uid: ""}


def test_health_reports_devices_a_fault_marks_unhealthy(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    assert all(h.healthy for h in drv.health())
    set_faults(root, NODE, unhealthy={"devices": ["gpu-3"], "message": "XID 79"})
    sick = [h for h in drv.health() if not h.healthy]
    assert [(h.device, h.message) for h in sick] == [("gpu-3", "XID 79")]


def test_unhealthy_is_what_health_says_of_the_sick_devices_a_declaration_before_a_failed_reset(
    root: Path, store: ClaimStore
) -> None:
    """The host's sync loop publishes from unhealthy(); the health stream sends health(): one picture."""
    drv = make_driver(root, store)
    assert drv.unhealthy() == {}
    ref = _ref(store, allocated_claim("c1", ["gpu-0", "gpu-1"]))
    drv.prepare([ref])
    set_faults(root, NODE, reset_fail={"forever": True, "devices": ["gpu-0", "gpu-1"]})
    drv.unprepare([ref])
    set_faults(root, NODE, unhealthy={"devices": ["gpu-1", "gpu-3"], "message": "XID 79"})
    assert drv.unhealthy() == {"gpu-0": "reset of device gpu-0 failed (injected)", "gpu-1": "XID 79", "gpu-3": "XID 79"}
    assert {h.device: h.message for h in drv.health() if not h.healthy} == drv.unhealthy()
    assert {h.device for h in drv.health() if h.healthy} == {d.name for d in drv.inventory.devices} - {"gpu-0", "gpu-1", "gpu-3"}


def test_each_checkpoint_write_is_synced_and_the_directory_once_per_call_before_the_reply(
    root: Path, store: ClaimStore, synced_writes: list[tuple[str, Path]]
) -> None:
    import os

    drv = make_driver(root, store)
    ref = _ref(store, allocated_claim("c1", ["gpu-0"]))
    tmp = f".checkpoint.json.{os.getpid()}.{threading.get_ident()}.tmp"
    spec = cdi.spec_path(drv.cdi_dir, DEFAULT_DRIVER, ref.uid).name

    def seen() -> list[str]:
        out = [("sync dir" if path == drv.plugin_dir else f"sync {path.name}") if op == "sync"
               else f"rename {path.parent.name}/{path.name}" for op, path in synced_writes]  # fmt: skip
        synced_writes.clear()
        return out

    seen()  # the driver's set-up
    assert drv.prepare([ref])[ref.uid].error == ""
    events = seen()
    # PrepareStarted, the CDI spec (renamed, not synced: /var/run/cdi is a tmpfs on a real node),
    # PrepareCompleted, then one directory sync: the reply's state survives a power loss.
    assert events == [f"sync {tmp}", f"rename {DEFAULT_DRIVER}/checkpoint.json", f"rename cdi/{spec}",
                      f"sync {tmp}", f"rename {DEFAULT_DRIVER}/checkpoint.json", "sync dir"]  # fmt: skip
    assert drv.unprepare([ref])[ref.uid] == ""
    events = seen()
    # UnprepareStarted, the reset (the device truth is the hardware: renamed, not synced), forgotten, one directory sync.
    assert [e for e in events if "truth" not in e] == [
        f"sync {tmp}", f"rename {DEFAULT_DRIVER}/checkpoint.json", f"sync {tmp}", f"rename {DEFAULT_DRIVER}/checkpoint.json",
        "sync dir"]  # fmt: skip
    assert not any(e.startswith("sync .truth") for e in events)
    assert drv.unprepare([ref])[ref.uid] == ""  # unknown by now: nothing written, nothing synced
    assert seen() == []
