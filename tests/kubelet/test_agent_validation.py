"""`agent:` on node groups: parsed into the runner's values, and faults a node's agent cannot perform
(or more nodes than it serves) rejected at validation with file:line:col."""

from __future__ import annotations

from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers the real fault kinds)
from draguard.harness.agents import CAPABILITIES, capable
from draguard.harness.core.errors import ScenarioError
from draguard.harness.core.registry import FAULTS, Registry
from draguard.harness.scenario import parse_scenario

BASE = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata:
  name: demo
spec:
  nodes:
    - name: node-a
      agent: kubelet
      topology: {gpus: 2}
    - name: node-b
      topology: {gpus: 2}
  deviceClasses:
    - name: gpu.draguard.dev
  workloads:
    - name: w
      replicas: 1
  timeline:
    - at: 5s
      fault: FAULT
      target: {node: TARGET}
"""


def scenario_text(fault: str = "node-restart", target: str = "node-a") -> str:
    return BASE.replace("FAULT", fault).replace("TARGET", target)


def registry_with_fake_only_fault() -> Registry[Any]:
    """The real faults plus one that needs the fake agent's in-place loss."""
    reg: Registry[Any] = Registry("fault")
    for entry in FAULTS:
        reg.register(entry.name, summary=entry.summary, params=entry.params, **entry.meta)(entry.target)
    reg.register("node-freeze", summary="a node stops acting, its agent alive", node_capability="loss-in-place")(
        lambda ctx, params: None
    )
    return reg


def test_agent_is_parsed_and_defaults_to_fake() -> None:
    scenario = parse_scenario(scenario_text(), "s.yaml")
    assert {n.name: n.agent for n in scenario.nodes} == {"node-a": "kubelet", "node-b": "fake"}


def test_both_agents_restart_and_lose_nodes() -> None:
    for fault in ("node-restart", "node-loss"):
        for node in ("node-a", "node-b"):
            parse_scenario(scenario_text(fault, node), "s.yaml")
    assert FAULTS.get("node-restart").meta["node_capability"] == "restart"
    assert FAULTS.get("node-loss").meta["node_capability"] == "loss"
    assert all(capable(agent, cap) for agent in CAPABILITIES for cap in ("restart", "loss"))


def test_a_fault_the_kubelet_cannot_do_is_rejected_on_the_step_with_its_position() -> None:
    faults = registry_with_fake_only_fault()
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario_text("node-freeze", "node-a"), "s.yaml", faults=faults)
    [problem] = [str(p) for p in info.value.problems]
    assert problem.startswith("s.yaml:19:14: spec.timeline[0].fault:"), problem
    assert "'loss-in-place'" in problem and "node 'node-a' (agent 'kubelet')" in problem


def test_the_same_fault_on_a_fake_node_is_accepted() -> None:
    parse_scenario(scenario_text("node-freeze", "node-b"), "s.yaml", faults=registry_with_fake_only_fault())


def test_a_random_target_must_suit_every_node() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario_text("node-freeze", "random"), "s.yaml", faults=registry_with_fake_only_fault())
    assert "node 'node-a' (agent 'kubelet')" in str(info.value.problems[0])


def test_too_many_kubelet_nodes_are_rejected_on_count() -> None:
    text = BASE.replace("    - name: node-a\n      agent: kubelet\n",
                        "    - namePrefix: k\n      count: 40\n      agent: kubelet\n")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text.replace("FAULT", "node-restart").replace("TARGET", "node-b"), "s.yaml")
    [problem] = [str(p) for p in info.value.problems]
    assert problem.startswith("s.yaml:8:7: spec.nodes[0].count:") and "at most 16" in problem, problem


def test_an_unknown_agent_is_rejected() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario_text().replace("agent: kubelet", "agent: docker"), "s.yaml")
    assert "s.yaml:8:14" in str(info.value.problems[0]) and "kubelet" in str(info.value.problems[0])
