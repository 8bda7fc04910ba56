"""Rules a scenario step adds to the interposer in process: validated, counted, switched off alone."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from draguard.harness.grpcapi.plugin import ClaimRef
from draguard.harness.proxy.call_rules import Action, FaultRule, FaultSet

CLAIM = [ClaimRef(namespace="ns", name="c", uid="u")]


def test_adding_a_rule_keeps_the_counts_and_budgets_of_the_others() -> None:
    faults = FaultSet()
    first = faults.add(FaultRule(method="NodePrepareResources", action=Action.ERROR, count=1, node="n1"))
    assert faults.match("n1", "d", "NodePrepareResources", CLAIM) is not None
    second = faults.add(FaultRule(method="NodeUnprepareResources", action=Action.ERROR, node="n1"))
    assert faults.match("n1", "d", "NodePrepareResources", CLAIM) is None, "the first rule's budget came back"
    assert faults.match("n1", "d", "NodeUnprepareResources", CLAIM) is not None
    assert faults.applied() == [1, 1]
    faults.drop(second)
    assert faults.match("n1", "d", "NodeUnprepareResources", CLAIM) is None
    assert faults.applied()[first] == 1 and faults.applied()[second] == 1


def test_a_rule_is_validated_when_built() -> None:
    with pytest.raises(ValidationError, match="unknown gRPC status code"):
        FaultRule(action=Action.ERROR, code="NOPE")
