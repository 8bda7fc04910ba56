"""The evidence the device-truth scenarios must carry: which invariant, and the words that prove the
violation came from the right place (the hardware's view, not the driver's books)."""

from __future__ import annotations

from draguard.harness.result import ScenarioResult

EVIDENCE: dict[str, list[tuple[str, str]]] = {
    "reset-leak-forget-before-reset": [("no-leak", "its last reset failed"), ("no-leak", "(device truth)")],
    "incomplete-cdi-spec": [("container-devices", "unresolvable CDI devices gpu.draguard.dev/gpu=")],
    "node-reboot-cdi-not-recreated": [("container-devices", "unresolvable CDI devices gpu.draguard.dev/gpu=")],
    "checkpoint-corrupt-discarded": [("no-leak", "no reset followed (device truth)")],
    "driver-rolling-update-ignores-claims": [("no-leak", "no reset followed (device truth)")],
    "double-allocation-handoff": [
        ("no-double-allocation", "prepared for 2 claims"),
        ("no-leak", "no reset followed (device truth)"),
    ],
    "mps-state-left-behind": [("sharing-explicit", "keeps MPS sharing state of claim")],
    "shared-claim-no-strategy": [("sharing-explicit", "with no sharing strategy set up on it (device truth)")],
    "device-failure-silent-health": [("container-devices", "which the hardware reports unhealthy (Xid 79")],
    "gpu-faults-silent-health": [("container-devices", "which the hardware reports unhealthy (Xid")],
}


PROGRESS: dict[str, list[tuple[str, str, str]]] = {
    # (kind, name prefix, words in the summary): what must show in the timeline, so a fix cannot pass
    # by doing nothing and an incident shows the failure the way a kubelet reports it.
    "incomplete-cdi-spec": [("Event", "infer-0", "Failed: Error: failed to create containerd container: CDI device "
                                                 "injection failed: unresolvable CDI devices")],
    "cdi-devices-correct-driver": [("Pod", "infer-0", "Running")],
    "unprepare-failure-handoff-correct-driver": [
        ("Event", "second-0", "FailedPrepareDynamicResources"),
        ("Pod", "second-0", "Running"),
    ],
    "double-allocation-handoff": [("Pod", "second-0", "Running")],
    "mps-shared-claim-correct-driver": [("Pod", "ranks-2", "Running")],
    "device-failure-correct-driver": [("Pod", "infer-0", "Running")],
    "gpu-faults-correct-driver": [("Pod", "infer-0", "Running")],
    "failing-claim-does-not-strand-batch": [("Pod", "next-0", "Running")],
    "checkpoint-corrupt-correct-driver": [("Event", "first-0-gpus", "CheckpointCorrupted: gpu.draguard.dev on gpu-node-0: "
                                                                   "checkpoint was damaged"), ("Pod", "second-0", "Running")],
    "checkpoint-corrupt-discarded": [("Pod", "second-0", "Running")],
    "driver-rolling-update-correct-driver": [("Pod", "second-0", "Running"), ("Pod", "second-1", "Running")],
    "driver-rolling-update-ignores-claims": [("Pod", "second-0", "Running")],
}


def check_evidence(result: ScenarioResult) -> None:
    """Assert each expected violation names the invariant and carries the evidence words."""
    for invariant, words in EVIDENCE.get(result.name, []):
        messages = [v.message for v in result.invariants[invariant].violations]
        assert any(words in m for m in messages), f"{result.name}: {invariant} lacks {words!r}: {messages}"

    wanted = PROGRESS.get(result.name, [])
    if wanted:
        assert result.timeline is not None, f"{result.name}: the run kept no timeline"
        entries = list(result.timeline.events())
        for kind, name, words in wanted:
            assert any(e["kind"] == kind and e["name"].startswith(name) and words in e["summary"] for e in entries), (
                f"{result.name}: the timeline shows no {kind} {name}... with {words!r}"
            )
