"""evaluate: judges a snapshot by named invariants."""

from __future__ import annotations

import pytest
from invariant_objects import claim, gpus, request, result

from draguard.harness.invariants import NAMES, Snapshot, evaluate
from draguard.harness.core.registry import INVARIANTS


def test_evaluate_runs_each_named_invariant() -> None:
    a = claim("a", [request()], [result("gpu-0")])
    b = claim("b", [request()], [result("gpu-0")])
    verdict = evaluate(Snapshot(time=0, claims=(a, b), slices=(gpus("node-a"),)), ["no-double-allocation", "topology"])
    assert list(verdict) == ["no-double-allocation", "topology"]
    assert len(verdict["no-double-allocation"]) == 1 and verdict["topology"] == []


def test_evaluate_defaults_to_every_invariant_and_rejects_unknown_names() -> None:
    assert set(evaluate(Snapshot(time=0))) == set(INVARIANTS.names()) >= set(NAMES)
    with pytest.raises(KeyError, match="unknown invariant 'nope'; known: cdi-specs-resolve, claim-atomic"):
        evaluate(Snapshot(time=0), ["nope"])


def test_every_invariant_is_named_and_has_a_rule_sentence() -> None:
    assert NAMES == ("claim-atomic", "gang-atomic", "no-double-allocation", "topology", "no-leak", "no-legacy-mix",
                     "sharing-explicit", "container-devices", "per-claim-errors", "prepare-idempotent",
                     "unprepare-unknown", "prepared-devices-allocated", "no-prepare-loop", "cdi-specs-resolve",
                     "lock-free-handlers")  # fmt: skip
    for name in NAMES:
        assert INVARIANTS.get(name).summary.endswith(".")


def test_a_template_claim_is_found_by_its_controlling_pod_and_pod_claim_name_before_the_pod_status_names_it() -> None:
    """Pods the resourceclaim controller has not written back yet are looked up, not scanned for: a
    backlog of 5000 such pods scanned 5000 claims each per judging round."""
    from invariant_objects import claim, pod, request

    from draguard.harness.invariants.snapshot import Snapshot, pod_claims

    p = pod("w-0", template_claims={"gpus": "unused"})
    p["status"].pop("resourceClaimStatuses")  # not written back yet
    mine = claim("w-0-gpus-x", [request()], owner=p)
    other_pod = claim("w-1-gpus-y", [request()], owner=pod("w-1"))
    other_entry = claim("w-0-nics-z", [request()], owner=p)
    other_entry["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] = "nics"
    not_controller = claim("w-0-gpus-q", [request()], owner=p)
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    for claims, found in (([other_pod, other_entry, not_controller, mine], mine),
                          ([other_pod, other_entry, not_controller], None)):  # fmt: skip
        assert pod_claims(p, Snapshot(0.0, pods=(p,), claims=tuple(claims))) == [("gpus", found)]
