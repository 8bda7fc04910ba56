"""How the scheduler_perf run is configured (no binary needed): the workload picked for a shape, the
threshold read from the built config, and the error when the binary is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from draguard.harness.core.errors import HarnessError
from draguard.harness.bench.schedperf import _config, find_scheduler_perf, upstream_threshold

# The shape of test/integration/scheduler_perf/dra/performance-config.yaml at v1.37.2, cut down.
CONFIG = """
- name: Other
  workloadTemplate: []
  workloads: []
- name: SchedulingWithResourceClaimTemplate
  featureGates: {DynamicResourceAllocation: true}
  workloadTemplate:
  - opcode: createNodes
    countParam: $nodesWithDRA
  - opcode: createAny
    templatePath: templates/resourceslice-basic-devices.yaml
    countParam: $nodesWithDRA
    templateParams: {numPCIRoots: $numPCIRoots|2, numDevices: 10}
  workloads:
  - name: fast
    labels: [integration-test, short]
    params: {nodesWithDRA: 1}
  - name: 5000pods_500nodes
    labels: [performance]
    threshold: {dra: 56}
    params: {nodesWithDRA: 500, initClaims: 2500, measurePods: 2500}
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "performance-config.yaml").write_text(CONFIG)
    return tmp_path


def test_the_upstream_shape_runs_the_upstream_workload_unchanged(data: Path) -> None:
    case, name, label = _config(data, 500, 5000, 10)
    assert (name, label) == ("5000pods_500nodes", "performance")
    assert [w["name"] for w in case["workloads"]] == ["fast", "5000pods_500nodes"]
    assert case["workloadTemplate"][1]["templateParams"]["numDevices"] == 10


def test_another_shape_runs_as_a_draguard_workload_with_its_devices(data: Path) -> None:
    case, name, label = _config(data, 200, 800, 8)
    assert (name, label) == ("draguard", "draguard")
    (w,) = case["workloads"]
    assert w["labels"] == ["draguard"]
    assert w["params"] == {"nodesWithDRA": 200, "nodesWithoutDRA": 0, "initClaims": 0, "measurePods": 800,
                           "steadyState": False, "duration": "0s"}  # fmt: skip
    assert case["workloadTemplate"][1]["templateParams"]["numDevices"] == 8


def test_the_threshold_is_read_from_the_config(data: Path) -> None:
    assert upstream_threshold(data) == 56.0


def test_a_missing_binary_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="draguard cluster build --scheduler-perf"):
        find_scheduler_perf(tmp_path)
