"""A violation the scenario did not name fails the run, through ``draguard run`` on a real control plane.

A 2-node gang whose ``expect.hold`` leaves out ``container-devices`` runs against the
``incomplete-cdi`` mutant (its CDI specs define none of the IDs it answers, so no container gets
its devices) on both node agents: the fake agent and hollow DRA kubelets. Each run exits 1, the
terminal names ``container-devices`` as violated, and the verdict says it was not named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draguard.cli.main import main
from draguard.harness.core.errors import EXIT_FAILED

GANG = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata:
  name: gang-incomplete-cdi-{agent}
spec:
  seed: 5
  driver: {{mutant: incomplete-cdi}}
  nodes:
    - namePrefix: gpu-node
      count: 2
      agent: {agent}
      topology: {{gpus: 2}}
  deviceClasses:
    - name: gpu.draguard.dev
      selectors: ["device.driver == 'gpu.draguard.dev'"]
  workloads:
    - name: llm
      replicas: 2
      claims:
        - name: gpus
          requests: [{{name: gpu, deviceClassName: gpu.draguard.dev, count: 2}}]
  settle: {{timeout: 15s, cleanup: 30s}}
  expect:
    hold: [claim-atomic, gang-atomic, no-double-allocation, topology, no-leak]
"""


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.mark.cluster
@pytest.mark.parametrize("agent", ["fake", "kubelet"])
def test_a_gang_on_incomplete_cdi_fails_on_container_devices_left_out_of_hold(
        agent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"gang-{agent}.yaml"
    path.write_text(GANG.format(agent=agent))
    out = tmp_path / "report"
    code = main(["run", str(path), "--report-dir", str(out), "--report", "terminal,json"])
    err = capsys.readouterr().err
    verdict = json.loads((out / "verdict.json").read_text())
    scenario = verdict["scenarios"][0]
    assert scenario["error"] is None, scenario["error"]
    cdi = scenario["invariants"]["container-devices"]
    assert (cdi["status"], cdi["expected"], cdi["required"], cdi["met"]) == ("violated", "hold", False, False), cdi
    assert code == EXIT_FAILED and verdict["exitCode"] == EXIT_FAILED and scenario["outcome"] == "not-met"
    assert f"{path}: note: expect.hold leaves out container-devices" in err
    assert "container-devices should hold but was violated (not named in expect.hold" in err
    for name in ("claim-atomic", "no-double-allocation", "topology", "no-leak"):
        assert scenario["invariants"][name]["status"] == "held", (name, scenario["invariants"][name])
    assert not list((tmp_path / "state" / "draguard" / "clusters").glob("*/cluster.json")), "the cluster is down"
