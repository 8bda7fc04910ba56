"""The typed registry: decorators return their target unchanged and reject misuse at once."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from draguard.harness.core.errors import DefinitionError
from draguard.harness.core.registry import CHECKS, FAULTS, INVARIANTS, Registry


class GoodParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node: str = "random"


def evict(ctx: Any, params: GoodParams) -> None:
    """A fault."""


def test_register_returns_the_function_and_stores_a_frozen_entry() -> None:
    registry: Registry[Any] = Registry("fault")
    assert registry.register("evict", summary="evict a pod", params=GoodParams, retries=2)(evict) is evict
    entry = registry.get("evict")
    assert (entry.name, entry.summary, entry.target, entry.params, dict(entry.meta)) == (
        "evict", "evict a pod", evict, GoodParams, {"retries": 2}
    )  # fmt: skip
    with pytest.raises(AttributeError):
        entry.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry.meta["retries"] = 3  # type: ignore[index]
    assert "evict" in registry and len(registry) == 1 and [e.name for e in registry] == ["evict"]


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("Evict_Pod", {"summary": "s"}, "is not kebab-case; use a name like 'drain-node'"),
        ("evict", {"summary": "  "}, "has an empty summary; pass summary="),
        ("evict", {"summary": "two\nlines"}, "multi-line summary"),
        ("evict", {"summary": "s", "params": dict}, "is not a pydantic BaseModel subclass"),
        ("evict", {"summary": "s", "params": BaseModel}, "accepts unknown keys; set model_config"),
    ],
)
def test_misuse_is_rejected_at_decoration_naming_the_function(name: str, kwargs: Any, message: str) -> None:
    registry: Registry[Any] = Registry("fault")
    with pytest.raises(DefinitionError, match=message) as info:
        registry.register(name, **kwargs)(evict)
    assert "test_scenario_registry.evict" in str(info.value)


def test_a_duplicate_name_names_both_definitions() -> None:
    registry: Registry[Any] = Registry("fault")
    registry.register("evict", summary="s")(evict)

    def other() -> None: ...

    with pytest.raises(DefinitionError, match=r"'evict' on .*other is already registered by .*\.evict"):
        registry.register("evict", summary="s")(other)


def test_unknown_names_list_the_known_ones() -> None:
    registry: Registry[Any] = Registry("fault")
    registry.register("evict", summary="s")(evict)
    with pytest.raises(KeyError, match="unknown fault 'nope'; known: evict"):
        registry.get("nope")


def test_check_ids_are_dotted_kebab_case() -> None:
    registry: Registry[Any] = Registry("check", name_pattern=CHECKS._pattern)
    registry.register("sanity.unprepare.unknown-claim", summary="s")(evict)
    with pytest.raises(DefinitionError, match="dotted kebab-case"):
        registry.register("sanity..x", summary="s")(evict)


def test_module_registries_exist_and_invariants_are_registered_by_import() -> None:
    import draguard.harness.invariants  # noqa: F401

    assert FAULTS.kind == "fault" and CHECKS.kind == "check"
    assert {"claim-atomic", "gang-atomic", "no-double-allocation", "topology", "no-leak", "no-legacy-mix",
            "sharing-explicit"} <= set(INVARIANTS.names())  # fmt: skip
    assert all(entry.summary.endswith(".") for entry in INVARIANTS)
