"""The published JSON Schema is valid draft 2020-12 and agrees with the loader on examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from draguard.harness.core.registry import Registry
from draguard.harness.scenario import json_schema


def _data(text: str) -> Any:
    return json.loads(json.dumps(YAML(typ="safe", pure=True).load(text)))


def test_the_schema_is_valid_json_schema(faults: Registry[Any]) -> None:
    schema = json_schema(faults=faults)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["spec"]["$ref"] == "#/$defs/ScenarioSpec"
    assert "Number of pods in the gang" in schema["$defs"]["WorkloadSpec"]["properties"]["replicas"]["description"]


def test_the_example_matches_the_schema(faults: Registry[Any], example_text: str) -> None:
    jsonschema.validate(_data(example_text), json_schema(faults=faults))


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("replicas: 3", "replicas: three", "replicas"),
        ("  seed: 7", "  seed: 7\n  unknown: 1", "unknown"),
        ("at: 5s", "at: five", "five"),
        ("fault: evict", "fault: explode", "explode"),
        ("params: {gracePeriod: 10s}", "params: {gracePeriod: 10s, typo: 1}", "typo"),
        ("violate: [gang-atomic]", "violate: [gang-atomik]", "gang-atomik"),
    ],
)
def test_the_schema_rejects_what_the_loader_rejects(
    faults: Registry[Any], example_text: str, old: str, new: str, where: str
) -> None:
    assert old in example_text
    with pytest.raises(jsonschema.ValidationError) as info:
        jsonschema.validate(_data(example_text.replace(old, new, 1)), json_schema(faults=faults))
    assert where in str(info.value)


def test_fault_kinds_and_params_come_from_the_registry(faults: Registry[Any]) -> None:
    schema = json_schema(faults=faults)
    step = schema["$defs"]["StepSpec"]
    assert step["properties"]["fault"]["enum"] == faults.names()
    drain = next(rule for rule in step["allOf"] if rule["if"]["properties"]["fault"]["const"] == "drain-node")
    ref = drain["then"]["properties"]["params"]["$ref"].split("/")[-1]
    assert schema["$defs"][ref]["required"] == ["timeout"]
    assert "``" not in json.dumps(schema)


def test_every_library_scenario_matches_the_schema_with_the_real_fault_kinds() -> None:
    import draguard.chaos  # noqa: F401  (registers the fault kinds)
    from draguard.harness.scenario import discover

    library = Path(__file__).parents[2] / "scenarios"
    files = discover([library])
    schema = json_schema()
    assert len(schema["$defs"]["StepSpec"]["allOf"]) >= 10
    validator = jsonschema.Draft202012Validator(schema)
    for path in files:
        errors = [e.message for e in validator.iter_errors(_data(path.read_text()))]
        assert errors == [], path
