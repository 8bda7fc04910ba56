"""node-reboot on both node agents: the reproduction with the cdi-not-recreated mutant and its twin.

The reboot empties the node's CDI spec directory and removes the driver's sockets and the node's
containers, keeps the checkpoints, and restarts the driver and the node agent; the agent prepares the
running pod's claim again and creates its container afresh (kubernetes/kubernetes PR #141966). The
mutant answers that prepare without writing the spec (kubernetes/kubernetes#141433): the container
cannot be created and container-devices is violated with the unresolvable CDI ID as evidence, on the
fake agent and on hollow kubelets. The correct driver writes the spec again and every invariant holds.

Both run without the interposer, as the library files do: its cdi-specs-resolve judges a claim's spec
from the prepare's answer on, and between the reboot and the re-prepare (2-3 s here) the wiped spec is
missing for that reason alone.
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


def _on(name: str, agent: str) -> Scenario:
    sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    return dataclasses.replace(sc, nodes=tuple(dataclasses.replace(n, agent=agent) for n in sc.nodes))


def _rebooted(result: ScenarioResult, agent: str) -> None:
    assert result.error is None, result.error
    assert set(result.environment["nodeAgents"].values()) == {agent}
    [step] = [s for s in result.steps if s.name == "reboot"]
    assert step.status == "ok" and step.fired == 1, (step.status, step.detail)
    assert "1 CDI spec file(s) and 2 socket(s) removed" in step.detail, step.detail


@pytest.mark.cluster
@pytest.mark.parametrize("agent", ["fake", "kubelet"])
def test_a_driver_that_does_not_write_the_spec_again_is_caught_by_container_devices(agent: str) -> None:
    result = Runner(_on("node-reboot-cdi-not-recreated", agent), RunOptions(backend="local")).run()
    _rebooted(result, agent)
    cd = result.invariants["container-devices"]
    assert cd.status == "violated" and cd.met, (cd.status, cd.expected)
    assert any("unresolvable CDI devices gpu.draguard.dev/gpu=" in v.message for v in cd.violations), \
        [v.message for v in cd.violations]
    others = {n: r.status for n, r in result.invariants.items() if n != "container-devices" and r.status == "violated"}
    assert not others, others
    assert result.ok, result.shortfalls


@pytest.mark.cluster
@pytest.mark.parametrize("agent", ["fake", "kubelet"])
def test_the_correct_driver_writes_the_spec_again_and_the_container_starts(agent: str) -> None:
    """The reproduction's run with the mutant's flag off: the container is created again (the reproduction
    shows this run creates it: the creation fails there) and its CDI devices now resolve."""
    result = Runner(_on("node-reboot-correct-driver", agent), RunOptions(backend="local")).run()
    _rebooted(result, agent)
    violated = {n: [v.message for v in r.violations][:2] for n, r in result.invariants.items() if r.status == "violated"}
    assert not violated, violated
    assert result.invariants["container-devices"].status == "held"
    assert result.ok, result.shortfalls
    assert result.timeline is not None
    failed = [e["summary"] for e in result.timeline.events() if e["kind"] == "Event" and "CDI" in e["summary"]]
    assert not failed, failed
