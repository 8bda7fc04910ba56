"""The linter's table of what drivers publish stays true to draguard's own fake driver."""

from __future__ import annotations

import pytest

from draguard.conformance.lint.knowledge import knowledge
from draguard.harness.driver import topology

DRIVER = "gpu.draguard.dev"


@pytest.mark.parametrize("name", topology.PRESETS.names())
def test_every_attribute_a_fake_driver_preset_publishes_is_known(name: str) -> None:
    info = knowledge().drivers[DRIVER]
    inventory = topology.resolve(topology.preset(name), "node-1")
    unknown = set()
    for device in inventory.devices:
        for qualified in device.attributes:
            domain, _, attr = qualified.rpartition("/")
            if not info.can_have(domain or DRIVER, attr):
                unknown.add(qualified)
        unknown |= {f"capacity {c}" for c in device.capacity if c not in info.capacity}
    assert unknown == set(), "add these to conformance/lint/devices.yaml"


def test_the_well_known_classes_name_known_drivers() -> None:
    know = knowledge()
    assert set(know.class_drivers.values()) <= set(know.drivers)
    assert know.driver_of_class("mig.nvidia.com") == "gpu.nvidia.com"
    assert know.is_accelerator_resource("aws.amazon.com/neuroncore")
    assert know.is_accelerator_resource("intel.com/xe-gpu") and not know.is_accelerator_resource("cpu")
