"""The invariants judged from the interposer's record on a real control plane.

evict-before-prepare-succeeded with the interposer in front of the fake driver: the correct driver
holds unprepare-unknown (and every other call invariant); the unknown-unprepare-error mutant breaks it,
named by the claim and why. With the interposer in front, the scenario's prepare failures are the
interposer's: the driver never saw the claim before its unprepare.

prepared-devices-allocated, from the devices each NodePrepareResources answered: held by the correct
fake driver on pods that run; violated by a driver that answers a device the claim was not allocated.
No mutant of the fake driver does that (one would need a sanity check aimed at it and kill-matrix
cells of its own), so the misbehaving driver here is the fake driver with its prepare answers
rewritten as they leave its socket, before the interposer records them: the record, the judge and the
verdict are the run's own. The upstream test driver is not interposed (``driver.interpose`` is for
the fake driver only: validation refuses it for an external one).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import grpc
import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds)
from draguard.harness.grpcapi import dra_v1_pb2
from draguard.harness.invariants import DriverCall
from draguard.harness.judge import judge
from draguard.harness.proxy import interposer
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
CALL_INVARIANTS = ("per-claim-errors", "prepare-idempotent", "unprepare-unknown", "no-prepare-loop",
                   "prepared-devices-allocated")


@pytest.mark.cluster
@pytest.mark.parametrize("mutant", [None, "unknown-unprepare-error"])
def test_unprepare_of_a_claim_the_driver_never_saw_is_judged_from_the_calls(mutant: str | None) -> None:
    text = (ROOT / "scenarios" / "evict-before-prepare-succeeded.yaml").read_text()
    driver = "{interpose: true" + (f", mutant: {mutant}" if mutant else "") + "}"
    text = text.replace("  seed: 25\n", f"  seed: 25\n  driver: {driver}\n", 1)
    scenario = parse_scenario(text, "evict-before-prepare-succeeded.yaml")
    result = Runner(scenario, RunOptions(backend="local")).run()
    assert result.error is None, result.error
    invariants = result.invariants
    if mutant is None:
        assert result.ok, result.shortfalls
        for name in CALL_INVARIANTS:
            assert invariants[name].status == "held", (name, invariants[name])
        return
    found = invariants["unprepare-unknown"]
    assert found.status == "violated" and not found.met, found
    assert any("failed the unprepare of ResourceClaim" in v.message and "(never prepared on this node)" in v.message
               for v in found.violations), [v.message for v in found.violations]
    for name in ("per-claim-errors", "prepare-idempotent", "no-prepare-loop", "prepared-devices-allocated"):
        assert invariants[name].status == "held", (name, invariants[name])


TWO_PODS = """\
apiVersion: draguard.dev/v1alpha1
kind: Scenario
metadata: {name: prepared-devices}
spec:
  seed: 3
  driver: {interpose: true}
  nodes:
    - name: gpu-node-0
      topology: {gpus: 4}
  deviceClasses:
    - name: gpu.draguard.dev
      selectors: ["device.driver == 'gpu.draguard.dev'"]
  workloads:
    - name: llm
      replicas: 2
      claims:
        - name: gpus
          requests: [{name: gpu, deviceClassName: gpu.draguard.dev}]
  settle: {timeout: 30s, cleanup: 30s}
  expect:
    progress:
      - {workloads: [llm], phase: Running}
"""

MIRROR = {f"gpu-{i}": f"gpu-{3 - i}" for i in range(4)}
"""The misbehaving driver's answer: each device named as its mirror on the node (never itself)."""


@pytest.mark.cluster
@pytest.mark.parametrize("misbehaving", [False, True], ids=["correct", "answers-other-devices"])
def test_the_devices_a_prepare_answers_are_judged_against_the_allocation(misbehaving: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[DriverCall] = []
    read = judge.driver_call

    def recorded(entry: Any, offset: float = 0.0) -> DriverCall:
        seen.append(read(entry, offset))
        return seen[-1]

    monkeypatch.setattr(judge, "driver_call", recorded)
    if misbehaving:
        forward = interposer._Handler._forward

        def answering_other_devices(self: Any, full: str, service: str, request: bytes,
                                    context: grpc.ServicerContext | None) -> bytes:
            raw = forward(self, full, service, request, context)
            if not full.endswith("/NodePrepareResources"):
                return raw
            answer = dra_v1_pb2.NodePrepareResourcesResponse.FromString(raw)
            for claim in answer.claims.values():
                for device in claim.devices:
                    device.device_name = MIRROR.get(device.device_name, device.device_name)
            return bytes(answer.SerializeToString())

        monkeypatch.setattr(interposer._Handler, "_forward", answering_other_devices)
    result = Runner(parse_scenario(TWO_PODS, "prepared-devices.yaml"), RunOptions(backend="local")).run()
    assert result.error is None, result.error
    prepared = [c for c in seen if c.method == "NodePrepareResources" and c.status == "OK" and c.answers]
    assert {uid for c in prepared for uid in c.answers or {}} and all(
        d.device in MIRROR for c in prepared for answer in (c.answers or {}).values() for d in answer), seen
    found = result.invariants["prepared-devices-allocated"]
    if not misbehaving:
        assert found.status == "held" and found.met and result.ok, (found, result.shortfalls)
        return
    assert found.status == "violated" and not found.met and not result.ok, found
    assert len(found.violations) == 2, [v.message for v in found.violations]
    assert len({v.objects for v in found.violations}) == 2  # each pod's claim, named
    for v in found.violations:
        [claim] = v.objects
        assert claim.startswith("ResourceClaim/") and f"prepared ResourceClaim {claim[len('ResourceClaim/'):]} at " in (
            v.message), v.message
        [allocated] = [d for d in MIRROR if f"(allocated: gpu-node-0/{d})" in v.message]
        assert f"answered gpu-node-0/{MIRROR[allocated]}, which the allocation does not name" in v.message, v.message
        assert f"did not answer allocated gpu-node-0/{allocated}" in v.message, v.message
        assert set(v.devices) == {f"gpu.draguard.dev/gpu-node-0/{d}" for d in (allocated, MIRROR[allocated])}


@pytest.mark.cluster
@pytest.mark.parametrize("mutant", [None, "non-idempotent-prepare"])
def test_a_repeated_prepare_is_compared_with_the_first_answer_after_a_node_agent_restart(mutant: str | None) -> None:
    """node-agent-restart behind the interposer: the restarted agent prepares again the claims whose
    prepare it had not recorded as done. The correct driver answers as the first time; non-idempotent-prepare
    answers new CDI IDs, which only the recorded answers show (the call itself succeeds)."""
    text = (ROOT / "scenarios" / "node-agent-restart.yaml").read_text()
    driver = "{interpose: true" + (f", mutant: {mutant}" if mutant else "") + "}"
    text = text.replace("  seed: 11\n", f"  seed: 11\n  driver: {driver}\n", 1)
    result = Runner(parse_scenario(text, "node-agent-restart.yaml"), RunOptions(backend="local")).run()
    assert result.error is None, result.error
    found = result.invariants["prepare-idempotent"]
    assert result.invariants["prepared-devices-allocated"].status == "held", result.invariants["prepared-devices-allocated"]
    if mutant is None:
        assert found.status == "held" and result.ok, (found, result.shortfalls)
        return
    assert found.status == "violated" and found.violations, found
    for v in found.violations:
        assert "answered a repeated prepare of ResourceClaim" in v.message and "named others" in v.message, v.message
        assert re.search(r"-r\d+-gpu-\d", v.message), v.message  # the CDI IDs of its re-preparation
