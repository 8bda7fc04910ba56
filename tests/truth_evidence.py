"""The evidence the device-truth scenarios must carry: which invariant, and the words that prove the
violation came from the right place (the hardware's view, not the driver's books)."""

from __future__ import annotations

from draguard.harness.result import ScenarioResult

EVIDENCE: dict[str, list[tuple[str, str]]] = {
    "reset-leak-forget-before-reset": [("no-leak", "its last reset failed"), ("no-leak", "(device truth)")],
    "incomplete-cdi-spec": [("container-devices", "unresolvable CDI devices gpu.draguard.dev/gpu=")],
    "double-allocation-handoff": [
        ("no-double-allocation", "prepared for 2 claims"),
        ("no-leak", "no reset followed (device truth)"),
    ],
    "mps-state-left-behind": [("sharing-explicit", "keeps MPS sharing state of claim")],
    "shared-claim-no-strategy": [("sharing-explicit", "with no sharing strategy set up on it (device truth)")],
}


def check_evidence(result: ScenarioResult) -> None:
    """Assert each expected violation names the invariant and carries the evidence words."""
    for invariant, words in EVIDENCE.get(result.name, []):
        messages = [v.message for v in result.invariants[invariant].violations]
        assert any(words in m for m in messages), f"{result.name}: {invariant} lacks {words!r}: {messages}"
