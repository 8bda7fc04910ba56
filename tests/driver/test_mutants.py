"""The mutant registry: every known-bug mode is documented, and misuse is caught at definition."""

from __future__ import annotations

import pytest

from draguard.harness.driver.mutants import FLAGS, MUTANTS, Mutant, get_mutant, mutant
from draguard.harness.errors import DefinitionError, UsageError

EXPECTED = {
    "forget-before-reset",
    "prepare-started-leak",
    "stale-prepare",
    "unprepare-needs-claim",
    "incomplete-cdi",
    "double-allocation",
    "leave-sharing-state",
}


def test_the_registry_holds_each_known_bug_documented_and_switching_one_flag() -> None:
    assert set(MUTANTS) == EXPECTED
    for name, cls in MUTANTS.items():
        assert cls.name == name and cls.upstream
        assert len((cls.__doc__ or "").strip().splitlines()) > 2, f"{name}: document the bug and how it shows"
        assert sum(getattr(cls, f) for f in FLAGS) == 1
    assert len({tuple(getattr(c, f) for f in FLAGS) for c in MUTANTS.values()}) == len(MUTANTS)


def test_the_correct_driver_switches_no_flag() -> None:
    assert get_mutant(None) is Mutant and get_mutant("none") is Mutant
    assert not any(getattr(Mutant, f) for f in FLAGS)


def test_an_unknown_mutant_name_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UsageError, match="'forget-after-reset': no such mutant; known: double-allocation"):
        get_mutant("forget-after-reset")


def test_defining_a_mutant_wrongly_is_refused_with_the_class_named() -> None:
    with pytest.raises(DefinitionError, match="already registered"):

        @mutant("stale-prepare", upstream="x")
        class Again(Mutant):
            """Doc."""

            accept_stale_prepare = True

    with pytest.raises(DefinitionError, match="Undocumented: add a docstring"):

        @mutant("undocumented", upstream="x")
        class Undocumented(Mutant):
            incomplete_cdi = True

    with pytest.raises(DefinitionError, match="exactly one of"):

        @mutant("two-bugs", upstream="x")
        class TwoBugs(Mutant):
            """Doc."""

            incomplete_cdi = True
            allow_double_allocation = True

    assert set(MUTANTS) == EXPECTED
