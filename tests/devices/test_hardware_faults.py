"""What the hardware of a fake node raises (a GPU fallen off the bus, an uncorrectable ECC error, an Xid)
and what a health check over NVML makes of it: the application's Xids leave the GPU working."""

from __future__ import annotations

from pathlib import Path

import pytest

from draguard.harness.core.errors import HarnessError
from draguard.harness.devices.nvml import FakeNvml, NvmlError
from draguard.harness.devices.truth import APPLICATION_XIDS, DeviceTruth, HardwareFault, InstalledDevice


def _truth(tmp_path: Path, *names: str) -> DeviceTruth:
    t = DeviceTruth(tmp_path, "n0")
    t.install([InstalledDevice(n, f"GPU-{n}") for n in names])
    return t


@pytest.mark.parametrize(("fault", "xid", "reported"), [
    (HardwareFault.of("fallen-off-bus"), 79, "Xid 79: GPU has fallen off the bus"),
    (HardwareFault.of("ecc"), 48, "Xid 48: uncorrectable (double-bit) ECC error"),
    (HardwareFault.of("xid", 62), 62, "Xid 62"),
])
def test_each_fault_that_breaks_the_gpu_is_reported_unhealthy_with_its_xid(tmp_path: Path, fault: HardwareFault,
                                                                           xid: int, reported: str) -> None:
    t = _truth(tmp_path, "gpu-0", "gpu-1")
    nvml = FakeNvml(t)
    t.raise_fault("gpu-0", fault)
    rec = t.read().devices["gpu-0"]
    assert fault.breaks and rec.health == "unhealthy" and rec.xids == (xid,)
    assert nvml.unhealthy() == {"gpu-0": reported}
    # A container on it is an incident: the hardware it got does not work.
    [incident] = t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"])
    assert incident.kind == "unhealthy-in-use"
    t.repair("gpu-0")
    assert nvml.unhealthy() == {}
    assert t.read().devices["gpu-0"].xids == () and not t.read().devices["gpu-0"].lost


def test_nvml_reaches_no_gpu_fallen_off_the_bus_and_cannot_reset_it(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0", "gpu-1")
    nvml = FakeNvml(t)
    t.raise_fault("gpu-0", HardwareFault.of("fallen-off-bus"))
    with pytest.raises(NvmlError, match="GPU is lost"):
        nvml.xid_events("gpu-0")
    with pytest.raises(NvmlError, match="NVML_ERROR_GPU_IS_LOST"):
        nvml.reset("gpu-0")
    assert t.read().devices["gpu-0"].reset == "failed"
    t.repair("gpu-0")
    nvml.reset("gpu-0")
    assert t.read().devices["gpu-0"].reset == "clean" and nvml.xid_events("gpu-0") == ()


def test_an_ecc_error_is_counted_and_a_reset_clears_it(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    nvml = FakeNvml(t)
    t.raise_fault("gpu-0", HardwareFault.of("ecc"))
    t.raise_fault("gpu-0", HardwareFault.of("ecc"))
    assert nvml.ecc_uncorrected("gpu-0") == 2 and nvml.xid_events("gpu-0") == (48, 48)
    nvml.reset("gpu-0")
    assert nvml.ecc_uncorrected("gpu-0") == 0 and nvml.unhealthy() == {}


@pytest.mark.parametrize("xid", sorted(APPLICATION_XIDS))
def test_an_applications_xid_leaves_the_gpu_working_and_a_check_that_skips_none_reports_it(tmp_path: Path,
                                                                                          xid: int) -> None:
    t = _truth(tmp_path, "gpu-0")
    nvml = FakeNvml(t)
    fault = HardwareFault.of("xid", xid)
    assert not fault.breaks and "application error" in fault.message
    t.raise_fault("gpu-0", fault)
    rec = t.read().devices["gpu-0"]
    assert rec.health == "healthy" and rec.xids == (xid,)
    assert t.start_container("pod-a/main", "ns/a", ["claim-a"], ["gpu-0"]) == []  # it works: no incident
    assert nvml.unhealthy() == {}, "NVIDIA's device plugin skips the application's Xids"
    assert nvml.unhealthy(skip_xids=frozenset()) == {"gpu-0": f"Xid {xid}"}


def test_an_applications_xid_after_a_critical_one_keeps_the_gpu_unhealthy(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    t.raise_fault("gpu-0", HardwareFault.of("xid", 62))
    t.raise_fault("gpu-0", HardwareFault.of("xid", 13))
    assert t.read().devices["gpu-0"].health == "unhealthy"
    assert FakeNvml(t).unhealthy() == {"gpu-0": "Xid 62"}


def test_an_xid_fault_needs_its_number() -> None:
    with pytest.raises(HarnessError, match="needs its Xid number"):
        HardwareFault.of("xid")


def test_the_truth_file_keeps_what_the_hardware_raised(tmp_path: Path) -> None:
    t = _truth(tmp_path, "gpu-0")
    t.raise_fault("gpu-0", HardwareFault.of("fallen-off-bus"))
    again = DeviceTruth(tmp_path, "n0").read().devices["gpu-0"]
    assert (again.xids, again.lost, again.health) == ((79,), True, "unhealthy")
