"""evaluate: judges a snapshot by named invariants."""

from __future__ import annotations

import pytest
from invariant_objects import claim, gpus, request, result

from draguard.harness.invariants import NAMES, Snapshot, evaluate
from draguard.harness.registry import INVARIANTS


def test_evaluate_runs_each_named_invariant() -> None:
    a = claim("a", [request()], [result("gpu-0")])
    b = claim("b", [request()], [result("gpu-0")])
    verdict = evaluate(Snapshot(time=0, claims=(a, b), slices=(gpus("node-a"),)), ["no-double-allocation", "topology"])
    assert list(verdict) == ["no-double-allocation", "topology"]
    assert len(verdict["no-double-allocation"]) == 1 and verdict["topology"] == []


def test_evaluate_defaults_to_every_invariant_and_rejects_unknown_names() -> None:
    assert set(evaluate(Snapshot(time=0))) == set(INVARIANTS.names()) >= set(NAMES)
    with pytest.raises(KeyError, match="unknown invariant 'nope'; known: claim-atomic"):
        evaluate(Snapshot(time=0), ["nope"])


def test_every_invariant_is_named_and_has_a_rule_sentence() -> None:
    assert NAMES == ("claim-atomic", "gang-atomic", "no-double-allocation", "topology", "no-leak", "no-legacy-mix",
                     "sharing-explicit", "container-devices", "per-claim-errors")  # fmt: skip
    for name in NAMES:
        assert INVARIANTS.get(name).summary.endswith(".")
