"""Topology files and presets of the fake driver, resolved into what a node publishes."""

from __future__ import annotations

from pathlib import Path

import pytest

from draguard.harness.driver.topology import PCIE_ROOT, PRESETS, load_topology, preset, resolve
from draguard.harness.core.errors import UsageError


@pytest.mark.parametrize("name", PRESETS.names())
def test_every_preset_resolves_to_uniquely_named_devices_within_api_limits(name: str) -> None:
    inv = resolve(preset(name), "node-a")
    names = [d.name for d in inv.devices]
    assert len(names) == len(set(names))
    for d in inv.devices:
        assert len(d.attributes) + len(d.capacity) <= 32
        assert {"productName", "uuid", "index", "architecture", "nvlinkDomain", "type", PCIE_ROOT, "numaNode"} <= set(
            d.attributes
        )
        assert "memory" in d.capacity
    assert len({d.uuid for d in inv.devices}) == len(inv.devices)


def test_h100_sxm_8_is_one_nvlink_domain_on_two_numa_nodes_and_four_pcie_roots() -> None:
    inv = resolve(preset("h100-sxm-8"), "node-a")
    assert len(inv.devices) == 8
    assert {d.attributes["productName"] for d in inv.devices} == {"NVIDIA H100 80GB HBM3"}
    assert {d.attributes["nvlinkDomain"] for d in inv.devices} == {"node-a"}
    assert [d.attributes["numaNode"] for d in inv.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len({d.attributes[PCIE_ROOT] for d in inv.devices}) == 4


def test_uuids_are_stable_per_node_and_differ_between_nodes() -> None:
    a1 = resolve(preset("h100-sxm-4"), "node-a").devices[0].uuid
    a2 = resolve(preset("h100-sxm-4"), "node-a").devices[0].uuid
    b = resolve(preset("h100-sxm-4"), "node-b").devices[0].uuid
    assert a1 == a2 != b and a1.startswith("GPU-")


def test_a100_mig_publishes_a_counter_set_per_gpu_that_its_slices_consume() -> None:
    inv = resolve(preset("a100-mig"), "n")
    assert [cs.name for cs in inv.counter_sets] == [f"gpu-{i}-counter-set" for i in range(8)]
    whole = inv.get("gpu-0")
    mig = inv.get("gpu-0-mig-3g40gb-9-4")
    assert whole is not None and mig is not None
    assert whole.consumes[0][1] == dict(inv.counter_sets[0].counters)
    assert mig.consumes[0][0] == "gpu-0-counter-set"
    assert mig.attributes["type"] == "mig" and mig.attributes["parentUUID"] == whole.uuid
    assert mig.units < whole.units
    assert not (mig.units & inv.get("gpu-0-mig-3g40gb-9-0").units)  # type: ignore[union-attr]


def test_a_topology_file_lists_devices_or_names_a_preset(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        "apiVersion: draguard.dev/v1alpha1\nkind: NodeTopology\ndevices:\n"
        "  - {name: npu-0, index: 0, type: npu, productName: Gaudi3, architecture: Gaudi3, memory: 128Gi,"
        " numaNode: 0, pcieRoot: pci0000:18, nvlinkDomain: rack-7}\n"
    )
    inv = resolve(load_topology(f), "n")
    assert inv.devices[0].attributes["nvlinkDomain"] == "rack-7"
    assert inv.devices[0].attributes["type"] == "npu"
    j = tmp_path / "t.json"
    j.write_text('{"kind": "NodeTopology", "preset": "gaudi3-8"}')
    assert len(resolve(load_topology(j), "n").devices) == 8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: NodeTopology\npreset: [unclosed\n", "not valid YAML"),
        ("kind: NodeTopology\npreset: h100-sxm-8\ndevices: []\n", "exactly one of 'preset' and 'devices'"),
        ("kind: NodeTopology\npreset: tpu-v9\n", "unknown preset 'tpu-v9'"),
        ("kind: NodeTopology\npreset: h100-sxm-8\ncolor: blue\n", ":3:1: color: Extra inputs are not permitted"),
        ("- just a list\n", "must be a mapping"),
        (
            "kind: NodeTopology\ndevices:\n  - {name: g, index: 0, productName: p, architecture: a, memory: 1Gi,"
            " numaNode: 0, pcieRoot: r}\n  - {name: g, index: 1, productName: p, architecture: a, memory: 1Gi,"
            " numaNode: 0, pcieRoot: r}\n",
            "device name 'g' appears twice",
        ),
        (
            "kind: NodeTopology\ndevices:\n  - name: g\n    index: 0\n    productName: p\n    architecture: a\n"
            "    memory: lots\n    numaNode: 0\n    pcieRoot: r\n",
            ":7:5: devices.0.memory: 'lots' is not a quantity",
        ),
    ],
)
def test_a_malformed_topology_file_is_a_usage_error_naming_the_file_and_place(
    tmp_path: Path, text: str, expected: str
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(UsageError) as err:
        load_topology(f)
    assert str(f) in str(err.value) and expected in str(err.value)


def test_a_missing_topology_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read topology file"):
        load_topology(tmp_path / "nope.yaml")
