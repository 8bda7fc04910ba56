"""The fleet and the judge on their own, without a cluster: which fleet a scenario runs on, what each
offers, a fleet stopping the real processes it started through the one NodeProcess interface, and the
judge recording a double allocation (with the time it started) and turning it into the result."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds for validation)
from draguard.harness.bench.scale import _synthetic
from draguard.harness.core.process import NodeProcess, Supervised
from draguard.harness.fleet import FLEET_CAPABILITIES, FLEETS, Fleet, fleet_for
from draguard.harness.judge import Judge
from draguard.harness.judge.observe import Timeline
from draguard.harness.result import ScenarioResult
from draguard.harness.scenario.loader import parse_scenario
from draguard.harness.scenario.types import Scenario

SCENARIO = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {{name: fleet-unit}}
spec:
  nodes: [{{name: n0, agent: {a0}, topology: {{gpus: 2}}}}, {{name: n1, agent: {a1}, topology: {{gpus: 2}}}}]
  deviceClasses: [{{name: gpu.draguard.dev}}]
  workloads: [{{name: w, replicas: 1, claims: [{{name: c, requests: [{{name: r, deviceClassName: gpu.draguard.dev}}]}}]}}]
  expect: {{hold: [no-double-allocation]}}
"""


def _scenario(kind: str = "fake", a0: str = "fake", a1: str = "fake") -> Scenario:
    sc = parse_scenario(SCENARIO.format(a0=a0, a1=a1), "s.yaml")
    return dataclasses.replace(sc, driver=dataclasses.replace(sc.driver, kind=kind))


def test_every_fleet_is_registered_and_offers_only_known_capabilities() -> None:
    assert FLEETS.names() == ["external", "fake", "installed", "kubelet"]
    for entry in FLEETS:
        fleet = entry.target()
        assert isinstance(fleet, Fleet) and fleet.name == entry.name
        assert fleet.capabilities <= set(FLEET_CAPABILITIES), entry.name
    assert FLEETS.get("fake").target().offers("restart-driver")
    assert not FLEETS.get("installed").target().offers("kill-node")


def test_the_fleet_follows_the_driver_the_agents_and_whose_cluster_it_is() -> None:
    assert fleet_for(_scenario(), own_cluster=True) == "fake"
    assert fleet_for(_scenario(a0="kubelet", a1="kubelet"), own_cluster=True) == "kubelet"
    assert fleet_for(_scenario(a0="fake", a1="kubelet"), own_cluster=True) == "fake"  # mixed: fake serves both
    assert fleet_for(_scenario("external"), own_cluster=True) == "external"
    assert fleet_for(_scenario("external"), own_cluster=False) == "installed"


class _Sleeper(NodeProcess):
    """A real child process behind the NodeProcess interface."""

    def __init__(self, root: Path, name: str) -> None:
        self._proc = Supervised(name, [sys.executable, "-c", "import time; time.sleep(60)"], root / f"{name}.log",
                                lambda: True)


def test_a_fleet_stops_every_process_it_started_through_one_interface(tmp_path: Path) -> None:
    fleet = Fleet()
    nodes, driver = _Sleeper(tmp_path, "nodes"), _Sleeper(tmp_path, "driver")
    fleet.nodes = nodes  # type: ignore[assignment]
    fleet.drivers["n0"] = driver  # type: ignore[assignment]
    for proc in (nodes, driver):
        proc.start(timeout=10)
        assert proc.alive and proc.pid and proc.returncode is None and proc.log_path.exists()
    assert [p.title for p in fleet.processes()] == ["driver", "nodes"]  # drivers before their node agents
    restarted = driver.restart(kill=True, timeout=10)
    assert restarted is driver and driver.alive
    fleet.stop()
    assert not nodes.alive and not driver.alive
    assert nodes.returncode is not None and driver.returncode is not None
    with pytest.raises(NotImplementedError):
        Fleet().start(None)  # type: ignore[arg-type]


def test_the_judge_records_a_double_allocation_once_with_its_start_and_fails_the_hold() -> None:
    scenario = _scenario()
    snap = _synthetic(4, 8, 4)
    claims = [dict(c) for c in snap.claims]
    victim = claims[1]["status"]["allocation"]["devices"]["results"][0]
    thief = {**claims[5], "status": {"allocation": {"devices": {"results": [
        {**claims[5]["status"]["allocation"]["devices"]["results"][0], "pool": victim["pool"],
         "device": victim["device"]}]}}}}  # fmt: skip
    claims[5] = thief
    judge = Judge(scenario, Timeline(), "local")
    for t in (1.0, 2.0):
        judge.judge(["no-double-allocation"], dataclasses.replace(snap, time=t, claims=tuple(claims)))
    (evidence,) = judge.violations["no-double-allocation"].values()
    assert evidence.time == 1.0, "reported from when it was first seen"
    assert "no-double-allocation" in judge.checked
    result = ScenarioResult(scenario.name, None, scenario.seed, hold=scenario.expect.hold,
                            violate=scenario.expect.violate)
    judge.finish(result, {})
    verdict = result.invariants["no-double-allocation"]
    assert verdict.status == "violated" and not verdict.met and verdict.violations == [evidence]
    assert result.invariants["no-leak"].status == "not-checked"


def test_a_violation_seen_of_an_invariant_an_installed_driver_is_not_judged_for_is_not_hidden() -> None:
    """container-devices is not judged for the upstream test driver on hollow kubelets (no device truth),
    but the hollow kubelet's runtime reports a container it refused with an unresolvable CDI device in the
    pod's status, and the invariant sees it: the verdict keeps it."""
    from types import SimpleNamespace

    from draguard.harness.invariants.snapshot import Snapshot

    scenario = _scenario("external")
    pod = {"metadata": {"name": "w-0", "namespace": "ns", "uid": "uid-w-0"}, "spec": {"nodeName": "n0"},
           "status": {"phase": "Pending", "containerStatuses": [{"name": "main", "state": {"waiting": {
               "reason": "CreateContainerError",
               "message": "CDI device injection failed: unresolvable CDI devices k8s.io/test-driver=claim-0"}}}]}}
    judge = Judge(scenario, Timeline(), "local")
    judge._run = SimpleNamespace(fleet=FLEETS.get("external").target())  # type: ignore[assignment]
    judge.judge(["container-devices"], Snapshot(time=1.0, pods=(pod,)))
    result = ScenarioResult(scenario.name, None, scenario.seed, hold=scenario.expect.hold, violate=scenario.expect.violate)
    judge.finish(result, {})
    verdict = result.invariants["container-devices"]
    assert verdict.status == "violated" and len(verdict.violations) == 1, verdict
    assert "judged in part on an installed driver" in verdict.note
