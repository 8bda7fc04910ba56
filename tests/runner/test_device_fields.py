"""Scenario device fields reach the ResourceSlices, or the scenario is rejected with their place.

``allowMultipleAllocations``, device taints and capacities besides memory are carried by the runner's
topology to the fake driver, which publishes them."""

from __future__ import annotations

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds for validation)
from draguard.harness.driver.slices import build_slices
from draguard.harness.driver.topology import NodeTopology, resolve
from draguard.harness.core.errors import ScenarioError
from draguard.harness.runner.runner import topology_file
from draguard.harness.scenario.loader import parse_scenario

SCENARIO = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: fields}
spec:
  cluster: {featureGates: {FEATURE: true}}
  nodes:
    - name: n0
      topology:
        devices:
          - name: acc-0
            attributes: {productName: X1, index: 0, numaNode: 1}
            capacity: {memory: 16Gi, cores: "8", bandwidth: 500m}
            allowMultipleAllocations: true
            taints: [{key: example.com/maintenance, value: soon, effect: NoSchedule}]
          - name: acc-1
            capacity: {memory: 16Gi}
    - name: n1
      topology: {gpus: 2, allowMultipleAllocations: true}
  deviceClasses: [{name: gpu.draguard.dev}]
  workloads:
    - name: w
      replicas: 1
      claims: [{name: c, requests: [{name: r, deviceClassName: gpu.draguard.dev}]}]
"""


def _slices(text: str, node: int) -> list[dict]:  # type: ignore[type-arg]
    scenario = parse_scenario(text, "fields.yaml")
    n = scenario.nodes[node]
    doc = NodeTopology.model_validate(topology_file(n.topology, n.name))
    return [d for s in build_slices(resolve(doc, n.name), "gpu.draguard.dev") for d in s.get("devices", [])]


def test_multiple_allocations_taints_and_extra_capacities_are_published() -> None:
    acc0, acc1 = _slices(SCENARIO.replace("FEATURE", "DRAConsumableCapacity"), 0)
    assert acc0["allowMultipleAllocations"] is True and "allowMultipleAllocations" not in acc1
    assert acc0["taints"] == [{"key": "example.com/maintenance", "value": "soon", "effect": "NoSchedule"}]
    assert acc0["capacity"] == {"bandwidth": {"value": "500m"}, "cores": {"value": "8"}, "memory": {"value": "16Gi"}}
    assert acc0["attributes"]["numaNode"] == {"int": 1} and acc0["attributes"]["productName"] == {"string": "X1"}
    assert "taints" not in acc1


def test_generated_gpus_may_allow_multiple_allocations() -> None:
    devices = _slices(SCENARIO.replace("FEATURE", "DRAConsumableCapacity"), 1)
    assert [d.get("allowMultipleAllocations") for d in devices] == [True, True]


def test_fields_the_cluster_would_drop_are_rejected_with_their_place() -> None:
    text = SCENARIO.replace("{FEATURE: true}", "{DRAConsumableCapacity: false, DRADeviceTaints: false}")
    text = text.replace("{productName: X1, index: 0, numaNode: 1}", "{productName: X1, index: first, numaNode: 1}")
    text = text.replace("{memory: 16Gi, cores", "{memory: 1500m, cores")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "fields.yaml")
    problems = [str(p) for p in info.value.problems]
    assert problems == [
        "fields.yaml:11:50: spec.nodes[0].topology.devices[0].attributes.index: the fake driver publishes 'index' "
        "as a non-negative integer",
        "fields.yaml:12:32: spec.nodes[0].topology.devices[0].capacity.memory: memory must be a whole number of bytes "
        "(no 'm' suffix)",
        "fields.yaml:13:13: spec.nodes[0].topology.devices[0].allowMultipleAllocations: allowMultipleAllocations needs "
        "the DRAConsumableCapacity feature gate, which the cluster switches off: the API server would drop it",
        "fields.yaml:14:13: spec.nodes[0].topology.devices[0].taints: device taints need the DRADeviceTaints feature "
        "gate, which the cluster switches off: the API server would drop them",
        "fields.yaml:18:27: spec.nodes[1].topology.allowMultipleAllocations: allowMultipleAllocations needs the "
        "DRAConsumableCapacity feature gate, which the cluster switches off: the API server would drop it",
    ], problems
