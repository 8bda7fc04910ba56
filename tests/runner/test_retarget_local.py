"""``draguard run --cluster local --driver test-driver.cdi.k8s.io``: draguard starts a control plane of its
own per scenario, the scenario's nodes (fake node agents) and the upstream DRA test driver on each, with
as many devices as the scenario's node: node-agent and control-plane faults apply there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from draguard.harness.driver.external import TEST_DRIVER_NAME, find_test_driver
from draguard.harness.core.errors import HarnessError

pytestmark = pytest.mark.cluster

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"


def _draguard(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "draguard.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200"}, check=False)


def test_a_node_agent_restart_against_the_upstream_test_driver_on_its_own_control_plane(tmp_path: Path) -> None:
    try:
        find_test_driver()
    except HarnessError as exc:
        pytest.skip(str(exc))
    done = _draguard("run", str(LIBRARY / "node-agent-restart.yaml"), str(LIBRARY / "driver-down-until-cleanup.yaml"),
                     "--cluster", "local", "--driver", TEST_DRIVER_NAME, "--device-class", "test-gpus",
                     "--report", "terminal,json", "--report-dir", str(tmp_path))
    print(done.stderr[-5000:])
    # The test driver keeps its prepared claims in memory only: killed while its claims are prepared, it
    # comes back knowing none, answers their unprepare with success and leaves their CDI specs behind.
    assert done.returncode == 1, done.stderr[-3000:]
    by = {s["name"]: s for s in json.loads((tmp_path / "verdict.json").read_text())["scenarios"]}
    ran = by["node-agent-restart"]
    assert ran["outcome"] == "met", ran
    assert ran["environment"]["driver"]["name"] == TEST_DRIVER_NAME and ran["environment"]["driver"]["kind"] == "external"
    assert [(s["fault"], s["status"], s["fired"]) for s in ran["steps"]] == [("node-restart", "ok", 1)]
    # Behind the gRPC interposer by default: the invariants judged from its calls are judged too (the
    # restarted node agent prepares its pods' claims again: prepare-idempotent compares the answers).
    assert ran["environment"]["driver"]["interposed"] is True
    for name in ("claim-atomic", "gang-atomic", "no-leak", "no-double-allocation", "per-claim-errors",
                 "prepare-idempotent", "prepared-devices-allocated", "unprepare-unknown", "no-prepare-loop"):
        assert ran["invariants"][name]["status"] == "held", (name, ran["invariants"][name])
    assert "CDI specs the upstream test driver leaves" in ran["invariants"]["no-leak"]["note"]
    timeline = json.loads((tmp_path / ran["timeline"]).read_text())
    running = {(e.get("data") or {}).get("node") for e in timeline
               if e.get("kind") == "Pod" and (e.get("data") or {}).get("phase") == "Running"}
    assert running and running <= {"gpu-node-0", "gpu-node-1"}, running
    allocated = [d for e in timeline if e.get("kind") == "ResourceClaim" for d in (e.get("data") or {}).get("devices") or []]
    assert allocated and {d["driver"] for d in allocated} == {TEST_DRIVER_NAME}, allocated[:2]
    assert {d["device"] for d in allocated} <= {f"device-{i:02d}" for i in range(4)}
    # draguard runs the driver's processes: driver-down applies, and shows what the test driver forgets.
    down = by["driver-down-until-cleanup"]
    assert down["outcome"] == "not-met", down
    assert [(s["fault"], s["status"], s["fired"]) for s in down["steps"]] == [("driver-down", "ok", 1)]
    leak = down["invariants"]["no-leak"]
    assert leak["status"] == "violated", leak
    assert any("still has claim" in v["message"] and TEST_DRIVER_NAME in v["message"] for v in leak["violations"])
    assert (f"replay: draguard run {LIBRARY / 'driver-down-until-cleanup.yaml'} --seed {down['seed']} --cluster local "
            f"--driver {TEST_DRIVER_NAME} --device-class test-gpus") in done.stderr


def test_on_its_own_control_plane_only_the_upstream_test_driver_can_run(tmp_path: Path) -> None:
    done = _draguard("run", str(LIBRARY / "node-agent-restart.yaml"), "--cluster", "local", "--driver",
                     "gpu.example.com", "--device-class", "x", "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "draguard runs only the upstream DRA test driver (test-driver.cdi.k8s.io)" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_the_upstream_test_driver_serves_a_hollow_kubelet(tmp_path: Path) -> None:
    """agent: kubelet: the real kubelet DRA manager (draguard-kubelet) registers the test driver and runs the pod."""
    try:
        find_test_driver()
    except HarnessError as exc:
        pytest.skip(str(exc))
    text = (LIBRARY / "cdi-devices-correct-driver.yaml").read_text()
    assert "      topology: {gpus: 2}\n" in text
    scenario = tmp_path / "cdi-on-kubelet.yaml"
    scenario.write_text(text.replace("      topology: {gpus: 2}\n", "      agent: kubelet\n      topology: {gpus: 2}\n"))
    done = _draguard("run", str(scenario), "--cluster", "local", "--driver", TEST_DRIVER_NAME,
                     "--device-class", "test-gpus", "--report", "json", "--report-dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    s = json.loads((tmp_path / "out" / "verdict.json").read_text())["scenarios"][0]
    assert s["outcome"] == "met" and s["environment"]["nodeAgent"] == "hollow DRA kubelets"
    timeline = json.loads((tmp_path / "out" / s["timeline"]).read_text())
    assert "Running" in {(e.get("data") or {}).get("phase") for e in timeline if e.get("kind") == "Pod"}
    allocated = [d for e in timeline if e.get("kind") == "ResourceClaim" for d in (e.get("data") or {}).get("devices") or []]
    assert allocated and {d["driver"] for d in allocated} == {TEST_DRIVER_NAME}
