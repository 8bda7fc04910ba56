"""``lock-free-handlers`` against the upstream DRA test driver on its own control plane: three pods on one
node are prepared at once; the variant that holds its lock across a 2 s prepare makes the second and third
wait (violated), the driver as released does not (held)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from draguard.harness.core.errors import HarnessError
from draguard.harness.driver.external import TEST_DRIVER_NAME, find_test_driver
from draguard.harness.driver.upstream_variants import VARIANT_ENV

pytestmark = pytest.mark.cluster

SCENARIO = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata:
  name: three-pods-one-node
  description: Three pods with a claim each are prepared on one node at the same time.
spec:
  seed: 5
  nodes:
    - name: gpu-node-0
      topology: {gpus: 4}
  deviceClasses:
    - name: gpu.draguard.dev
      selectors: ["device.driver == 'gpu.draguard.dev'"]
  workloads:
    - name: infer
      replicas: 3
      claims:
        - name: gpu
          requests: [{name: gpu, deviceClassName: gpu.draguard.dev, count: 1}]
  settle: {timeout: 40s, cleanup: 30s}
  expect: {}
"""


def _run(tmp: Path, variant: str) -> dict[str, object]:
    path = tmp / "three-pods-one-node.yaml"
    path.write_text(SCENARIO)
    out = tmp / variant
    done = subprocess.run([sys.executable, "-m", "draguard.cli", "run", str(path), "--cluster", "local", "--driver",
                           TEST_DRIVER_NAME, "--device-class", "test-gpus", "--report", "json", "--report-dir", str(out)],
                          env={**os.environ, VARIANT_ENV: variant}, capture_output=True, text=True, timeout=400,
                          check=False)
    scenario: dict[str, object] = json.loads((out / "verdict.json").read_text())["scenarios"][0]
    scenario["exit"] = done.returncode
    return scenario


def test_a_lock_held_across_a_slow_prepare_is_seen_and_the_released_driver_is_not_blamed(tmp_path: Path) -> None:
    try:
        find_test_driver()
    except HarnessError as exc:
        pytest.skip(str(exc))
    released = _run(tmp_path, "unmodified")
    invariants = released["invariants"]
    assert isinstance(invariants, dict)
    assert invariants["lock-free-handlers"]["status"] == "held", invariants["lock-free-handlers"]
    assert invariants["cdi-specs-resolve"]["status"] == "held", invariants["cdi-specs-resolve"]
    assert released["outcome"] == "met" and released["exit"] == 0, released
    locked = _run(tmp_path, "lock-across-slow-prepare")
    inv = locked["invariants"]
    assert isinstance(inv, dict)
    assert inv["lock-free-handlers"]["status"] == "violated", inv["lock-free-handlers"]
    messages = [v["message"] for v in inv["lock-free-handlers"]["violations"]]
    assert all("the driver handled them one at a time" in m for m in messages), messages
    assert locked["outcome"] == "not-met" and locked["exit"] == 1
