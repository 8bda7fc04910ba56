"""How an inventory becomes ResourceSlice specs (publishing itself is tested against the API server)."""

from __future__ import annotations

from draguard.harness.driver.slices import build_slices
from draguard.harness.driver.topology import PCIE_ROOT, generic, preset, resolve

DRIVER = "gpu.draguard.dev"


def test_plain_gpus_fit_one_slice_with_typed_attributes_and_memory_capacity() -> None:
    specs = build_slices(resolve(preset("h100-sxm-8"), "n"), DRIVER)
    assert len(specs) == 1 and specs[0]["nodeName"] == "n" and specs[0]["driver"] == DRIVER
    dev = specs[0]["devices"][0]
    assert dev["name"] == "gpu-0"
    assert dev["attributes"]["index"] == {"int": 0}
    assert dev["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert dev["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert dev["attributes"][PCIE_ROOT] == {"string": "pci0000:10"}
    assert dev["capacity"] == {"memory": {"value": "81559Mi"}}
    assert "taints" not in dev


def test_counter_sets_get_slices_of_their_own_and_partitions_one_slice_per_gpu() -> None:
    specs = build_slices(resolve(preset("a100-mig"), "n"), DRIVER)
    counters, devices = specs[0], specs[1:]
    assert set(counters) == {"sharedCounters", "driver", "nodeName"}
    assert len(counters["sharedCounters"]) == 8
    assert len(devices) == 8 and all("sharedCounters" not in s for s in devices)
    assert {c["counterSet"] for d in devices[3]["devices"] for c in d["consumesCounters"]} == {"gpu-3-counter-set"}


def test_many_devices_are_split_into_slices_of_at_most_64() -> None:
    specs = build_slices(resolve(generic(130), "n"), DRIVER)
    assert [len(s["devices"]) for s in specs] == [64, 64, 2]


def test_an_unhealthy_device_carries_a_no_schedule_taint() -> None:
    specs = build_slices(resolve(generic(2), "n"), DRIVER, {"gpu-1": "XID 79: fell off the bus"})
    assert "taints" not in specs[0]["devices"][0]
    assert specs[0]["devices"][1]["taints"] == [
        {"key": f"{DRIVER}/unhealthy", "value": "XID-79--fell-off-the-bus", "effect": "NoSchedule"}
    ]
