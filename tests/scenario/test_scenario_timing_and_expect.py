"""Validation of the timeline's timing fields, of capabilities and of ``expect.progress``/``evidence``.

These use the real fault registry (``draguard.chaos``): capabilities are declared by each fault at
registration, and a scenario that asks a fault of a run that cannot perform it is rejected with the
step's position and the reason.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds with their capabilities)
from draguard.harness.core.errors import DefinitionError, ScenarioError
from draguard.harness.core.registry import FAULTS, INVARIANTS, Registry
from draguard.harness.result import Evidence
from draguard.harness.runner.runner import evidence_matches
from draguard.harness.scenario import parse_scenario
from draguard.harness.scenario.types import EvidenceRule

BASE = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata:
  name: demo
spec:
  nodes:
    - name: node-a
      topology: {gpus: 4}
  deviceClasses:
    - name: gpu.draguard.dev
  workloads:
    - name: gang-a
      replicas: 2
      claims:
        - name: gpus
          requests: [{name: gpu, deviceClassName: gpu.draguard.dev, count: 2}]
    - name: late
      replicas: 1
  timeline:
    - name: down
      when: {workload: gang-a, phase: Running}
      fault: driver-down
      params: {duration: 8s}
    - after: {step: down, delay: 2s}
      fault: force-delete
      target: {workload: gang-a, member: 1}
      tolerance: 1s
      optional: true
    - at: 3s
      fault: arrive
      params: {workload: late}
  expect:
    violate: [gang-atomic]
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", faults=FAULTS)
    return [str(p) for p in info.value.problems]


def edit(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_timing_fields_become_runner_values_with_scenario_defaults() -> None:
    text = BASE + "  timing: {stepTolerance: 4s, gangGrace: 10s}\n"
    sc = parse_scenario(text, "s.yaml", faults=FAULTS)
    down, fd, arrive = sc.timeline
    assert fd.after is not None and fd.after.step == "down" and fd.after.delay == timedelta(seconds=2)
    assert fd.tolerance == timedelta(seconds=1) and fd.optional
    assert down.tolerance == timedelta(seconds=4) and not down.optional
    assert down.timeout == timedelta(minutes=2)
    assert sc.timing.gang_grace == timedelta(seconds=10)
    assert arrive.params is not None and getattr(arrive.params, "workload") == "late"


def test_after_must_name_an_earlier_step() -> None:
    text = edit("after: {step: down, delay: 2s}", "after: {step: dwn, delay: 2s}")
    [problem] = problems(text)
    assert problem.startswith("s.yaml:24:21: spec.timeline[1].after.step: unknown earlier step 'dwn'; "
                              "did you mean 'down'?")


def test_a_step_sets_exactly_one_of_at_when_after() -> None:
    text = edit("    - after: {step: down, delay: 2s}\n", "    - after: {step: down, delay: 2s}\n      at: 1s\n")
    assert problems(text) == ["s.yaml:25:7: spec.timeline[1].at: set only one of 'after', 'at'"]


def test_arrive_must_name_a_workload_of_the_scenario() -> None:
    text = edit("params: {workload: late}", "params: {workload: lat}")
    [problem] = problems(text)
    assert problem.startswith("s.yaml:31:26: spec.timeline[2].params.workload: unknown workload 'lat'")


def test_a_fault_the_run_cannot_perform_is_rejected_with_the_step_position_and_reason() -> None:
    text = edit("spec:\n  nodes:\n    - name: node-a\n      topology: {gpus: 4}\n",
                "spec:\n  cluster: {backend: kubeconfig}\n  driver: {kind: external, deviceClass: gpu.example.com}\n"
                "  nodes:\n    - name: node-a\n")
    text = text.replace("deviceClassName: gpu.draguard.dev", "deviceClassName: gpu.example.com")
    [problem] = [p for p in problems(text) if "cannot run here" in p]
    assert problem == ("s.yaml:23:14: spec.timeline[0].fault: fault 'driver-down' cannot run here: it needs "
                       "stop-driver, but spec.driver.kind is external and names no driver.daemonSet (nor runs on "
                       "cluster.backend: kind, where draguard finds it, or local, where draguard runs it): draguard "
                       "cannot stop it")


def test_an_external_driver_on_the_local_backend_is_restarted_and_interposed_by_default() -> None:
    """On its own control plane draguard runs the external driver's processes: it restarts them, and the
    gRPC interposer sits in front of them unless the file says otherwise."""
    text = edit("spec:\n  nodes:\n    - name: node-a\n      topology: {gpus: 4}\n",
                "spec:\n  driver: {kind: external, deviceClass: gpu.example.com}\n  nodes:\n    - name: node-a\n")
    text = text.replace("deviceClassName: gpu.draguard.dev", "deviceClassName: gpu.example.com")
    sc = parse_scenario(text, "s.yaml")
    assert sc.driver.interpose is True
    assert "per-claim-errors" in sc.expect.hold  # judged from the interposer's record
    off = parse_scenario(text.replace("deviceClass: gpu.example.com}", "deviceClass: gpu.example.com, interpose: false}"),
                         "s.yaml")
    assert off.driver.interpose is False and "per-claim-errors" not in off.expect.hold


def test_a_control_plane_restart_needs_the_local_backend() -> None:
    text = edit("spec:\n", "spec:\n  cluster: {backend: kubeconfig}\n")
    text = edit("      fault: driver-down\n      params: {duration: 8s}\n", "      fault: scheduler-restart\n", text)
    [problem] = problems(text)
    assert "fault 'scheduler-restart' cannot run here: it needs local-backend, but spec.cluster.backend is " \
           "kubeconfig" in problem
    assert problem.startswith("s.yaml:23:14: spec.timeline[0].fault:")


def test_an_invariant_the_run_cannot_judge_is_rejected_and_left_out_of_the_default_hold() -> None:
    """per-claim-errors judges the interposer's record: named without one it is refused; by default it
    holds only where the interposer records the calls, instead of passing with nothing judged."""
    text = BASE.replace("    violate: [gang-atomic]\n", "    violate: [gang-atomic, per-claim-errors]\n")
    [problem] = problems(text)
    assert problem == ("s.yaml:33:28: spec.expect.violate[1]: invariant 'per-claim-errors' cannot be judged here: it "
                       "needs interposer, but spec.driver.interpose is not true")
    assert "per-claim-errors" not in parse_scenario(BASE, "s.yaml", faults=FAULTS).expect.hold
    interposed = BASE.replace("spec:\n", "spec:\n  driver: {interpose: true}\n", 1)
    assert "per-claim-errors" in parse_scenario(interposed, "s.yaml", faults=FAULTS).expect.hold
    named = parse_scenario(interposed.replace("    violate: [gang-atomic]\n", "    violate: [gang-atomic, per-claim-errors]\n"),
                           "s.yaml", faults=FAULTS)
    assert named.expect.violate == ("gang-atomic", "per-claim-errors")


def test_evidence_is_only_for_expected_violations_and_names_something() -> None:
    text = BASE.replace("    violate: [gang-atomic]\n", "    violate: [gang-atomic]\n    evidence:\n"
                        "      - {invariant: no-leak, node: node-a}\n      - {invariant: gang-atomic}\n"
                        "      - {invariant: gang-atomic, workload: gang-a, member: 5, claim: gpu}\n")
    assert problems(text) == [
        "s.yaml:35:21: spec.expect.evidence[0].invariant: evidence is for violations: list 'no-leak' in "
        "expect.violate first",
        "s.yaml:36:9: spec.expect.evidence[1]: name what the violation must carry: one of 'workload', 'claim', "
        "'node', 'device'",
        "s.yaml:37:60: spec.expect.evidence[2].member: expected a member index from 0 to 1, got 5",
        "s.yaml:37:70: spec.expect.evidence[2].claim: unknown claim of workload 'gang-a' 'gpu'; did you mean "
        "'gpus'? expected one of: gpus",
    ]


def test_progress_names_workloads_and_counts_they_can_reach() -> None:
    text = BASE + "    progress:\n      - {workloads: [gang-a, gang-c], count: 3}\n"
    found = problems(text)
    assert any("spec.expect.progress[0].workloads[1]: unknown workload 'gang-c'" in p for p in found)
    assert any("spec.expect.progress[0].count: expected at most the replicas of gang-a (2), got 3" in p
               for p in found)


def test_timed_progress_starts_its_clock_at_a_named_step() -> None:
    sc = parse_scenario(BASE + "    progress:\n      - {workloads: [late], within: 10s, after: 2-arrive}\n", "s.yaml",
                        faults=FAULTS)
    [p] = sc.expect.progress
    assert (p.within, p.after) == (10.0, "2-arrive")
    assert p.describe() == "late: all pod(s) Running within 10s of step 2-arrive"
    found = problems(BASE + "    progress:\n      - {workloads: [late], after: down}\n"
                     "      - {workloads: [late], within: 5s, after: nowhere}\n")
    assert any("spec.expect.progress[0].after: 'after' starts the clock of 'within'; give 'within' too" in p
               for p in found), found
    assert any("spec.expect.progress[1].after: unknown step 'nowhere'" in p for p in found), found


def test_expected_events_name_a_reason_and_a_workload_of_the_scenario() -> None:
    sc = parse_scenario(BASE + "    events:\n      - {workload: gang-a, reason: FailedScheduling, message: elsewhere}\n"
                        "      - {reason: FailedPrepareDynamicResources, seen: false}\n", "s.yaml", faults=FAULTS)
    seen, unseen = sc.expect.events
    assert seen.describe() == "Event FailedScheduling 'elsewhere' about a pod of gang-a"
    assert unseen.describe() == "no Event FailedPrepareDynamicResources" and not unseen.seen
    # An Event about a member of the workload, with the reason and the words; not another workload's.
    assert seen.matches("gang-a-1", "FailedScheduling", "claim x got allocated elsewhere in the meantime")
    assert not seen.matches("gang-ab-1", "FailedScheduling", "got allocated elsewhere")
    assert not seen.matches("gang-a-1", "Scheduled", "elsewhere")
    assert not seen.matches("gang-a-1", "FailedScheduling", "no words")
    assert unseen.matches("any-pod", "FailedPrepareDynamicResources", "whatever")
    found = problems(BASE + "    events:\n      - {workload: gang-c, reason: FailedScheduling}\n"
                     "      - {reason: failed scheduling}\n")
    assert any("spec.expect.events[0].workload: unknown workload 'gang-c'" in p for p in found), found
    assert any("spec.expect.events[1].reason: expected a string matching '^[A-Z][A-Za-z0-9]*$', got string 'failed "
               "scheduling'" in p for p in found), found


def test_a_fault_declaring_an_unknown_capability_is_a_definition_error() -> None:
    registry: Registry[Any] = Registry("fault")
    with pytest.raises(DefinitionError, match="needs='gpu-cluster' is not a capability"):
        registry.register("x", summary="x", needs=("gpu-cluster",))(lambda: None)
    with pytest.raises(DefinitionError, match="judged='sometimes'"):
        registry.register("y", summary="y", judged="sometimes")(lambda: None)


def test_every_invariant_declares_when_it_is_judged() -> None:
    assert {e.name: e.meta.get("judged") for e in INVARIANTS} == {
        "claim-atomic": "continuously", "gang-atomic": "continuously", "no-double-allocation": "continuously",
        "topology": "continuously", "no-legacy-mix": "continuously", "no-leak": "after-cleanup",
        "sharing-explicit": "after-cleanup", "container-devices": "continuously", "per-claim-errors": "continuously",
        "prepare-idempotent": "continuously", "unprepare-unknown": "continuously",
        "prepared-devices-allocated": "continuously", "no-prepare-loop": "continuously",
        "cdi-specs-resolve": "continuously", "lock-free-handlers": "continuously",
    }


def test_evidence_rules_match_the_names_a_violation_carries() -> None:
    v = Evidence("gang partial", ("Pod/ns/batch-2", "Pod/ns/batch-3", "ResourceClaim/ns/batch-2-gpus-x7k2p"),
                 ("gpu.draguard.dev/gpu-node-1/gpu-3",))
    assert evidence_matches(EvidenceRule("gang-atomic", workload="batch"), v, "ns")
    assert evidence_matches(EvidenceRule("gang-atomic", workload="batch", member=3), v, "ns")
    assert not evidence_matches(EvidenceRule("gang-atomic", workload="batch", member=0), v, "ns")
    assert not evidence_matches(EvidenceRule("gang-atomic", workload="bat"), v, "ns")
    assert evidence_matches(EvidenceRule("gang-atomic", workload="batch", claim="gpus"), v, "ns")
    assert evidence_matches(EvidenceRule("gang-atomic", node="gpu-node-1", device="gpu-3"), v, "ns")
    assert not evidence_matches(EvidenceRule("gang-atomic", node="gpu-node-0"), v, "ns")
    assert not evidence_matches(EvidenceRule("gang-atomic", device="gpu-1"), v, "ns")
