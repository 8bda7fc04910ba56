"""Every sanity check is registered with a stable id in its area, a one-line rule and a source; the
decorator refuses a check without them."""

from __future__ import annotations

import pytest

from draguard.conformance.sanity import AREAS, sanity_check, sanity_checks
from draguard.harness.core.errors import DefinitionError


def test_every_check_has_an_id_in_its_area_a_rule_and_a_source() -> None:
    entries = sanity_checks()
    assert len(entries) >= 30
    for e in entries:
        prefix, area, name = e.name.split(".")
        assert prefix == "sanity" and area in AREAS and name
        assert e.meta["area"] == area and e.summary and "\n" not in e.summary
        assert e.meta["source"].strip()
    assert {e.meta["area"] for e in entries} == set(AREAS)
    assert [e.meta["area"] for e in entries] == sorted((e.meta["area"] for e in entries), key=AREAS.index)


def test_selecting_checks_by_glob() -> None:
    assert [e.name for e in sanity_checks(["sanity.unprepare.unknown-*"])] == ["sanity.unprepare.unknown-claim"]
    assert sanity_checks(["nothing.*"]) == []


def test_a_check_without_the_prefix_or_a_source_or_twice_is_refused() -> None:
    with pytest.raises(DefinitionError, match="must start with 'sanity.'"):
        sanity_check("prepare.x", rule="r", source="s")
    with pytest.raises(DefinitionError, match="say where its rule comes from"):
        sanity_check("sanity.prepare.x", rule="r", source=" ")
    with pytest.raises(DefinitionError, match="already registered"):
        sanity_check("sanity.prepare.idempotent", rule="r", source="s")(lambda ctx: None)
