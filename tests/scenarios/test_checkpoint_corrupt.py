"""checkpoint-corrupt on both node agents: the correct driver and the discard-corrupt-checkpoint mutant.

The driver's checkpoint is damaged while it is down (kubernetes-sigs/dra-driver-nvidia-gpu#1100). The
correct driver starts, records a CheckpointCorrupted Warning event on the running pod's claim, keeps the
claim, and resets its GPUs when the pod is evicted, so the next pod runs on clean devices. The mutant
starts empty in silence: no event, the evicted pod's GPUs are never reset and the next pod's container
starts on them (no-leak, from the device truth). Each mode of the fault is run once on each agent.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers fault kinds)
from draguard.harness.result import ScenarioResult
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import load_scenario
from draguard.harness.scenario.types import Scenario

ROOT = Path(__file__).resolve().parents[2]


def _on(name: str, agent: str, mode: str) -> Scenario:
    sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    timeline = tuple(dataclasses.replace(s, params=s.params.model_copy(update={"mode": mode}))
                     if s.fault == "checkpoint-corrupt" and s.params is not None else s for s in sc.timeline)  # fmt: skip
    return dataclasses.replace(sc, nodes=tuple(dataclasses.replace(n, agent=agent) for n in sc.nodes), timeline=timeline)


def _run(name: str, agent: str, mode: str) -> tuple[ScenarioResult, list[str]]:
    result = Runner(_on(name, agent, mode), RunOptions(backend="local")).run()
    assert result.error is None, result.error
    assert set(result.environment["nodeAgents"].values()) == {agent}
    [step] = [s for s in result.steps if s.name == "corrupt"]
    assert step.status == "ok" and step.fired == 1, (step.status, step.detail)
    assert f"{mode} (" in step.detail, step.detail
    assert result.timeline is not None
    events = [e["summary"] for e in result.timeline.events() if e["kind"] == "Event" and "CheckpointCorrupted" in e["summary"]]
    return result, events


@pytest.mark.cluster
@pytest.mark.parametrize(("agent", "mode"), [("fake", "truncated"), ("kubelet", "garbled")])
def test_the_correct_driver_starts_reports_and_keeps_the_prepared_claim(agent: str, mode: str) -> None:
    result, events = _run("checkpoint-corrupt-correct-driver", agent, mode)
    violated = {n: [v.message for v in r.violations][:2] for n, r in result.invariants.items() if r.status == "violated"}
    assert not violated, violated
    assert result.ok, result.shortfalls
    [event] = events  # one claim was prepared on the node: the first pod's
    assert "checkpoint was damaged; this claim's prepared devices (gpu-0, gpu-1)" in event, event


@pytest.mark.cluster
@pytest.mark.parametrize(("agent", "mode"), [("fake", "garbled"), ("kubelet", "truncated")])
def test_a_driver_that_discards_the_damaged_checkpoint_is_caught_by_no_leak(agent: str, mode: str) -> None:
    result, events = _run("checkpoint-corrupt-discarded", agent, mode)
    assert not events
    leak = result.invariants["no-leak"]
    assert leak.status == "violated" and leak.met
    assert any("no reset followed (device truth)" in v.message for v in leak.violations), [v.message for v in leak.violations]
    others = {n for n, r in result.invariants.items() if n != "no-leak" and r.status == "violated"}
    assert not others, others
    assert result.ok, result.shortfalls
