"""The fake driver and the fake node's container runtime meet in the device truth (no cluster needed).

Each mutant that only the hardware can show is shown there, next to the correct driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.nodes.runtime import ContainerError, ContainerRuntime
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

from .conftest import NODE, ClaimStore, allocated_claim, make_driver


def _pod(name: str, claim: str = "gpus") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "main", "resources": {"claims": [{"name": claim}]}}],
                 "resourceClaims": [{"name": claim, "resourceClaimName": "c"}]},
    }  # fmt: skip


def _start(root: Path, pod: dict[str, Any], uid: str, devices: list[Any]) -> None:
    prepared = [{"requestNames": d.requests, "cdiDeviceIDs": d.cdi_device_ids} for d in devices]
    ContainerRuntime(NodeDirs(root, NODE)).start_pod(pod, {"gpus": prepared}, {"gpus": uid})


def _with_sharing(claim: dict[str, Any], strategy: str) -> dict[str, Any]:
    claim["status"]["allocation"]["devices"]["config"] = [
        {"source": "FromClaim", "opaque": {"driver": DEFAULT_DRIVER, "parameters": {"sharing": {"strategy": strategy}}}}
    ]
    return claim


def test_a_container_gets_the_device_nodes_of_its_cdi_ids_and_the_truth_records_it(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = store.add(allocated_claim("c", ["gpu-1"]))
    result = drv.prepare([ref])[ref.uid]
    _start(root, _pod("p"), ref.uid, result.devices)
    gpu1 = DeviceTruth(root, NODE).read().devices["gpu-1"]
    assert [(c.id, c.claims) for c in gpu1.containers] == [("uid-p/main", (ref.uid,))]
    assert gpu1.reset == "dirty" and DeviceTruth(root, NODE).read().devices["gpu-0"].containers == ()
    ContainerRuntime(NodeDirs(root, NODE)).stop_pod("uid-p")
    assert drv.unprepare([ref]) == {ref.uid: ""}
    assert DeviceTruth(root, NODE).read().devices["gpu-1"].reset == "clean"


def test_incomplete_cdi_fails_the_container_as_a_runtime_does(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, mutant="incomplete-cdi")
    ref = store.add(allocated_claim("c", ["gpu-0"]))
    result = drv.prepare([ref])[ref.uid]
    assert result.error == "", "prepare itself reports success"
    with pytest.raises(ContainerError, match="CDI device injection failed: unresolvable CDI devices"):
        _start(root, _pod("p"), ref.uid, result.devices)
    t = DeviceTruth(root, NODE).read()
    assert [i.kind for i in t.incidents] == ["container-failed"] and t.devices["gpu-0"].containers == ()


def test_sharing_from_the_claims_config_is_set_up_and_torn_down(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = store.add(_with_sharing(allocated_claim("c", ["gpu-0"]), "MPS"))
    result = drv.prepare([ref])[ref.uid]
    _start(root, _pod("a"), ref.uid, result.devices)
    _start(root, _pod("b"), ref.uid, result.devices)
    t = DeviceTruth(root, NODE).read()
    assert (t.devices["gpu-0"].sharing, t.devices["gpu-0"].sharing_claim) == ("MPS", ref.uid)
    assert t.incidents == (), "two pods on a device set up for MPS is what the claim asked for"
    for p in ("uid-a", "uid-b"):
        ContainerRuntime(NodeDirs(root, NODE)).stop_pod(p)
    assert drv.unprepare([ref]) == {ref.uid: ""}
    assert DeviceTruth(root, NODE).read().devices["gpu-0"].sharing is None


def test_leave_sharing_state_mutant_keeps_mps_on_the_device_after_unprepare(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, mutant="leave-sharing-state")
    ref = store.add(_with_sharing(allocated_claim("c", ["gpu-0"]), "TimeSlicing"))
    drv.prepare([ref])
    assert drv.unprepare([ref]) == {ref.uid: ""}
    gpu0 = DeviceTruth(root, NODE).read().devices["gpu-0"]
    assert (gpu0.sharing, gpu0.sharing_claim, gpu0.reset) == ("TimeSlicing", ref.uid, "clean")
    assert drv.snapshot().claims == {}, "the driver's books are clean"


def test_an_unknown_sharing_strategy_fails_the_claim(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store)
    ref = store.add(_with_sharing(allocated_claim("c", ["gpu-0"]), "Fractional"))
    assert "sharing strategy 'Fractional' is not supported" in drv.prepare([ref])[ref.uid].error


def test_a_mig_device_gets_its_partition_created_and_destroyed(root: Path, store: ClaimStore) -> None:
    drv = make_driver(root, store, topology="a100-mig")
    mig = next(d.name for d in drv.inventory.devices if d.parent == "gpu-2")
    ref = store.add(allocated_claim("c", [mig]))
    drv.prepare([ref])
    assert DeviceTruth(root, NODE).read().devices["gpu-2"].partitions == (mig,)
    assert drv.unprepare([ref]) == {ref.uid: ""}
    assert DeviceTruth(root, NODE).read().devices["gpu-2"].partitions == ()


def test_double_allocation_mutant_hands_a_dirty_device_to_the_next_claim(root: Path, store: ClaimStore) -> None:
    for mutant, handed in ((None, False), ("double-allocation", True)):
        sub = root / (mutant or "correct")
        drv = make_driver(sub, store, mutant=mutant)
        first = store.add(allocated_claim(f"a-{mutant}", ["gpu-0"]))
        _start(sub, _pod("a"), first.uid, drv.prepare([first])[first.uid].devices)
        ContainerRuntime(NodeDirs(sub, NODE)).stop_pod("uid-a")  # the pod is gone; its claim is not unprepared yet
        second = store.add(allocated_claim(f"b-{mutant}", ["gpu-0"]))
        result = drv.prepare([second])[second.uid]
        assert (result.error == "") is handed, result.error
        if handed:
            _start(sub, _pod("b"), second.uid, result.devices)
        kinds = [i.kind for i in DeviceTruth(sub, NODE).read().incidents]
        assert kinds == (["dirty-handoff"] if handed else [])
