"""The published JSON Schema of scenario files (``draguard schema``), for editors and CI.

Built from the pydantic models of ``format.py`` (titles and descriptions come from the field
docstrings), then refined with what only the registries know: the fault kinds, each kind's params
model (``if fault == kind then params: <its schema>``), and the invariant names that ``expect``
accepts. Cross-field rules (unique names, references) are not expressible here; ``draguard validate``
checks them.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic.json_schema import models_json_schema

from draguard.harness.core.registry import FAULTS, INVARIANTS, Registry
from draguard.harness.scenario.format import ScenarioDocument

__all__ = ["SCHEMA_ID", "json_schema"]

SCHEMA_ID = "https://draguard.dev/schemas/scenario-v1alpha1.json"


def json_schema(faults: Registry[Any] | None = None, invariants: Registry[Any] | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a ``draguard.dev/v1alpha1`` Scenario document."""
    faults = FAULTS if faults is None else faults
    invariants = INVARIANTS if invariants is None else invariants
    params_models = [entry.params for entry in faults if entry.params is not None]
    refs, top = models_json_schema(
        [(ScenarioDocument, "validation"), *[(model, "validation") for model in params_models]],
        by_alias=True,
        ref_template="#/$defs/{model}",
    )
    defs: dict[str, Any] = copy.deepcopy(top.get("$defs", {}))
    root_ref = refs[(ScenarioDocument, "validation")]["$ref"].split("/")[-1]
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **defs.pop(root_ref),
        "$defs": defs,
    }
    step = defs["StepSpec"]
    if len(faults):
        step["properties"]["fault"]["enum"] = faults.names()
        step["properties"]["fault"]["description"] += " Known: " + ", ".join(faults.names()) + "."
        rules = []
        for entry in faults:
            params: dict[str, Any] = (
                refs[(entry.params, "validation")] if entry.params is not None else {"type": "object", "maxProperties": 0}
            )
            rules.append({
                "if": {"properties": {"fault": {"const": entry.name}}, "required": ["fault"]},
                "then": {"properties": {"params": params}},
            })  # fmt: skip
        step["allOf"] = rules
    if len(invariants):
        names = {"type": "string", "enum": invariants.names()}
        expect = defs["ExpectSpec"]["properties"]
        expect["violate"]["items"] = names
        for option in expect["hold"].get("anyOf", []):
            if option.get("type") == "array":
                option["items"] = names
    _plain_descriptions(schema)
    return schema


def _plain_descriptions(node: Any) -> None:
    """Docstrings use reST ``code``; editors show Markdown, where one backquote is code."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                node[key] = value.replace("``", "`")
            else:
                _plain_descriptions(value)
    elif isinstance(node, list):
        for item in node:
            _plain_descriptions(item)
