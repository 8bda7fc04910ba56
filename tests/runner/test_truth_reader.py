"""The runner reads every node's device truth each judging round (every second, at 500 nodes): one
reader per node is kept across snapshots, so a truth is parsed again only when its bytes changed,
and a change is always seen."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds for validation)
from draguard.harness.devices import truth as truth_module
from draguard.harness.devices.truth import DeviceTruth, InstalledDevice
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import parse_scenario

SCENARIO = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: truth-reader}
spec:
  nodes: [{name: n0, topology: {gpus: 2}}]
  deviceClasses: [{name: gpu.draguard.dev}]
  workloads: [{name: w, replicas: 1, claims: [{name: c, requests: [{name: r, deviceClassName: gpu.draguard.dev}]}]}]
"""


def test_a_nodes_truth_is_parsed_once_while_unchanged_and_read_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runner = Runner(parse_scenario(SCENARIO, "s.yaml"), RunOptions(backend="local"))
    root = tmp_path / "nodes"
    machine = DeviceTruth(root, "n0")  # the node's hardware, written as the fake driver and agent do
    machine.install([InstalledDevice("gpu-0", "GPU-0", "gpu", None, 1 << 30)])
    parsed = []
    real = truth_module.NodeTruth.from_json
    monkeypatch.setattr(truth_module.NodeTruth, "from_json", classmethod(lambda cls, d: parsed.append(1) or real(d)))

    first = runner.judge.truth(root, "n0").read()
    for _ in range(5):
        assert runner.judge.truth(root, "n0").read() is first
    assert len(parsed) == 1, "an unchanged truth was parsed again"

    machine.set_health("gpu-0", "XID 79: fallen off the bus")
    changed = runner.judge.truth(root, "n0").read()
    assert changed.devices["gpu-0"].health == "unhealthy"
    assert len(parsed) == 2


def test_a_drivers_books_changed_in_the_tick_of_the_last_read_are_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner reads a node's checkpoint and CDI folder again only when their stamps change; a stamp
    kept by a coarse file clock (same tick, same size) must not keep the books of before."""
    from types import SimpleNamespace

    from draguard.harness.core import fsio as state
    from draguard.harness.driver.plugin import FakeDriver
    from draguard.harness.driver.topology import generic, resolve
    from draguard.harness.grpcapi.plugin import ClaimRef
    from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runner = Runner(parse_scenario(SCENARIO, "s.yaml"), RunOptions(backend="local"))
    root = tmp_path / "nodes"
    runner.judge._run = SimpleNamespace(  # type: ignore[assignment]
        fleet=SimpleNamespace(drivers={"n0": SimpleNamespace(root=root, node_root=root)}), driver_name=DEFAULT_DRIVER)
    ref = ClaimRef("ns", "c1", "uid-1")
    claim = {"metadata": {"name": "c1", "namespace": "ns", "uid": "uid-1"}, "status": {"allocation": {"devices": {
        "results": [{"request": "r", "driver": DEFAULT_DRIVER, "pool": "n0", "device": "gpu-0"}]}}}}
    driver = FakeDriver(driver=DEFAULT_DRIVER, node="n0", dirs=NodeDirs(root, "n0").create(),
                        inventory=resolve(generic(2), "n0"), claims=SimpleNamespace(get_claim=lambda ns, name: claim),
                        reset_seconds=0)  # fmt: skip
    assert driver.prepare([ref])[ref.uid].error == ""
    tick = (time.time_ns(), 4096)
    monkeypatch.setattr(state, "file_stamp", lambda path: tick)
    assert set(runner.judge.driver_state("n0").prepared) == {ref.uid}
    assert runner.judge.driver_state("n0").cdi_specs == {ref.uid}
    assert driver.unprepare([ref]) == {ref.uid: ""}
    books = runner.judge.driver_state("n0")
    assert books.prepared == {} and books.cdi_specs == frozenset()
