"""The invariants judged from the interposer's record on a real control plane: evict-before-prepare-succeeded
with the interposer in front of the fake driver. The correct driver holds unprepare-unknown (and every
other call invariant); the unknown-unprepare-error mutant breaks it, named by the claim and why. With the
interposer in front, the scenario's prepare failures are the interposer's: the driver never saw the
claim before its unprepare."""

from __future__ import annotations

from pathlib import Path

import pytest

import draguard.chaos  # noqa: F401  (registers the fault kinds)
from draguard.harness.runner.runner import Runner, RunOptions
from draguard.harness.scenario.loader import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
CALL_INVARIANTS = ("per-claim-errors", "prepare-idempotent", "unprepare-unknown", "no-prepare-loop")


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
    for name in ("per-claim-errors", "prepare-idempotent", "no-prepare-loop"):
        assert invariants[name].status == "held", (name, invariants[name])
