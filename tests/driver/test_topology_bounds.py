"""Every count of a topology file (device index, NUMA node, multiprocessors, profile ids, memory slices,
placements, partitions, attributes) has a bound that loading states and enforces: a value past it in
(the first GPUs of) the h100-mig preset is a UsageError naming file:line:col, the field and the bound, found before
anything is resolved from it and without allocating in proportion to the value."""

from __future__ import annotations

import json
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from draguard.harness.driver import topology as t
from draguard.harness.core.errors import EXIT_USAGE, UsageError
from draguard.harness.scenario import format as model

PRESET = t.PRESET_DIR / "h100-mig.yaml"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_PEAK = 20 * 2**20

PART = ("devices", 0, "partitioning")
PROFILE = PART + ("profiles", 0)
FIELDS: dict[tuple[Any, ...], tuple[int, int]] = {
    ("devices", 0, "index"): (0, model.MAX_DEVICE_INDEX),
    ("devices", 0, "numaNode"): (0, model.MAX_NUMA_NODE),
    ("devices", 0, "attributes", "cores"): (-model.MAX_ATTRIBUTE_INT - 1, model.MAX_ATTRIBUTE_INT),
    PART + ("multiprocessors",): (1, t.MAX_MULTIPROCESSORS),
    PART + ("memorySlices",): (1, t.MAX_MEMORY_SLICES),
    PROFILE + ("id",): (0, t.MAX_PROFILE_ID),
    PROFILE + ("multiprocessors",): (1, t.MAX_MULTIPROCESSORS),
    PROFILE + ("memorySlices",): (1, t.MAX_MEMORY_SLICES),
    PROFILE + ("placements", 0): (0, t.MAX_MEMORY_SLICES - 1),
}


def _preset(gpus: int = 2) -> Any:
    """The preset's data, its YAML anchors expanded into separate copies, with its first ``gpus`` GPUs."""
    data = json.loads(json.dumps(YAML(typ="safe", pure=True).load(PRESET.read_text())))
    data["devices"] = data["devices"][:gpus]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _load(data: Any) -> tuple[str, UsageError, int]:
    """Write ``data`` as a topology file, load it; the file's text, the error and the peak allocation."""
    out = YAML(typ="safe", pure=True)
    out.default_flow_style = False
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "topology.yaml"
        with path.open("w") as f:
            out.dump(data, f)
        tracemalloc.start()
        try:
            with pytest.raises(UsageError) as info:
                t.load_topology(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return path.read_text(), info.value, peak


def _where(text: str, path: tuple[Any, ...]) -> str:
    """``line:col`` of the key (or list item) at ``path``, as the loader reports it."""
    node = YAML(typ="rt", pure=True).load(text)
    for part in path[:-1]:
        node = node[part]
    line, col = node.lc.item(path[-1]) if isinstance(path[-1], int) else node.lc.key(path[-1])
    return f"{line + 1}:{col + 1}"


@st.composite
def _case(draw: st.DrawFn) -> tuple[tuple[Any, ...], int]:
    path = draw(st.sampled_from(sorted(FIELDS, key=str)))
    low, high = FIELDS[path]
    fixed = [99999999999999999999, 2**63, 2**64, -1, -(2**63) - 1, high + 1, low - 1]
    value = draw(st.one_of(st.sampled_from(fixed), st.integers(high + 1, 2**80), st.integers(-(2**80), low - 1))
                 .filter(lambda n: not low <= n <= high))  # fmt: skip
    return path, value


@SETTINGS
@given(_case())
def test_a_topology_count_past_its_bound_is_a_usage_error_at_its_field(case: tuple[tuple[Any, ...], int]) -> None:
    path, value = case
    low, high = FIELDS[path]
    data = _preset()
    _set(data, path, value)
    text, error, peak = _load(data)
    field = ".".join(str(p) for p in path)
    lines = [line for line in str(error).splitlines() if f": {field}: " in line]
    assert lines, str(error)
    bounds = (str(high),) if value > high else (str(low), str(low - 1))  # "≥ 1" or "greater than 0"
    assert any(f":{_where(text, path)}: {field}: " in line and any(b in line for b in bounds) for line in lines), (
        f"expected {field} at {_where(text, path)} naming {bounds}: {lines}"
    )
    assert error.exit_code == EXIT_USAGE
    assert peak < MAX_PEAK, f"loading {value} at {field} allocated {peak} bytes"


def test_every_preset_is_well_inside_the_bounds() -> None:
    for name in t.PRESETS.names():
        inventory = t.resolve(t.preset(name), "node-a")
        assert len(inventory.devices) <= t.MAX_PUBLISHED_DEVICES


def _partitioning(profiles: int, placements: int, multiprocessors: int = 132) -> dict[str, Any]:
    return {
        "multiprocessors": multiprocessors,
        "memorySlices": 16,
        "profiles": [{"name": f"p{i}", "id": i, "multiprocessors": 1, "memorySlices": 1,
                      "placements": list(range(placements))} for i in range(profiles)],
    }  # fmt: skip


def test_partitions_per_device_are_bounded() -> None:
    data = _preset()
    data["devices"][0]["partitioning"] = _partitioning(profiles=5, placements=16)  # 80 partitions
    _, error, _ = _load(data)
    assert f"devices.0.partitioning: expected at most {t.MAX_PARTITIONS_PER_DEVICE} partitions" in str(error)
    assert "got 80" in str(error)


def test_devices_published_per_node_are_bounded() -> None:
    data = _preset()
    device = {**data["devices"][0], "partitioning": _partitioning(profiles=4, placements=16)}  # 1 + 64 each
    data["devices"] = [{**device, "name": f"gpu-{i}", "index": i} for i in range(40)]
    _, error, _ = _load(data)
    assert f"devices: expected at most {t.MAX_PUBLISHED_DEVICES} devices published per node" in str(error)
    assert f"got {40 * 65}" in str(error)


def test_a_profile_cannot_have_more_multiprocessors_than_its_device() -> None:
    data = _preset()
    data["devices"][0]["partitioning"]["profiles"][0]["multiprocessors"] = 133
    _, error, _ = _load(data)
    assert "devices.0.partitioning: profile 1g.10gb: 133 multiprocessors, more than the device's 132" in str(error)


def test_a_partition_name_past_63_characters_is_refused_before_it_is_published() -> None:
    data = _preset()
    data["devices"][0]["name"] = "g" * 50
    data["devices"][0]["partitioning"]["profiles"][0]["id"] = t.MAX_PROFILE_ID
    _, error, _ = _load(data)
    assert "devices.0: partition 'ggg" in str(error) and "DNS label of at most 63 characters" in str(error)


@pytest.mark.parametrize("key", ["attributes", "capacity"])
def test_attributes_and_capacities_per_device_are_bounded(key: str) -> None:
    data = _preset()
    data["devices"][0][key] = {f"k{i}": "1" for i in range(model.MAX_ATTRIBUTES_PER_DEVICE + 1)}
    text, error, _ = _load(data)
    assert f":{_where(text, ('devices', 0, key))}: devices.0.{key}: " in str(error)
    assert f"at most {model.MAX_ATTRIBUTES_PER_DEVICE} items" in str(error)


@pytest.mark.parametrize("quantity", [str(model.MAX_QUANTITY + 1), "8Ei", "9" * 400 + "Gi"])
def test_memory_past_its_bound_is_refused_not_overflowed(quantity: str) -> None:
    data = _preset()
    data["devices"][0]["memory"] = quantity
    data["devices"][1]["capacity"] = {"bandwidth": quantity}
    text, error, peak = _load(data)
    assert f":{_where(text, ('devices', 0, 'memory'))}: devices.0.memory: memory: expected a quantity of at most " \
        f"{model.MAX_QUANTITY}" in str(error)  # fmt: skip
    assert f"devices.1.capacity: capacity bandwidth: expected a quantity of at most {model.MAX_QUANTITY}" in str(error)
    assert peak < MAX_PEAK


@pytest.mark.parametrize("suffix", ["yaml", "json"])
def test_a_number_too_long_to_parse_is_reported_where_it_stands(tmp_path: Path, suffix: str) -> None:
    f = tmp_path / f"t.{suffix}"
    digits = "9" * 5000
    document = json.dumps({"kind": "NodeTopology", "devices": [{"name": "g", "index": 0}]})
    f.write_text(document.replace('"index": 0', f'"index": {digits}'))
    with pytest.raises(UsageError, match=rf"{f}:1:\d+: a number of 5000 digits"):
        t.load_topology(f)


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    f = tmp_path / "bomb.yaml"
    lines = ["kind: NodeTopology", "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    f.write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        with pytest.raises(UsageError, match="too large"):
            t.load_topology(f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK


def test_a_scenario_device_at_every_bound_becomes_a_topology_file_the_driver_accepts() -> None:
    import draguard.chaos  # noqa: F401  (registers the fault kinds)
    from draguard.harness.runner.runner import topology_file
    from draguard.harness.scenario import parse_scenario

    attributes = {"index": model.MAX_DEVICE_INDEX, "numaNode": model.MAX_NUMA_NODE, "productName": "p" * 64,
                  **{f"a{i}": model.MAX_ATTRIBUTE_INT for i in range(model.MAX_ATTRIBUTES_PER_DEVICE - 3)}}  # fmt: skip
    capacity = {"memory": str(model.MAX_QUANTITY), **{f"c{i}": "7Ei" for i in range(31)}}
    device = {"name": "gpu-0", "attributes": attributes, "capacity": capacity}
    scenario = parse_scenario(json.dumps({
        "apiVersion": "draguard.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "edge"},
        "spec": {"nodes": [{"name": "n", "topology": {"devices": [device]}}],
                 "workloads": [{"name": "w", "replicas": 1}]},
    }), "edge.yaml")  # fmt: skip
    topology = scenario.nodes[0].topology
    inventory = t.resolve(t.NodeTopology.model_validate(topology_file(topology, "n")), "n")
    assert inventory.devices[0].attributes["index"] == model.MAX_DEVICE_INDEX
