"""The continuous invariants are judged while the workloads are created, not only once they all are:
with thousands of pods that takes a minute, and a violation in it (a device allocated twice while the
pods are scheduled) may be gone again before it ends."""

from __future__ import annotations

import time
from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds for validation)
from draguard.harness.kube import RUN_LABEL
from draguard.harness.result import ScenarioResult
from draguard.harness.judge import judge as judge_module
from draguard.harness.runner.runner import JUDGE_INTERVAL, Runner, RunOptions
from draguard.harness.scenario.loader import parse_scenario

DRIVER = "gpu.draguard.dev"
SCENARIO = f"""
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {{name: judged-during-deploy}}
spec:
  nodes: [{{name: n0, topology: {{gpus: 2}}}}]
  deviceClasses: [{{name: {DRIVER}, selectors: ["device.driver == '{DRIVER}'"]}}]
  workloads:
    - {{name: w, replicas: 1, claims: [{{name: gpu, requests: [{{name: gpu, deviceClassName: {DRIVER}}}]}}]}}
  settle: {{timeout: 15s, cleanup: 30s}}
  expect: {{violate: [no-double-allocation]}}
"""


def _transient_double_allocation_before_deploy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Makes the run's deployment start with a double allocation that lasts 2 s and is gone (both
    claims deleted, and seen deleted by the run's watch) before any pod is created; returns the list
    that gets the number of no-double-allocation violations recorded by then."""
    deploy = Runner._deploy
    seen_at_deploy: list[int] = []

    def deploy_after_a_transient_violation(self: Runner) -> None:
        kube, namespace = self.live_kube(), self.live_namespace()
        assert kube is not None
        pool, device = next((s["spec"]["pool"]["name"], s["spec"]["devices"][0]["name"])
                            for s in self.live_objects("ResourceSlice") if s["spec"].get("devices"))  # fmt: skip
        names = ["twice-0", "twice-1"]
        for name in names:  # two claims, one device: a double allocation for a few judging rounds
            obj: dict[str, Any] = kube.create({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: self.run_id}},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}})  # fmt: skip
            obj["status"] = {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}]}}}  # fmt: skip
            kube.replace(obj, "status")
        time.sleep(4 * JUDGE_INTERVAL)
        for name in names:
            kube.delete("ResourceClaim", name, namespace)
        deadline = time.monotonic() + 10
        while any(c["metadata"]["name"] in names for c in self.live_objects("ResourceClaim")):
            assert time.monotonic() < deadline, "the run's watch still has the claims"
            time.sleep(0.1)
        seen_at_deploy.append(len(self.judge.violations["no-double-allocation"]))
        deploy(self)

    monkeypatch.setattr(Runner, "_deploy", deploy_after_a_transient_violation)
    return seen_at_deploy


def _run_and_check_reported(seen_at_deploy: list[int]) -> ScenarioResult:
    """Run the scenario; the transient double allocation was recorded while the deployment was still to
    come, naming both claims."""
    runner = Runner(parse_scenario(SCENARIO, "s.yaml"), RunOptions(backend="local"))
    result = runner.run()
    assert result.error is None, result.error
    assert seen_at_deploy == [1], seen_at_deploy
    (evidence,) = runner.judge.violations["no-double-allocation"].values()
    assert {"twice-0", "twice-1"} <= {o.rsplit("/", 1)[-1] for o in evidence.objects}, evidence
    return result


@pytest.mark.cluster
def test_a_double_allocation_gone_before_the_deployment_ended_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run_and_check_reported(_transient_double_allocation_before_deploy(monkeypatch))
    assert result.ok, result.shortfalls  # and the run meets its expectation


@pytest.mark.cluster
def test_a_changed_claim_is_judged_without_waiting_for_a_full_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full rounds (every node's driver books and device truth) an hour apart: the claims rounds, run
    as claims change, still report the 2 s double allocation while it lasts."""
    monkeypatch.setattr(judge_module, "JUDGE_INTERVAL", 3600.0)
    _run_and_check_reported(_transient_double_allocation_before_deploy(monkeypatch))
