"""Device truth: one file per node, changed under a lock by several processes, read by anyone."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from draguard.harness.devices.nvml import FakeNvml, NvmlError
from draguard.harness.devices.truth import DeviceTruth, InstalledDevice, installed_devices, quantity_bytes
from draguard.harness.driver.topology import preset, resolve
from draguard.harness.core.errors import HarnessError


def _truth(tmp_path: Path, *names: str, shared: bool = False) -> DeviceTruth:
    t = DeviceTruth(tmp_path, "n1")
    t.install([InstalledDevice(n, f"GPU-{n}", memory_bytes=8 << 30, allow_multiple=shared) for n in names])
    return t


def test_stopping_a_pod_without_containers_takes_no_lock_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake nodes stop a pod's containers twice (deleted, then gone): the second finds none."""
    t = _truth(tmp_path, "gpu-0", "gpu-1")
    t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"])
    t.start_container("pod-b/main", "ns/b", ["claim-b"], ["gpu-1"])
    assert t.stop_containers("pod-a") == ["gpu-0"]
    locked = []
    original = DeviceTruth._locked
    monkeypatch.setattr(DeviceTruth, "_locked", lambda self: locked.append(1) or original(self))
    before = t.path.read_bytes()
    assert t.stop_containers("pod-a") == [] and t.stop_container("pod-x/main") == []
    assert locked == [] and t.path.read_bytes() == before
    assert t.stop_containers("pod-b") == ["gpu-1"] and locked == [1], "a pod with containers still stops them"
    assert t.read().devices["gpu-1"].containers == ()


def test_installed_devices_come_from_the_topology_with_their_memory_and_partitions(tmp_path: Path) -> None:
    inv = resolve(preset("a100-mig"), "n1")
    devices = installed_devices(inv)
    gpu0 = next(d for d in devices if d.name == "gpu-0")
    assert gpu0.memory_bytes == quantity_bytes("81920Mi") == 81920 * 2**20
    assert any(d.parent == "gpu-0" for d in devices)
    t = DeviceTruth(tmp_path, "n1")
    t.install(devices)
    t.install(devices)  # idempotent
    rec = t.read().devices["gpu-0"]
    assert (rec.reset, rec.health, rec.containers) == ("clean", "healthy", ())
    assert Path(rec.dev_path).read_text().strip() == rec.uuid, "each device has a device file a runtime hands in"


def test_a_container_makes_its_device_dirty_until_a_reset(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    nvml = FakeNvml(t)
    assert t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"]) == []
    rec = t.read().devices["gpu-0"]
    assert rec.reset == "dirty" and rec.used_by == ("claim-a",) and len(rec.processes) == 1 and rec.memory_used > 0
    with pytest.raises(NvmlError, match="NVML_ERROR_IN_USE"):
        nvml.reset("gpu-0")
    assert t.stop_containers("pod-a") == ["gpu-0"]
    rec = t.read().devices["gpu-0"]
    assert rec.reset == "dirty" and rec.processes == () and rec.memory_used == 0
    nvml.reset("gpu-0")
    assert t.read().devices["gpu-0"].reset == "clean" and t.read().devices["gpu-0"].used_by == ()


def test_a_failed_reset_leaves_the_device_failed_and_unhealthy(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    failing = {"gpu-0"}
    nvml = FakeNvml(t, reset_fails=lambda d: d in failing)
    with pytest.raises(NvmlError, match="reset of device gpu-0 failed"):
        nvml.reset("gpu-0")
    assert (t.read().devices["gpu-0"].reset, t.read().devices["gpu-0"].health) == ("failed", "unhealthy")
    failing.clear()
    nvml.reset("gpu-0")
    assert (t.read().devices["gpu-0"].reset, t.read().devices["gpu-0"].health) == ("clean", "healthy")


def test_a_failed_device_is_what_nvml_reports_and_a_container_on_it_is_an_incident(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0", "gpu-1")
    nvml = FakeNvml(t)
    assert nvml.unhealthy() == {}
    t.set_health("gpu-0", "Xid 79: GPU has fallen off the bus")
    assert nvml.unhealthy() == {"gpu-0": "Xid 79: GPU has fallen off the bus"}
    assert t.start_container("pod-b/main", "ns/b", ["claim-b"], ["gpu-1"]) == []
    [incident] = t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"])
    assert incident.kind == "unhealthy-in-use" and "which the hardware reports unhealthy (Xid 79" in incident.message
    t.set_health("gpu-0", None)
    assert nvml.unhealthy() == {} and t.read().devices["gpu-0"].reset == "dirty", "a repair keeps the reset state"


def test_the_hardware_records_a_dirty_handoff_two_claims_at_once_and_unshared_pods(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0", "gpu-1")
    t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"])
    t.start_container("pod-b/main", "ns/b", ["claim-b"], ["gpu-0"])  # a second claim while a runs
    t.stop_containers("pod-a")
    t.stop_containers("pod-b")
    t.start_container("pod-c/main", "ns/c", ["claim-c"], ["gpu-0"])  # dirty from a and b, never reset
    t.start_container("pod-d/main", "ns/d", ["claim-d"], ["gpu-1"])
    t.start_container("pod-e/main", "ns/e", ["claim-d"], ["gpu-1"])  # same claim, two pods, no sharing set up
    kinds = [(i.kind, i.device, i.claims) for i in t.read().incidents]
    assert kinds == [
        ("shared-without-sharing", "gpu-0", ("claim-a", "claim-b")),
        ("dirty-handoff", "gpu-0", ("claim-a", "claim-b", "claim-c")),
        ("unshared-pods", "gpu-1", ("claim-d",)),
    ]


def test_sharing_set_up_on_the_device_or_a_device_that_allows_it_is_no_incident(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    FakeNvml(t).configure_sharing("gpu-0", "MPS", "claim-a")
    t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"])
    t.start_container("pod-b/main", "ns/b", ["claim-a"], ["gpu-0"])
    shared = _truth(tmp_path / "s", "gpu-9", shared=True)
    shared.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-9"])
    shared.start_container("pod-b/main", "ns/b", ["claim-b"], ["gpu-9"])
    assert t.read().incidents == () and shared.read().incidents == ()
    rec = t.read().devices["gpu-0"]
    assert (rec.sharing, rec.sharing_claim) == ("MPS", "claim-a")
    with pytest.raises(NvmlError, match="not supported"):
        FakeNvml(t).configure_sharing("gpu-0", "Fractional", "claim-a")


def test_partitions_are_created_and_destroyed_on_their_parent(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    nvml = FakeNvml(t)
    nvml.create_partition("gpu-0", "gpu-0-mig-1g10gb-19-0")
    nvml.create_partition("gpu-0", "gpu-0-mig-1g10gb-19-0")
    assert t.read().devices["gpu-0"].partitions == ("gpu-0-mig-1g10gb-19-0",)
    nvml.destroy_partition("gpu-0", "gpu-0-mig-1g10gb-19-0")
    assert t.read().devices["gpu-0"].partitions == ()
    with pytest.raises(HarnessError, match="no device 'gpu-7'"):
        nvml.reset("gpu-7")


def _writer(root: str, pod: str) -> None:
    t = DeviceTruth(root, "n1")
    for i in range(25):
        t.start_container(f"{pod}-{i}/main", f"ns/{pod}-{i}", ["c"], ["gpu-0"])


def test_updates_from_several_processes_are_never_lost(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0", shared=True)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), f"p{k}")) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(t.read().devices["gpu-0"].containers) == 75


def test_a_damaged_truth_file_is_an_error_naming_it(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    t.path.write_text("{")
    with pytest.raises(HarnessError, match="device truth is damaged"):
        t.read()


def test_one_container_of_a_pod_exits_and_the_others_stay(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0", "gpu-1")
    t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"])
    t.start_container("pod-a/side", "ns/a", ["claim-a"], ["gpu-0", "gpu-1"])
    assert t.stop_container("pod-a/side") == ["gpu-0", "gpu-1"]
    devices = t.read().devices
    assert [c.id for c in devices["gpu-0"].containers] == ["pod-a/main"] and devices["gpu-1"].containers == ()
    assert t.stop_container("pod-a/side") == [], "a container that exited is not on any device"


def test_a_reader_sees_what_another_process_wrote_after_its_own_last_read(tmp_path: Path) -> None:
    # Two DeviceTruth objects stand for two processes (the driver's NVML and the node agent's runtime).
    driver, agent = DeviceTruth(tmp_path, "n"), DeviceTruth(tmp_path, "n")
    driver.install([InstalledDevice("gpu-0", "GPU-0"), InstalledDevice("gpu-1", "GPU-1")])
    assert driver.read().devices["gpu-0"].health == "healthy"
    agent.set_health("gpu-0", "XID 79")
    assert driver.read().devices["gpu-0"].health_message == "XID 79"
    agent.start_container("pod-1/c", "ns/p", ["claim-1"], ["gpu-1"])
    driver.set_health("gpu-0", None)  # an update on top of the other process's write keeps that write
    after = agent.read()
    assert after.devices["gpu-0"].health == "healthy"
    assert [c.id for c in after.devices["gpu-1"].containers] == ["pod-1/c"]
