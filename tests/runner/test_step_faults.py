"""What a chaos step hands the fake driver through StepContext, and its errors, without a cluster."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.devices.truth import DeviceTruth, InstalledDevice
from draguard.harness.driver import fault_control as faults
from draguard.harness.core.errors import UsageError
from draguard.harness.core.registry import FAULTS
from draguard.harness.fleet.fake import FakeFleet
from draguard.harness.runner.context import RunHandles, StepContext
from draguard.harness.runner.journal import Journal
from draguard.harness.judge.observe import Timeline
from draguard.harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
NODE, DRIVER = "gpu-node-0", "gpu.draguard.dev"


def _step_context(tmp_path: Path, params: dict[str, Any]) -> StepContext:
    """The reset-failure step of failing-claim-does-not-strand-batch on a fake node with gpu-0 and gpu-1."""
    scenario = load_scenario(ROOT / "scenarios" / "failing-claim-does-not-strand-batch.yaml")
    step = scenario.timeline[0]
    assert step.fault == "reset-failure"
    step = dataclasses.replace(step, params=FAULTS.get("reset-failure").params.model_validate(params))
    DeviceTruth(tmp_path, NODE).install([InstalledDevice(n, f"GPU-{n}") for n in ("gpu-0", "gpu-1")])
    driver = SimpleNamespace(root=tmp_path, node=NODE, driver=DRIVER)  # what FakeDriverControl reads
    fleet = FakeFleet()
    fleet.drivers[NODE] = driver  # type: ignore[assignment]
    run = RunHandles(run_id="t", scenario=scenario, kube=None, namespace="ns",  # type: ignore[arg-type]
                     journal=Journal("t", tmp_path / "journal"), timeline=Timeline(), observer=None,  # type: ignore[arg-type]
                     node_root=tmp_path, fleet=fleet)
    return StepContext(run, step, random.Random(0))


def _reset_fail(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads(faults.faults_path(tmp_path, NODE, DRIVER).read_text())["reset_fail"])


def test_a_reset_failure_on_named_devices_fails_only_their_resets_until_cleanup(tmp_path: Path) -> None:
    ctx = _step_context(tmp_path, {"devices": ["gpu-0"]})
    FAULTS.get("reset-failure").target(ctx, ctx.step.params)

    assert _reset_fail(tmp_path) == {"forever": True, "devices": ["gpu-0"]}
    control = faults.FaultControl(faults.faults_path(tmp_path, NODE, DRIVER).parent)
    assert [control.reset_fails("gpu-1"), control.reset_fails("gpu-0"), control.reset_fails("gpu-0")] == [
        False, True, True]
    assert ctx.fired_count() == 2, "only the resets of gpu-0 count as firings"
    [undo] = ctx._run.undo
    assert undo.until_cleanup


def test_a_reset_failure_without_devices_fails_every_reset(tmp_path: Path) -> None:
    ctx = _step_context(tmp_path, {"count": 2})
    FAULTS.get("reset-failure").target(ctx, ctx.step.params)
    assert _reset_fail(tmp_path).get("devices") is None
    control = faults.FaultControl(faults.faults_path(tmp_path, NODE, DRIVER).parent)
    assert [control.reset_fails("gpu-1"), control.reset_fails("gpu-0"), control.reset_fails("gpu-0")] == [
        True, True, False]


def test_a_reset_failure_on_a_device_the_node_lacks_names_the_devices_it_has(tmp_path: Path) -> None:
    ctx = _step_context(tmp_path, {"devices": ["gpu-0", "gpu-7"]})
    with pytest.raises(UsageError, match="step reset-fails: node gpu-node-0 has no device gpu-7; it has gpu-0, gpu-1"):
        FAULTS.get("reset-failure").target(ctx, ctx.step.params)
    assert not faults.faults_path(tmp_path, NODE, DRIVER).exists(), "nothing was switched on"
